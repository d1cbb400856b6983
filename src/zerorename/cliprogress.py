"""Moved to :mod:`zerorename.cli.progress` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.cli import progress as _moved
from zerorename.cli.progress import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
