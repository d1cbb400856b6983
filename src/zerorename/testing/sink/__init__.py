"""Moved to :mod:`zerorename.servers.sink` (issue 21: the S3 servers are a product feature,
only the in-memory store is test support); this old path is that package itself, so
``python -m zerorename.testing.sink`` still runs the sink. A submodule imported by its old
path (``zerorename.testing.sink.server``) would load a second copy: import those from
:mod:`zerorename.servers.sink`."""

import sys

from zerorename.servers import sink as _moved
from zerorename.servers.sink import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
