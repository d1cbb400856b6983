"""The sink's HTTP/1.1 protocol (one asyncio BufferedProtocol per connection), its process
entry point, and :class:`SinkServer`, which runs it as a child process.

With a certificate and key (``--cert``/``--key``, ``SinkServer(tls=CertPair)``) the sink serves
HTTPS itself (the event loop's TLS transport: no terminator in between), so a client's TLS
cost is measured against a server that only decrypts and counts."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import selectors
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn, Self, cast
from urllib.parse import unquote, unquote_plus

from zerorename.servers.service import Service
from zerorename.servers.sink.model import (
    _BAD,
    _CONTINUE,
    _MAX_HEAD,
    _OTHER_MAX,
    _RECORD_MAX,
    _ZEROS,
    KEEP_MAX,
    TAIL_MAX,
    _classify,
    _Headers,
    _Req,
)
from zerorename.servers.sink.ops import _Sink
from zerorename.servers.tls import CertPair
from zerorename.units import MiB

# connection states
_HEAD, _BODY, _CSIZE, _CDATA, _CEND, _CTRAIL, _STREAM, _DEAD = range(8)


class _Conn(asyncio.BufferedProtocol):
    """One HTTP/1.1 connection: reads into the sink's shared buffer (handling is synchronous,
    so one buffer serves every connection); bodies are kept or only counted."""

    def __init__(self, sink: _Sink, rbuf: memoryview) -> None:
        self.sink, self.rbuf = sink, rbuf
        self.t: asyncio.Transport | None = None
        self.state = _HEAD
        self.head = bytearray()
        self.line = bytearray()
        self.req: _Req | None = None
        self.left = 0
        self.got = 0
        self.keep: bytearray | None = None
        self.keep_max = 0
        self.tail: bytes | None = None  # the last bytes of a discarded aws-chunked body
        self.zeros = 0
        self.paused = False
        self.stash = b""
        self.close_after = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.sink.connections += 1
        self.sink.open_connections += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.sink.open_connections -= 1
        self.state, self.zeros = _DEAD, 0

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.rbuf

    def buffer_updated(self, nbytes: int) -> None:
        self.sink.wire_bytes += nbytes
        # small reads (whole requests, usually) as bytes: searched and sliced in place
        self.feed(self.rbuf[:nbytes] if nbytes > 65536 else self.rbuf[:nbytes].tobytes())

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.state == _STREAM:
            self.pump()

    def fail(self) -> None:
        assert self.t is not None
        self.t.write(_BAD)
        self.t.close()
        self.state = _DEAD

    def feed(self, view: memoryview | bytes) -> None:
        pos, n = 0, len(view)
        while pos < n:
            st = self.state
            if st == _HEAD and not self.head and isinstance(view, bytes):
                end = view.find(b"\r\n\r\n", pos)
                if end >= 0:  # a whole head in this read: no copy into self.head
                    text, pos = view[pos:end], end + 4
                    if text.strip():
                        self.on_head(text.lstrip())
                    continue
            if st in (_BODY, _CDATA):
                k = min(n - pos, self.left)
                if self.keep is not None:
                    if len(self.keep) + k > self.keep_max:
                        self.keep = None  # too large to keep after all: only count it
                    else:
                        self.keep += view[pos : pos + k]
                if self.tail is not None:
                    self.tail = (self.tail + bytes(view[max(pos, pos + k - TAIL_MAX) : pos + k]))[
                        -TAIL_MAX:
                    ]
                self.got += k
                self.left -= k
                pos += k
                if not self.left:
                    if st == _BODY:
                        self.finish()
                    else:
                        self.state = _CEND
            elif st != _STREAM and st != _DEAD:  # a head, or a line of chunked framing
                buf = self.head if st == _HEAD else self.line
                prev = len(buf)
                take = view[pos : pos + 65536]
                buf += take
                end = buf.find(b"\r\n\r\n" if st == _HEAD else b"\r\n", max(0, prev - 3))
                if end < 0:
                    pos += len(take)
                    if len(buf) > _MAX_HEAD:
                        self.fail()
                    continue
                pos += end + (4 if st == _HEAD else 2) - prev
                text = bytes(buf[:end])
                buf.clear()
                if st == _HEAD:
                    if text.strip():  # (stray empty lines between requests are allowed)
                        self.on_head(text.lstrip())
                else:
                    self.on_chunk_line(st, text)
            elif st == _STREAM:
                self.stash += view[pos:]
                return
            else:
                return

    def on_chunk_line(self, st: int, text: bytes) -> None:
        if st == _CSIZE:
            try:
                self.left = int(text.split(b";", 1)[0], 16)
            except ValueError:
                self.fail()
                return
            self.state = _CDATA if self.left else _CTRAIL
        elif st == _CEND:
            self.state = _CSIZE
        elif not text:  # the empty line after the trailers
            self.finish()

    def on_head(self, head: bytes) -> None:
        try:
            text = head.decode("latin-1")
            method, target, _ = text.partition("\r\n")[0].split(" ")
            h = _Headers(text)
            te = h.get("transfer-encoding").lower() if "\r\ntransfer-encoding:" in h.low else ""
            length = 0 if "chunked" in te else int(h.get("content-length") or 0)
        except ValueError:
            self.fail()
            return
        path, _, qs = target.partition("?")
        q: dict[str, str] = {}
        if qs:
            for item in qs.split("&"):
                name, _, value = item.partition("=")
                q[name] = unquote_plus(value) if "%" in value or "+" in value else value
        if "%" in path:
            path = unquote(path)
        if ".localhost" in text:  # virtual-host style: bucket.localhost[:port]
            host = h.get("host")
            host = host.rpartition(":")[0] or host
            if host.endswith(".localhost"):
                path = f"/{host[:-10]}{path}"
        if path.startswith("/__sink/"):
            op = "SinkStats" if path == "/__sink/stats" else "SinkReset"
        else:
            bucket, _, key = path[1:].partition("/")
            op = _classify(method, bucket, key, q, h)
        self.req = _Req(method, path, q, h, op)
        keep, decoded = _OTHER_MAX, length
        if op == "PutObject":  # JSON (the committers' records) is kept even when large
            keep = _RECORD_MAX if "json" in h.get("content-type") else KEEP_MAX
            if "\r\nx-amz-decoded-content-length:" in h.low:
                value = h.get("x-amz-decoded-content-length")
                decoded = int(value) if value.isdigit() else 0
        if op == "UploadPart" or decoded > keep:
            self.keep = None
        else:
            self.keep, self.keep_max = bytearray(), max(length, keep + MiB)
        aws = "\r\nx-amz-decoded-content-length:" in h.low or "aws-chunked" in h.get(
            "content-encoding"
        )
        self.tail = b"" if self.keep is None and aws and "chunked" not in te else None
        self.got = 0
        assert self.t is not None
        if length or "chunked" in te:
            if h.get("expect").lower() == "100-continue":
                self.t.write(_CONTINUE)
            self.state, self.left = (_CSIZE, 0) if "chunked" in te else (_BODY, length)
        else:
            self.finish()

    def finish(self) -> None:
        r, t = self.req, self.t
        assert r is not None and t is not None
        r.size = self.got
        r.body = bytes(self.keep) if self.keep is not None else None
        if r.body is None and self.tail:
            r.tail = self.tail
        self.keep, self.tail, self.req, self.state = None, None, None, _HEAD
        t.write(self.sink.handle(r))
        if r.zeros:
            self.zeros, self.state = r.zeros, _STREAM
            t.pause_reading()
            self.close_after = r.close
            self.pump()
        elif r.close:
            t.close()
            self.state = _DEAD

    def pump(self) -> None:
        """Stream the zeros of a discarded object, as fast as the socket takes them."""
        t = self.t
        assert t is not None
        while self.zeros and not self.paused:
            k = min(self.zeros, len(_ZEROS))
            t.write(_ZEROS[:k])
            self.zeros -= k
        if self.zeros or self.state != _STREAM:
            return
        self.state = _HEAD
        if self.close_after:
            t.close()
            self.state = _DEAD
            return
        t.resume_reading()
        stash, self.stash = self.stash, b""
        if stash:
            self.feed(stash)


# -- process entry point ----------------------------------------------------------------------
async def serve(
    host: str, port: int, buckets: Sequence[str], tls: ssl.SSLContext | None = None
) -> None:
    """Serve (HTTPS with ``tls``) until SIGTERM/SIGINT or until the parent process dies;
    prints SINK READY <port>."""
    loop = asyncio.get_running_loop()
    sink = _Sink(buckets)
    rbuf = memoryview(bytearray(MiB))
    server = await loop.create_server(
        lambda: _Conn(sink, rbuf), host, port, backlog=4096, reuse_address=True, ssl=tls
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    parent = os.getppid()

    def watchdog() -> None:
        if os.getppid() != parent:
            stop.set()
        else:
            loop.call_later(1.0, watchdog)

    loop.call_later(1.0, watchdog)
    print(f"SINK READY {server.sockets[0].getsockname()[1]}", flush=True)
    await stop.wait()
    server.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m zerorename.servers.sink",
        description="A do-nothing S3 server for benchmarks (see zerorename.servers.sink).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bucket", action="append", default=[], help="pre-create (repeatable)")
    parser.add_argument("--cert", help="serve HTTPS: the certificate chain (PEM)")
    parser.add_argument("--key", help="the certificate's private key (PEM), with --cert")
    args = parser.parse_args(argv)
    if bool(args.cert) != bool(args.key):
        parser.error("--cert and --key go together")
    tls = CertPair(Path(args.cert), Path(args.key)).server_context() if args.cert else None
    factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:
        pass
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(args.host, args.port, args.bucket, tls))
    return 0


class SinkServer(Service):
    """Runs the sink as a child process: ``with SinkServer() as s: s.endpoint_url``.

    With ``tls`` (a certificate and key, e.g. ``make_tls_files(d).server``) it serves HTTPS;
    :meth:`stats` then verifies it with the CA carried in the certificate's chain file."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        buckets: Sequence[str] = ("bench",),
        tls: CertPair | None = None,
    ) -> None:
        self.host = host
        self.buckets = tuple(buckets)
        self.tls = tls
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"{'https' if self.tls is not None else 'http'}://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("the sink is not running")
        return self._proc.pid

    def start(self, timeout: float = 30.0) -> Self:
        """Spawn the child and wait for its READY line (RuntimeError with its stderr if not)."""
        if self._proc is not None:
            return self
        cmd = [sys.executable, "-m", "zerorename.servers.sink", "--host", self.host, "--port", "0"]
        for b in self.buckets:
            cmd += ["--bucket", b]
        if self.tls is not None:
            cmd += ["--cert", str(self.tls.cert), "--key", str(self.tls.key)]
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parents[2])  # importable even when not installed
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop())
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr, env=env
        )
        self._proc = proc
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = b""
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self._fail(f"no READY line within {timeout:g} s")
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    self._fail(f"exited with code {proc.wait()} before it was ready")
                line += chunk
        words = line.split()
        if words[:2] != [b"SINK", b"READY"]:
            self._fail(f"unexpected first line {line!r}")
        self.port = int(words[2])
        return self

    def _fail(self, why: str) -> NoReturn:
        self._terminate()
        err = b""
        if self._stderr is not None:
            self._stderr.seek(0)
            err = self._stderr.read()
        self.stop()
        raise RuntimeError(f"the sink {why}; stderr:\n{err.decode(errors='replace')[-4000:]}")

    def stop(self) -> None:
        """Terminate the child (kill after 5 s); safe to call twice."""
        self._terminate()
        err, self._stderr = self._stderr, None
        if err is not None:
            err.close()

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()

    def _call(self, method: str, path: str) -> bytes:
        req = urllib.request.Request(self.endpoint_url + path, method=method)
        # the chain file ends with the CA that signed the certificate: it verifies the sink
        ctx = ssl.create_default_context(cafile=str(self.tls.cert)) if self.tls else None
        with urllib.request.urlopen(req, timeout=30, context=ctx) as resp:
            body: bytes = resp.read()
            return body

    def stats(self) -> dict[str, Any]:
        """{"requests": {op: count}, "bytes_received": body bytes, "connections": accepted,...}"""
        result: dict[str, Any] = json.loads(self._call("GET", "/__sink/stats"))
        return result

    def reset_stats(self) -> None:
        """Zero the request, byte and connection counters (objects are kept)."""
        self._call("POST", "/__sink/reset")
