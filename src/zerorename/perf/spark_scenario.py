"""Moved to :mod:`zerorename.perf.scenarios.spark` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.perf.scenarios import spark as _moved
from zerorename.perf.scenarios.spark import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
