"""Moved to :mod:`zerorename.spark_adapter.stream.read` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.spark_adapter.stream import read as _moved
from zerorename.spark_adapter.stream.read import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
