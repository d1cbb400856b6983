"""Moved to :mod:`zerorename.cli.commands` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.cli import commands as _moved
from zerorename.cli.commands import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
