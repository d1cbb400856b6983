"""Moved to :mod:`zerorename.committers.commit.policy` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.committers.commit import policy as _moved
from zerorename.committers.commit.policy import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
