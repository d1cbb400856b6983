"""Test support shipped with zerorename: the in-memory store (:mod:`.memstore`, its state,
faults and writers), virtual rounds of requests (:mod:`.rounds`) and a Hadoop S3A job laid
out as a crashed one (:mod:`.s3acrash`). The S3 servers, the fault proxy and the test
targets moved to :mod:`zerorename.servers` (their old paths here are aliases).

Importing this package is cheap.
"""

from zerorename.servers.errors import RgwNotInstalled, ServerStartError, TestingError

__all__ = ["RgwNotInstalled", "ServerStartError", "TestingError"]
