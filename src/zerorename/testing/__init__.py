"""Test infrastructure shipped with zerorename: local S3 servers, test targets, a fault proxy.

Importing this package is cheap; the servers import moto or start Ceph only when used.
"""

from zerorename.testing.errors import RgwNotInstalled, ServerStartError, TestingError

__all__ = ["RgwNotInstalled", "ServerStartError", "TestingError"]
