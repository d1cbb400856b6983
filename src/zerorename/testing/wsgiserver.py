"""Moved to :mod:`zerorename.servers.wsgiserver` (issue 21: the S3 servers are a product feature,
only the in-memory store is test support); this old path is that module itself."""

import sys

from zerorename.servers import wsgiserver as _moved
from zerorename.servers.wsgiserver import *  # noqa: F403 (its names, for mypy)

sys.modules[__name__] = _moved
