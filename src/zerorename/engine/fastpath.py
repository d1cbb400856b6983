"""Moved to :mod:`zerorename.engine.wire.fastpath` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.engine.wire import fastpath as _moved
from zerorename.engine.wire.fastpath import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
