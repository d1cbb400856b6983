"""Moved to :mod:`zerorename.perf.scenarios.sweep` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.perf.scenarios import sweep as _moved
from zerorename.perf.scenarios.sweep import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
