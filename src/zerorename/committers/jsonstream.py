"""Moved to :mod:`zerorename.committers.codec.jsonstream` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.committers.codec import jsonstream as _moved
from zerorename.committers.codec.jsonstream import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
