"""Moved to :mod:`zerorename.engine.bodies.filebody` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.engine.bodies import filebody as _moved
from zerorename.engine.bodies.filebody import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
