"""Moved to :mod:`zerorename.engine.bodies.sources` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.engine.bodies import sources as _moved
from zerorename.engine.bodies.sources import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
