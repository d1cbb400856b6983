"""Moved to :mod:`zerorename.engine.results` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.engine import results as _moved
from zerorename.engine.results import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
