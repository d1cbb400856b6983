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
lost); ``html_200`` (read the request, answer ``200 OK`` with an HTML page itself, as a
captive portal would: nothing is forwarded); ``strip_etag`` (forward, then relay the answer
without its ETag header); ``no_such_upload`` (404 NoSuchUpload with S3's XML body, nothing
forwarded: what S3 answers a complete whose upload is gone); ``drip`` (forward, relay the
answer's head at once and then its body one byte every ``delay`` seconds: a server that
drips bytes). The Host header is forwarded unchanged, so SigV4 signatures stay
valid.

``proxy.log`` times every request (its operation, key, start and end, error) in the shape of
:mod:`zerorename.servers.requestlog`, so ``sequential_requests(proxy.log)`` counts the
requests a client sent one after another; with a ``latency`` rule on every request that is
what a remote store's round trips cost it.

With ``tls=`` (a server :class:`ssl.SSLContext`, e.g. ``session_tls().server.server_context()``)
the proxy speaks HTTPS to its clients and plain HTTP upstream (a TLS terminator): every fault
above then happens inside TLS (a reset is a TCP RST under the TLS session). Handshakes are
counted in ``stats.tls_handshakes`` / ``stats.tls_failures``; a client that refuses the
certificate never reaches the rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Collection
from typing import Any, NamedTuple, Self
from urllib.parse import unquote, urlsplit

from zerorename.servers.errors import TestingError
from zerorename.servers.faultrules import (
    FAULT_KINDS,
    FaultKind,
    FaultRule,
    Headers,
    ProxyStats,
    RequestRecord,
    classify,
    encode_head,
    end_to_end,
    error_response,
    header_map,
    html_response,
    parse_head,
    token_in,
)
from zerorename.servers.proxybody import Body, ClientGone, Reset, Sink, discard, rst
from zerorename.servers.requestlog import Request
from zerorename.servers.service import Service

__all__ = [
    "FAULT_KINDS",
    "FaultKind",
    "FaultProxy",
    "FaultRule",
    "Headers",
    "ProxyStats",
    "Request",
    "RequestRecord",
    "classify",
    "error_response",
]

_HANDSHAKE_TIMEOUT = 30.0
_HEADER_LIMIT = 1 << 20
_NO_BODY_STATUS = (204, 304)


# ---------------------------------------------------------------- HTTP helpers

Upstream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class _Head(NamedTuple):
    """A request's head as read: first line, its method and HTTP version, headers, and
    the decoded path."""

    first: str
    method: str
    version: str
    headers: Headers
    path: str


# ---------------------------------------------------------------- the proxy


class FaultProxy(Service):
    """The proxy; see the module docstring. Rules can be added and cleared while it runs."""

    def __init__(
        self,
        upstream_url: str,
        *,
        rules: Collection[FaultRule] = (),
        host: str = "127.0.0.1",
        port: int = 0,
        tls: ssl.SSLContext | None = None,
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
        self._tls = tls
        self._rules: list[FaultRule] = list(rules)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._serving = 0  # requests between their head and the end of their answer
        self.stats = ProxyStats()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._conns: set[asyncio.Task[Any]] = set()
        self._markers: dict[int, threading.Event] = {}  # settle(): local port -> accepted
        self._handshaking = 0

    # ------------------------------------------------------------ public API

    @property
    def url(self) -> str:
        if not self._ready.is_set() or self._error is not None:
            raise TestingError("FaultProxy is not running; call start() first")
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://{self._host}:{self._port}"

    @property
    def tls(self) -> bool:
        """True when clients reach the proxy over HTTPS."""
        return self._tls is not None

    @property
    def port(self) -> int:
        return self._port

    @property
    def log(self) -> list[Request]:
        """Every request that ended, by number, with its operation, bucket, key, start and
        end (``time.perf_counter`` seconds, from the head read to the answer's last byte) and
        error (the fault the proxy injected, ``HTTP <status>`` for an upstream error answer,
        or what cut it); :func:`~zerorename.servers.requestlog.sequential_requests` reads it.
        :meth:`reset` starts it (and the numbering) over. See :meth:`timed_log`."""
        return self.timed_log()

    def timed_log(self, timeout: float = 5.0) -> list[Request]:
        """:attr:`log`, once no request is being served (at most ``timeout`` seconds): a
        client may hold its answer before the proxy has logged it."""
        self._wait_idle(timeout)
        return self.stats.timed()

    def reset(self, timeout: float = 5.0) -> None:
        """``stats.reset()`` once no request is being served (at most ``timeout`` seconds),
        so no request answered before this call is logged after it."""
        self._wait_idle(timeout)
        self.stats.reset()

    def cpu_seconds(self) -> float:
        """CPU seconds the proxy's thread used so far: what a benchmark that runs the
        proxy in its own process takes out of its figures."""
        thread = self._thread
        if thread is None or thread.ident is None:
            raise TestingError("FaultProxy is not running; call start() first")
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))

    def _wait_idle(self, timeout: float) -> None:
        with self._idle:
            self._idle.wait_for(lambda: self._serving == 0, timeout)

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

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until every client connection opened before this call was accepted and has
        finished its TLS handshake, so the stats count it (a client may have given up before
        the proxy's side of a failed handshake ended). Uses a marker connection that is
        accepted after them (the listen queue is FIFO) and is not counted."""
        done = threading.Event()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as marker:
            marker.bind((self._host, 0))  # known before the proxy can see it
            with self._lock:
                self._markers[marker.getsockname()[1]] = done
            marker.settimeout(timeout)
            marker.connect((self._host, self._port))
            if not done.wait(timeout):
                raise TestingError(f"FaultProxy did not accept a connection in {timeout}s")
        deadline = threading.Event()
        for _ in range(int(timeout * 100)):
            with self._lock:
                if self._handshaking == 0:
                    return
            deadline.wait(0.01)
        raise TestingError(f"FaultProxy TLS handshakes still running after {timeout}s")

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

    def __repr__(self) -> str:
        return (
            f"FaultProxy({'https' if self._tls else 'http'}://{self._host}:{self._port} -> "
            f"{self.upstream_url}, {len(self.rules)} rules)"
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
                if rule.matches(op, path) and rule.decide() and chosen is None:
                    chosen = rule
        return chosen

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = writer.get_extra_info("peername")
        with self._lock:
            marker = self._markers.pop(peer[1], None) if peer else None
        if marker is not None:  # settle()'s connection: not a client's
            writer.transport.abort()
            marker.set()
            return
        self._conns.add(task)
        self.stats._connection()
        upstream: Upstream | None = None
        try:
            if self._tls is not None and not await self._handshake(writer):
                return
            while True:
                keep, upstream = await self._one_request(reader, writer, upstream)
                if not keep:
                    break
            with contextlib.suppress(ConnectionError, OSError):
                await writer.drain()
                writer.close()
        except Reset:
            rst(writer)
        except (ClientGone, ConnectionError, OSError, asyncio.IncompleteReadError, ValueError):
            writer.transport.abort()
        except asyncio.CancelledError:
            # only stop() cancels handlers; ending normally keeps asyncio's stream callback
            # (which calls task.exception()) from logging a spurious CancelledError
            writer.transport.abort()
        finally:
            if upstream is not None:
                upstream[1].transport.abort()
            self._conns.discard(task)

    async def _handshake(self, writer: asyncio.StreamWriter) -> bool:
        """TLS toward the client on this connection; False (connection dropped) when the
        handshake fails, e.g. because the client refused the certificate."""
        assert self._tls is not None
        with self._lock:
            self._handshaking += 1
        try:
            await writer.start_tls(self._tls, ssl_handshake_timeout=_HANDSHAKE_TIMEOUT)
        except (ssl.SSLError, ConnectionError, OSError, TimeoutError):
            self.stats._handshake(None)
            writer.transport.abort()
            return False
        finally:
            with self._lock:
                self._handshaking -= 1
        obj = writer.get_extra_info("ssl_object")
        cipher = obj.cipher() if obj is not None else None
        version = obj.version() if obj is not None else None
        self.stats._handshake((str(version), str(cipher[0] if cipher else None)))
        return True

    async def _one_request(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream: Upstream | None,
    ) -> tuple[bool, Upstream | None]:
        """Serve one request; returns (keep the client connection, upstream connection)."""
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                raise ClientGone from exc
            return False, upstream  # clean close between requests
        first, headers = parse_head(raw)
        method, target, version = first.split(" ", 2)
        op = classify(method, target, headers)
        path = unquote(urlsplit(target).path)
        rule = self._decide(op, path)
        fault = rule.fault if rule is not None else None
        number = self.stats._record(op, method, path, fault)
        with self._lock:
            self._serving += 1
        start = time.perf_counter()
        # the faults the proxy answers itself (or cuts) are the request's error
        error: str | None = fault if fault not in (None, "latency", "strip_etag") else None
        try:
            keep, upstream, status = await self._serve(
                reader, writer, upstream, _Head(first, method, version, headers, path), rule
            )
        except BaseException as exc:
            error = error or type(exc).__name__.lstrip("_")
            raise
        else:
            if error is None and status >= 400:
                error = f"HTTP {status}"
        finally:
            bucket, _, key = path.lstrip("/").partition("/")
            end = time.perf_counter()
            self.stats._answered(Request(number, op, bucket, key, start, end, error))
            with self._idle:
                self._serving -= 1
                self._idle.notify_all()
        return keep, upstream

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream: Upstream | None,
        head: _Head,
        rule: FaultRule | None,
    ) -> tuple[bool, Upstream | None, int]:
        """Apply ``rule`` to one request whose head was read, forward it unless the fault
        answers it, relay the answer; returns (keep the client connection, upstream
        connection, the status the client was sent)."""
        first, method, version, headers, path = head
        fault = rule.fault if rule is not None else None
        named = header_map(headers)
        chunked = token_in(named.get("transfer-encoding"), "chunked")
        length = int(named.get("content-length") or 0)
        expect = token_in(named.get("expect"), "100-continue")
        client_close = token_in(named.get("connection"), "close") or version == "HTTP/1.0"

        async def read_body(sink: Sink, reset_after: int | None = None) -> None:
            body = Body(reader, reset_after)
            if expect and reset_after != 0:
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                await writer.drain()
            if chunked:
                await body.chunked(sink)
            elif length:
                await body.sized(length, sink)
            elif reset_after == 0:
                raise Reset

        if rule is not None and fault in ("slowdown", "internal_error", "no_such_upload"):
            status = {"slowdown": 503, "internal_error": 500}.get(fault, 404)
            if expect:
                # answer before the body is sent (as S3 does); the connection cannot be reused
                writer.write(error_response(fault, path, head=method == "HEAD", close=True))
                await writer.drain()
                return False, upstream, status
            await read_body(discard)
            writer.write(error_response(fault, path, head=method == "HEAD", close=client_close))
            await writer.drain()
            return not client_close, upstream, status
        if rule is not None and fault == "html_200":
            await read_body(discard)
            writer.write(html_response(head=method == "HEAD", close=client_close))
            await writer.drain()
            return not client_close, upstream, 200
        if rule is not None and fault == "reset":
            await read_body(discard, rule.reset_after_bytes or 0)
            raise Reset  # body shorter than reset_after_bytes: reset after all of it
        if rule is not None and fault == "stall":
            await read_body(discard)
            await asyncio.sleep(rule.delay)
            return False, upstream, 0
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
                await read_body(discard)
                msg = f"upstream {self.upstream_url} unreachable: {exc}".encode()
                writer.write(
                    encode_head(
                        "HTTP/1.1 502 Bad Gateway",
                        [("Content-Length", str(len(msg))), ("Connection", "close")],
                    )
                    + msg
                )
                await writer.drain()
                return False, None, 502
            self.stats._connection(upstream=True)
        up_reader, up_writer = upstream
        # hop-by-hop headers stay on their hop; botocore does not sign any of them
        up_writer.write(encode_head(first, end_to_end(headers, "expect")))

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
                raise Reset from exc  # upstream died: the client sees a reset
            status_line, resp_headers = parse_head(raw_resp)
            status = int(status_line.split(" ", 2)[1])
            if status != 100:
                break
        drop = rule is not None and fault == "drop_response"
        resp_named = header_map(resp_headers)
        up_close = token_in(resp_named.get("connection"), "close")
        resp_chunked = token_in(resp_named.get("transfer-encoding"), "chunked")
        resp_len = resp_named.get("content-length")
        no_body = method == "HEAD" or status in _NO_BODY_STATUS or 100 <= status < 200
        # a body delimited by the connection's end can only be relayed the same way
        until_eof = not (no_body or resp_chunked or resp_len is not None)
        keep = not client_close and not until_eof
        strip = ("etag",) if rule is not None and fault == "strip_etag" else ()
        out_headers = end_to_end(resp_headers, *strip)
        if not keep:
            out_headers.append(("Connection", "close"))
        if not drop:
            writer.write(encode_head(status_line, out_headers))

        async def to_client(data: bytes) -> None:
            if drop:
                return
            if rule is None or fault != "drip":
                self.stats._relayed(len(data))
                writer.write(data)
                await writer.drain()
                return
            for i in range(len(data)):  # one byte, then a pause: a dripping server
                if writer.is_closing():
                    raise ClientGone
                self.stats._relayed(1)
                writer.write(data[i : i + 1])
                await writer.drain()
                await asyncio.sleep(rule.delay)

        up_body = Body(up_reader)
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
            raise Reset
        await writer.drain()
        return keep, upstream, status
