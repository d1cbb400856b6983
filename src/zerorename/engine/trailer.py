"""Moved to :mod:`zerorename.engine.wire.trailer` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.engine.wire import trailer as _moved
from zerorename.engine.wire.trailer import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
