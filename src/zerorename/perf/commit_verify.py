"""Moved to :mod:`zerorename.perf.scenarios.commit.verify` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.perf.scenarios.commit import verify as _moved
from zerorename.perf.scenarios.commit.verify import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
