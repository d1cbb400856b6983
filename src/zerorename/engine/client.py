"""Moved to :mod:`zerorename.engine.wire.client` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.engine.wire import client as _moved
from zerorename.engine.wire.client import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
