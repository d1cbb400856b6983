"""Moved to :mod:`zerorename.committers.s3a.read` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.committers.s3a import read as _moved
from zerorename.committers.s3a.read import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
