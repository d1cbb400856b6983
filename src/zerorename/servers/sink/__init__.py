"""A do-nothing S3 server for benchmarks: valid S3 answers for almost no work per request.

An S3 test server next to moto and RGW. Run it as its own process (``python -m
zerorename.servers.sink``, or :class:`SinkServer`) so its CPU is not counted against the
client under test. Raw ``asyncio`` protocol on uvloop, path-style addressing, no signature
checks, state in memory. PutObject bodies up to 8 MiB (JSON: 256 MiB) are kept, so the
committers' records round-trip exactly; larger bodies and all part data are counted and
dropped, and GetObject of such an object streams zeros with ``x-zerorename-sink: discarded``.
"""

from zerorename.servers.sink.server import SinkServer, main, serve

__all__ = ["SinkServer", "main", "serve"]
