"""Moved to :mod:`zerorename.cli.json` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.cli import json as _moved
from zerorename.cli.json import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
