"""Moved to :mod:`zerorename.spark_adapter.write` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.spark_adapter import write as _moved
from zerorename.spark_adapter.write import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
