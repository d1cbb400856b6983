"""Moved to :mod:`zerorename.cli.jobs` (issue 21).

This old path is that module itself (the same module object), for code that still imports
it from here."""

import sys

from zerorename.cli import jobs as _moved
from zerorename.cli.jobs import *  # noqa: F403 (its names, for mypy)

# the handlers zerorename.sim runs by this path (for mypy; the star import leaves them)
from zerorename.cli.jobs import _jobs_action as _jobs_action
from zerorename.cli.jobs import _uploads_abort as _uploads_abort

sys.modules[__name__] = _moved
