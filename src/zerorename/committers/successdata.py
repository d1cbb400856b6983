"""Moved to :mod:`zerorename.committers.codec.success` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.committers.codec import success as _moved
from zerorename.committers.codec.success import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
