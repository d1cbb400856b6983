"""Moved to :mod:`zerorename.committers.codec.pending` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.committers.codec import pending as _moved
from zerorename.committers.codec.pending import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
