"""A fault-injecting HTTP/1.1 reverse proxy for S3 tests (faults on the wire, not by patching).

``with FaultProxy(upstream_url) as proxy:`` runs an asyncio server on its own thread and event
loop, on 127.0.0.1 with a free port; point the client at ``proxy.url``. Each request is
classified into its S3 operation (path-style addressing) and checked against the rules:

    proxy.add_rule(FaultRule(operation="UploadPart", fault="slowdown", schedule={1, 3}))

Fault kinds: ``slowdown`` (503 SlowDown), ``internal_error`` (500 InternalError) - both with an
S3 XML error body; ``reset`` (TCP RST to the client after ``reset_after_bytes`` request-body
bytes, nothing forwarded); ``latency`` (wait ``delay`` seconds, then forward); ``stall`` (read
the request, send nothing for ``delay`` seconds, then close); ``drop_response`` (forward the
request, let the server act on it, then RST the client instead of answering: the response is
lost). The Host header is forwarded unchanged, so SigV4 signatures stay valid.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import socket
import struct
import threading
import uuid
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from email.utils import formatdate
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import parse_qsl, unquote, urlsplit

from zerorename.testing.errors import TestingError

FaultKind = Literal["slowdown", "internal_error", "reset", "latency", "stall", "drop_response"]
FAULT_KINDS: tuple[str, ...] = (
    "slowdown",
    "internal_error",
    "reset",
    "latency",
    "stall",
    "drop_response",
)
_CHUNK = 64 * 1024
_HEADER_LIMIT = 1 << 20
_NO_BODY_STATUS = (204, 304)

Headers = list[tuple[str, str]]


# ---------------------------------------------------------------- classification (pure)

_BUCKET_GET_SUBRESOURCES = {
    "uploads": "ListMultipartUploads",
    "versions": "ListObjectVersions",
    "location": "GetBucketLocation",
    "versioning": "GetBucketVersioning",
    "policy": "GetBucketPolicy",
    "acl": "GetBucketAcl",
    "tagging": "GetBucketTagging",
    "lifecycle": "GetBucketLifecycleConfiguration",
    "cors": "GetBucketCors",
    "encryption": "GetBucketEncryption",
}


def classify(method: str, target: str, headers: Headers | None = None) -> str:
    """The S3 operation name of a path-style request (``"ListBuckets"``, ``"UploadPart"``...).

    ``target`` is the request target (path and query). Unknown shapes give ``"<METHOD>"``
    plus ``Bucket``/``Object`` (e.g. ``"PATCHObject"``).
    """
    method = method.upper()
    split = urlsplit(target)
    path = unquote(split.path)
    query = {k for k, _ in parse_qsl(split.query, keep_blank_values=True)}
    names = {k.lower() for k, _ in headers or ()}
    bucket, _, key = path.lstrip("/").partition("/")
    if not bucket:
        return "ListBuckets" if method == "GET" else f"{method}Service"
    if not key:
        if method == "GET":
            if "list-type" in query:
                return "ListObjectsV2"
            for sub, op in _BUCKET_GET_SUBRESOURCES.items():
                if sub in query:
                    return op
            return "ListObjects"
        if method == "POST" and "delete" in query:
            return "DeleteObjects"
        if method == "PUT":
            return "PutBucketVersioning" if "versioning" in query else "CreateBucket"
        if method == "DELETE":
            return "DeleteBucket"
        if method == "HEAD":
            return "HeadBucket"
        return f"{method}Bucket"
    if method == "POST":
        if "uploads" in query:
            return "CreateMultipartUpload"
        if "uploadId" in query:
            return "CompleteMultipartUpload"
    elif method == "PUT":
        copy = "x-amz-copy-source" in names
        if "partNumber" in query and "uploadId" in query:
            return "UploadPartCopy" if copy else "UploadPart"
        if "tagging" in query:
            return "PutObjectTagging"
        if "acl" in query:
            return "PutObjectAcl"
        return "CopyObject" if copy else "PutObject"
    elif method == "GET":
        if "uploadId" in query:
            return "ListParts"
        if "tagging" in query:
            return "GetObjectTagging"
        if "acl" in query:
            return "GetObjectAcl"
        return "GetObject"
    elif method == "HEAD":
        return "HeadObject"
    elif method == "DELETE":
        if "uploadId" in query:
            return "AbortMultipartUpload"
        if "tagging" in query:
            return "DeleteObjectTagging"
        return "DeleteObject"
    return f"{method}Object"


# ---------------------------------------------------------------- rules and stats


@dataclass(eq=False)
class FaultRule:
    """When and how to break requests of one operation (or all, with ``operation=None``).

    Choose at most one selector: ``rate`` (probability, seeded by ``seed``), ``every`` (every
    N-th matching request), ``schedule`` (1-based indexes among matching requests) or
    ``burst=(first, count)`` (``count`` consecutive requests from index ``first``); with none,
    every matching request is faulted. ``max_faults`` caps the faults of this rule.
    ``path_contains`` narrows the match to requests whose decoded path contains it.
    """

    operation: str | None = None
    fault: FaultKind = "slowdown"
    rate: float | None = None
    every: int | None = None
    schedule: Collection[int] | None = None
    burst: tuple[int, int] | None = None
    reset_after_bytes: int | None = None
    delay: float = 1.0
    max_faults: int | None = None
    path_contains: str | None = None
    seed: int = 0
    #: matching requests seen so far / faults injected so far (updated by the proxy).
    seen: int = field(default=0, init=False)
    fired: int = field(default=0, init=False)
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.fault not in FAULT_KINDS:
            raise ValueError(f"fault must be one of {', '.join(FAULT_KINDS)}; got {self.fault!r}")
        chosen = [n for n in ("rate", "every", "schedule", "burst") if getattr(self, n) is not None]
        if len(chosen) > 1:
            raise ValueError(f"give at most one of rate, every, schedule, burst; got {chosen}")
        if self.rate is not None and not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"rate must be in [0, 1], got {self.rate}")
        if self.every is not None and self.every < 1:
            raise ValueError(f"every must be >= 1, got {self.every}")
        if self.burst is not None and (self.burst[0] < 1 or self.burst[1] < 0):
            raise ValueError(f"burst must be (first >= 1, count >= 0), got {self.burst}")
        if self.schedule is not None:
            self.schedule = frozenset(self.schedule)
        if self.delay < 0:
            raise ValueError(f"delay must be >= 0, got {self.delay}")
        if self.reset_after_bytes is not None and self.reset_after_bytes < 0:
            raise ValueError(f"reset_after_bytes must be >= 0, got {self.reset_after_bytes}")
        self._rng = random.Random(self.seed)

    def matches(self, operation: str, path: str) -> bool:
        if self.operation is not None and self.operation != operation:
            return False
        return self.path_contains is None or self.path_contains in path

    def _decide(self) -> bool:
        """Count one matching request; True when it is to be faulted (caller holds the lock)."""
        self.seen += 1
        n = self.seen
        if self.max_faults is not None and self.fired >= self.max_faults:
            return False
        if self.rate is not None:
            hit = self._rng.random() < self.rate
        elif self.every is not None:
            hit = n % self.every == 0
        elif self.schedule is not None:
            hit = n in self.schedule
        elif self.burst is not None:
            hit = self.burst[0] <= n < self.burst[0] + self.burst[1]
        else:
            hit = True
        if hit:
            self.fired += 1
        return hit


@dataclass(frozen=True)
class RequestRecord:
    """One request that went through the proxy, in arrival order."""

    index: int
    operation: str
    method: str
    path: str
    fault: str | None


class ProxyStats:
    """Thread-safe counters: requests per operation and faults per operation and kind."""

    def __init__(self, history: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._requests: collections.Counter[str] = collections.Counter()
        self._faults: dict[str, collections.Counter[str]] = {}
        self._log: collections.deque[RequestRecord] = collections.deque(maxlen=history)
        self._connections = 0
        self._upstream_connections = 0

    def _record(self, op: str, method: str, path: str, fault: str | None) -> None:
        with self._lock:
            self._requests[op] += 1
            if fault is not None:
                self._faults.setdefault(op, collections.Counter())[fault] += 1
            index = sum(self._requests.values())
            self._log.append(RequestRecord(index, op, method, path, fault))

    def _connection(self, upstream: bool = False) -> None:
        with self._lock:
            if upstream:
                self._upstream_connections += 1
            else:
                self._connections += 1

    def requests(self, operation: str | None = None) -> int:
        """Requests seen (for one operation, or all)."""
        with self._lock:
            if operation is None:
                return sum(self._requests.values())
            return self._requests[operation]

    def faults(self, operation: str | None = None, kind: str | None = None) -> int:
        """Faults injected, filtered by operation and/or kind."""
        with self._lock:
            return sum(
                n
                for op, kinds in self._faults.items()
                if operation is None or op == operation
                for k, n in kinds.items()
                if kind is None or k == kind
            )

    @property
    def connections(self) -> int:
        """Client connections accepted (keep-alive reuse keeps this low)."""
        with self._lock:
            return self._connections

    @property
    def upstream_connections(self) -> int:
        with self._lock:
            return self._upstream_connections

    def log(self) -> list[RequestRecord]:
        """The recent requests in arrival order (a copy)."""
        with self._lock:
            return list(self._log)

    def snapshot(self) -> dict[str, Any]:
        """{"requests": {op: n}, "faults": {op: {kind: n}}, "connections": n}."""
        with self._lock:
            return {
                "requests": dict(self._requests),
                "faults": {op: dict(k) for op, k in self._faults.items()},
                "connections": self._connections,
                "upstream_connections": self._upstream_connections,
            }

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._faults.clear()
            self._log.clear()
            self._connections = self._upstream_connections = 0

    def __repr__(self) -> str:
        return f"ProxyStats({self.snapshot()!r})"


# ---------------------------------------------------------------- HTTP helpers


class _Reset(Exception):
    """Abort the client connection with an RST now."""


class _ClientGone(Exception):
    """The client closed the connection (between or during requests)."""


def _parse_head(raw: bytes) -> tuple[str, Headers]:
    lines = raw.decode("latin-1").split("\r\n")
    headers: Headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"malformed header line {line!r}")
        headers.append((name.strip(), value.strip()))
    return lines[0], headers


def _get(headers: Headers, name: str) -> str | None:
    name = name.lower()
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def _has_token(headers: Headers, name: str, token: str) -> bool:
    value = _get(headers, name)
    return value is not None and token in (t.strip().lower() for t in value.split(","))


_HOP_BY_HOP = frozenset(
    ("connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade")
)


def _end_to_end(headers: Headers, *drop: str) -> Headers:
    """``headers`` without the hop-by-hop ones (and those named by Connection, and ``drop``).
    Transfer-Encoding is kept: bodies are relayed with their framing unchanged."""
    named = {t.strip().lower() for t in (_get(headers, "Connection") or "").split(",")}
    skip = _HOP_BY_HOP | named | {d.lower() for d in drop}
    return [(k, v) for k, v in headers if k.lower() not in skip]


def _encode_head(first: str, headers: Headers) -> bytes:
    lines = [first, *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


_ERRORS = {
    "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    "internal_error": (
        500,
        "Internal Server Error",
        "InternalError",
        "We encountered an internal error. Please try again.",
    ),
}


def error_response(kind: str, resource: str, *, head: bool, close: bool) -> bytes:
    """A complete S3 error response (status line, headers, XML body) for ``kind``."""
    status, reason, code, message = _ERRORS[kind]
    request_id = uuid.uuid4().hex[:16].upper()
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>"
        f"<Resource>{_xml_escape(resource)}</Resource><RequestId>{request_id}</RequestId></Error>"
    ).encode()
    headers: Headers = [
        ("Content-Type", "application/xml"),
        ("Content-Length", str(len(body))),
        ("x-amz-request-id", request_id),
        ("Date", formatdate(usegmt=True)),
        ("Server", "zerorename-faultproxy"),
        ("Connection", "close" if close else "keep-alive"),
    ]
    return _encode_head(f"HTTP/1.1 {status} {reason}", headers) + (b"" if head else body)


def _xml_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


Sink = Callable[[bytes], Awaitable[None]]


async def _discard(_: bytes) -> None:
    return None


class _Body:
    """Reads one message body from ``reader`` into ``sink``; counts payload bytes and raises
    :class:`_Reset` once ``reset_after`` of them were read."""

    def __init__(self, reader: asyncio.StreamReader, reset_after: int | None = None) -> None:
        self.reader = reader
        self.reset_after = reset_after
        self.count = 0

    def _budget(self, want: int) -> int:
        if self.reset_after is None:
            return want
        left = self.reset_after - self.count
        if left <= 0:
            raise _Reset
        return min(want, left)

    async def _exact(self, n: int, sink: Sink) -> None:
        while n > 0:
            data = await self.reader.read(self._budget(min(n, _CHUNK)))
            if not data:
                raise _ClientGone
            self.count += len(data)
            n -= len(data)
            await sink(data)
        if self.reset_after is not None and self.count >= self.reset_after:
            raise _Reset

    async def sized(self, length: int, sink: Sink) -> None:
        if self.reset_after == 0:
            raise _Reset
        await self._exact(length, sink)

    async def chunked(self, sink: Sink) -> None:
        if self.reset_after == 0:
            raise _Reset
        while True:
            line = await self._line()
            await sink(line)
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers end with an empty line
                    trailer = await self._line()
                    await sink(trailer)
                    if trailer == b"\r\n":
                        return
            await self._exact(size, sink)
            await sink(await self._line())

    async def until_eof(self, sink: Sink) -> None:
        while data := await self.reader.read(_CHUNK):
            self.count += len(data)
            await sink(data)

    async def _line(self) -> bytes:
        try:
            return await self.reader.readuntil(b"\r\n")
        except asyncio.IncompleteReadError as exc:
            raise _ClientGone from exc


def _rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


# ---------------------------------------------------------------- the proxy


class FaultProxy:
    """The proxy; see the module docstring. Rules can be added and cleared while it runs."""

    def __init__(
        self,
        upstream_url: str,
        *,
        rules: Collection[FaultRule] = (),
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        up = urlsplit(upstream_url)
        if up.scheme != "http" or not up.hostname:
            raise TestingError(
                f"FaultProxy forwards to http:// upstreams only, not {upstream_url!r}"
            )
        self.upstream_url = upstream_url
        self._up_host = up.hostname
        self._up_port = up.port or 80
        self._host = host
        self._port = port
        self._rules: list[FaultRule] = list(rules)
        self._lock = threading.Lock()
        self.stats = ProxyStats()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._conns: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------ public API

    @property
    def url(self) -> str:
        if not self._ready.is_set() or self._error is not None:
            raise TestingError("FaultProxy is not running; call start() first")
        return f"http://{self._host}:{self._port}"

    @property
    def port(self) -> int:
        return self._port

    def add_rule(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove_rule(self, rule: FaultRule) -> None:
        with self._lock:
            self._rules = [r for r in self._rules if r is not rule]

    def clear_rules(self) -> None:
        with self._lock:
            self._rules = []

    @property
    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)

    def start(self) -> Self:
        if self._thread is not None:
            return self
        self._ready.clear()
        self._thread = threading.Thread(target=self._run, name="zr-faultproxy", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None or not self._ready.is_set():
            self._thread.join(5)
            self._thread = None
            raise TestingError(f"FaultProxy could not start: {self._error}") from self._error
        return self

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(stop.set)
        thread.join(30)
        self._ready.clear()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (
            f"FaultProxy({self._host}:{self._port} -> {self.upstream_url}, {len(self.rules)} rules)"
        )

    # ------------------------------------------------------------ loop thread

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._ready.set()
        finally:
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(
            self._handle, self._host, self._port, limit=_HEADER_LIMIT
        )
        self._port = int(server.sockets[0].getsockname()[1])
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for task in list(self._conns):
                task.cancel()
            if self._conns:
                await asyncio.wait(list(self._conns), timeout=5)
            await server.wait_closed()

    def _decide(self, op: str, path: str) -> FaultRule | None:
        chosen = None
        with self._lock:
            for rule in self._rules:
                if rule.matches(op, path) and rule._decide() and chosen is None:
                    chosen = rule
        return chosen

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        self.stats._connection()
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                keep, upstream = await self._one_request(reader, writer, upstream)
                if not keep:
                    break
            with contextlib.suppress(ConnectionError, OSError):
                await writer.drain()
                writer.close()
        except _Reset:
            _rst(writer)
        except (_ClientGone, ConnectionError, OSError, asyncio.IncompleteReadError, ValueError):
            writer.transport.abort()
        except asyncio.CancelledError:
            # only stop() cancels handlers; ending normally keeps asyncio's stream callback
            # (which calls task.exception()) from logging a spurious CancelledError
            writer.transport.abort()
        finally:
            if upstream is not None:
                upstream[1].transport.abort()
            self._conns.discard(task)

    async def _one_request(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None,
    ) -> tuple[bool, tuple[asyncio.StreamReader, asyncio.StreamWriter] | None]:
        """Serve one request; returns (keep the client connection, upstream connection)."""
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                raise _ClientGone from exc
            return False, upstream  # clean close between requests
        first, headers = _parse_head(raw)
        method, target, version = first.split(" ", 2)
        op = classify(method, target, headers)
        path = unquote(urlsplit(target).path)
        rule = self._decide(op, path)
        fault = rule.fault if rule is not None else None
        self.stats._record(op, method, path, fault)

        chunked = _has_token(headers, "Transfer-Encoding", "chunked")
        length = int(_get(headers, "Content-Length") or 0)
        expect = _has_token(headers, "Expect", "100-continue")
        client_close = _has_token(headers, "Connection", "close") or version == "HTTP/1.0"

        async def read_body(sink: Sink, reset_after: int | None = None) -> None:
            body = _Body(reader, reset_after)
            if expect and reset_after != 0:
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                await writer.drain()
            if chunked:
                await body.chunked(sink)
            elif length:
                await body.sized(length, sink)
            elif reset_after == 0:
                raise _Reset

        if rule is not None and fault in ("slowdown", "internal_error"):
            if expect:
                # answer before the body is sent (as S3 does); the connection cannot be reused
                writer.write(error_response(fault, path, head=method == "HEAD", close=True))
                await writer.drain()
                return False, upstream
            await read_body(_discard)
            writer.write(error_response(fault, path, head=method == "HEAD", close=client_close))
            await writer.drain()
            return not client_close, upstream
        if rule is not None and fault == "reset":
            await read_body(_discard, rule.reset_after_bytes or 0)
            raise _Reset  # body shorter than reset_after_bytes: reset after all of it
        if rule is not None and fault == "stall":
            await read_body(_discard)
            await asyncio.sleep(rule.delay)
            return False, upstream
        if rule is not None and fault == "latency":
            await asyncio.sleep(rule.delay)

        # ---- forward
        if upstream is None or upstream[0].at_eof():
            if upstream is not None:
                upstream[1].transport.abort()
            try:
                upstream = await asyncio.open_connection(
                    self._up_host, self._up_port, limit=_HEADER_LIMIT
                )
            except OSError as exc:
                await read_body(_discard)
                msg = f"upstream {self.upstream_url} unreachable: {exc}".encode()
                writer.write(
                    _encode_head(
                        "HTTP/1.1 502 Bad Gateway",
                        [("Content-Length", str(len(msg))), ("Connection", "close")],
                    )
                    + msg
                )
                await writer.drain()
                return False, None
            self.stats._connection(upstream=True)
        up_reader, up_writer = upstream
        # hop-by-hop headers stay on their hop; botocore does not sign any of them
        up_writer.write(_encode_head(first, _end_to_end(headers, "expect")))

        async def to_upstream(data: bytes) -> None:
            up_writer.write(data)
            await up_writer.drain()

        await read_body(to_upstream)
        await up_writer.drain()

        # ---- response
        while True:
            try:
                raw_resp = await up_reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as exc:
                raise _Reset from exc  # upstream died: the client sees a reset
            status_line, resp_headers = _parse_head(raw_resp)
            status = int(status_line.split(" ", 2)[1])
            if status != 100:
                break
        drop = rule is not None and fault == "drop_response"
        up_close = _has_token(resp_headers, "Connection", "close")
        resp_chunked = _has_token(resp_headers, "Transfer-Encoding", "chunked")
        resp_len = _get(resp_headers, "Content-Length")
        no_body = method == "HEAD" or status in _NO_BODY_STATUS or 100 <= status < 200
        # a body delimited by the connection's end can only be relayed the same way
        until_eof = not (no_body or resp_chunked or resp_len is not None)
        keep = not client_close and not until_eof
        out_headers = _end_to_end(resp_headers)
        if not keep:
            out_headers.append(("Connection", "close"))
        if not drop:
            writer.write(_encode_head(status_line, out_headers))

        async def to_client(data: bytes) -> None:
            if not drop:
                writer.write(data)
                await writer.drain()

        up_body = _Body(up_reader)
        if no_body:
            pass
        elif resp_chunked:
            await up_body.chunked(to_client)
        elif resp_len is not None:
            await up_body.sized(int(resp_len), to_client)
        else:
            await up_body.until_eof(to_client)
            up_close = True
        if up_close:
            up_writer.transport.abort()
            upstream = None
        if drop:
            raise _Reset
        await writer.drain()
        return keep, upstream
