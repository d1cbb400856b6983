"""Moved to :mod:`zerorename.committers.s3a.abort` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.committers.s3a import abort as _moved
from zerorename.committers.s3a.abort import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
