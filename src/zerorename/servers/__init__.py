"""S3 endpoints for the benchmarks, the demo and the tests: moto (in this process, or in a
process of its own) and a single-node Ceph RGW (:mod:`.servers`, the launcher ``rgw.sh``),
a do-nothing S3 server for benchmarks (:mod:`.sink`), where a client writes
(:class:`~zerorename.servers.targets.Target`), a throwaway CA and certificates (:mod:`.tls`),
and a proxy that injects faults on the wire (:mod:`.faultproxy`, its rules in
:mod:`.faultrules`, its request log in :mod:`.requestlog`).

Importing this package is cheap; the servers import moto or start Ceph only when used.
"""

from zerorename.servers.errors import RgwNotInstalled, ServerStartError, TestingError

__all__ = ["RgwNotInstalled", "ServerStartError", "TestingError"]
