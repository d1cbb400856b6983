"""A small HTTP/1.1 WSGI server for the in-process moto: keep-alive connections, one thread
per connection (not per request).

werkzeug 3's development server (moto's ``ThreadedMotoServer``) closes the connection after
every answer, so each request cost a TCP connection, a new thread and a 10 ms-poll drain of
the socket. Here a connection serves requests one after another until the client closes it
or asks to (``Connection: close``, HTTP/1.0). Request bodies: ``Content-Length`` (any size,
read as the application asks for it) and ``Transfer-Encoding: chunked`` (decoded; the
environ then has ``wsgi.input_terminated``). ``Expect: 100-continue`` is answered when the
application first reads the body. A body the application left unread is read and dropped
(up to :data:`DRAIN_LIMIT`; past that, or when the client still waits for its 100 Continue,
the connection is closed after the answer). Answers without a Content-Length go out chunked.

The environ is the one werkzeug's server builds (the same PATH_INFO decoding, RAW_URI,
REQUEST_URI, headers joined with ``,``, headers with ``_`` dropped) plus moto's keeping of
``x-amz-meta-`` names with underscores (moto's ``MotoRequestHandler``).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from email.utils import formatdate
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["CONNECTION_THREAD_PREFIX", "DRAIN_LIMIT", "WsgiServer"]

log = logging.getLogger(__name__)

#: names of the threads that serve connections start with this
CONNECTION_THREAD_PREFIX = "zr-wsgi-conn"
#: an unread request body up to this size is read and dropped to keep the connection
DRAIN_LIMIT = 1 << 20
_LINE_LIMIT = 65536
_HEADER_COUNT_LIMIT = 256
_READ = 1 << 16
_NO_BODY = (204, 304)
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_LINGER_SECONDS = 2.0
_LINGER_BYTES = 256 << 20


class _BadRequest(Exception):
    """The request's head cannot be parsed: answer 400 and close."""


class _ClientGone(Exception):
    """The client closed the connection inside a request."""


def _dance(s: str) -> str:
    """werkzeug's ``_wsgi_encoding_dance``: a str as WSGI's latin-1 "bytes in a str"."""
    return s.encode("utf-8").decode("latin-1")


class _Date:
    """The Date header's value, formatted at most once a second."""

    def __init__(self) -> None:
        self._second = -1
        self._value = ""

    def __call__(self) -> str:
        now = int(time.time())
        if now != self._second:
            self._value = formatdate(now, usegmt=True)
            self._second = now
        return self._value


class _Input:
    """``wsgi.input``: the request body, read from the connection as the application asks.
    ``remaining`` is None for a chunked body (then ``chunk`` counts the bytes left in the
    current chunk, and ``done`` tells the last chunk was read)."""

    def __init__(self, rfile: Any, sock: socket.socket, length: int | None, expect: bool):
        self._rfile = rfile
        self._sock = sock
        self.remaining = length
        self.continue_due = expect and length != 0
        self.chunk = 0
        self.done = length == 0

    def _continue(self) -> None:
        self.continue_due = False
        self._sock.sendall(_CONTINUE)

    def _next_chunk(self) -> None:
        line = self._rfile.readline(_LINE_LIMIT)
        if not line.endswith(b"\n"):
            raise _ClientGone
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _ClientGone from None
        if size < 0:
            raise _ClientGone
        if size == 0:
            while True:  # trailers end with an empty line
                trailer = self._rfile.readline(_LINE_LIMIT)
                if not trailer.endswith(b"\n"):
                    raise _ClientGone
                if trailer in (b"\r\n", b"\n"):
                    break
            self.done = True
        self.chunk = size

    def _end_chunk(self) -> None:
        if self._rfile.readline(_LINE_LIMIT) not in (b"\r\n", b"\n"):
            raise _ClientGone

    def read(self, size: int | None = -1) -> bytes:
        if self.done:
            return b""
        if self.continue_due:
            self._continue()
        want = sys.maxsize if size is None or size < 0 else size
        if self.remaining is not None:
            n = min(want, self.remaining)
            data: bytes = self._rfile.read(n)
            if len(data) < n:
                raise _ClientGone
            self.remaining -= n
            self.done = self.remaining == 0
            return data
        parts: list[bytes] = []
        while want > 0 and not self.done:
            if self.chunk == 0:
                self._next_chunk()
                continue
            n = min(want, self.chunk)
            data = self._rfile.read(n)
            if len(data) < n:
                raise _ClientGone
            parts.append(data)
            want -= n
            self.chunk -= n
            if self.chunk == 0:
                self._end_chunk()
            if size is not None and size >= 0:
                break  # a sized read returns what one chunk had
        return b"".join(parts)

    def readinto(self, buf: Any) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    def readline(self, size: int | None = -1) -> bytes:
        if self.done:
            return b""
        if self.continue_due:
            self._continue()
        limit = sys.maxsize if size is None or size < 0 else size
        if self.remaining is not None:
            data: bytes = self._rfile.readline(min(limit, self.remaining))
            self.remaining -= len(data)
            if not data and self.remaining:
                raise _ClientGone
            self.done = self.remaining == 0
            return data
        out = b""
        while not self.done and len(out) < limit and not out.endswith(b"\n"):
            if self.chunk == 0:
                self._next_chunk()
                continue
            got = self._rfile.readline(min(limit - len(out), self.chunk))
            if not got:
                raise _ClientGone
            out += got
            self.chunk -= len(got)
            if self.chunk == 0:
                self._end_chunk()
        return out

    def readlines(self, hint: int = -1) -> list[bytes]:
        return list(iter(self.readline, b""))

    def __iter__(self) -> Any:
        return iter(self.readline, b"")

    def close(self) -> None:
        return None

    def drain(self, limit: int) -> bool:
        """Read and drop what the application left unread (at most ``limit`` bytes); True
        when the connection can carry another request."""
        if self.done:
            return True
        if self.continue_due:
            return False  # the client may or may not send the body now: cannot tell
        if self.remaining is not None and self.remaining > limit:
            return False
        dropped = 0
        while not self.done:
            dropped += len(self.read(_READ))
            if dropped > limit:
                return False
        return True


def _linger(conn: socket.socket) -> None:
    """Close our side and read what the client still sends (a body not read, at most
    :data:`_LINGER_BYTES` for :data:`_LINGER_SECONDS`) before the socket is closed: closing
    with unread bytes sends an RST, which can destroy the answer before the client reads it."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(_LINGER_SECONDS)
        got = 0
        while got < _LINGER_BYTES:
            data = conn.recv(_READ)
            if not data:
                break
            got += len(data)


class WsgiServer:
    """Serves ``app`` on ``host``:``port`` (0: a free port) from :meth:`start` to :meth:`stop`:
    a thread accepts connections, each connection gets a daemon thread of its own."""

    def __init__(self, app: Callable[..., Iterable[bytes]], host: str, port: int = 0) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopping = False
        self._date = _Date()
        self._count = 0
        #: connections accepted so far (what the keep-alive test counts)
        self.connections = 0

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(1024)
        except OSError:
            sock.close()
            raise
        self.port = int(sock.getsockname()[1])
        self._listener = sock
        self._stopping = False
        self._thread = threading.Thread(
            target=self._accept, args=(sock,), name="zr-wsgi-accept", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting, cut every open connection, wait for the accepting thread."""
        sock, self._listener = self._listener, None
        if sock is None:
            return
        self._stopping = True
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        sock.close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    # ------------------------------------------------------------ connections

    def _accept(self, listener: socket.socket) -> None:
        while not self._stopping:
            try:
                conn, addr = listener.accept()
            except OSError:
                if self._stopping:
                    return
                time.sleep(0.01)  # e.g. out of file descriptors: try again
                continue
            with self._lock:
                self._conns.add(conn)
                self.connections += 1
                self._count += 1
                name = f"{CONNECTION_THREAD_PREFIX}-{self._count}"
            threading.Thread(
                target=self._connection, args=(conn, addr), name=name, daemon=True
            ).start()

    def _connection(self, conn: socket.socket, addr: tuple[str, int]) -> None:
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            rfile = conn.makefile("rb", _READ)
            try:
                while not self._stopping:
                    keep = self._request(conn, rfile, addr)
                    if keep is None:  # the client closed it
                        break
                    if not keep:
                        _linger(conn)
                        break
            finally:
                rfile.close()
        except (_ClientGone, OSError, ValueError):
            pass
        finally:
            with self._lock:
                self._conns.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()

    def _read_head(self, rfile: Any) -> tuple[str, list[tuple[str, str]]] | None:
        line = rfile.readline(_LINE_LIMIT + 1)
        while line in (b"\r\n", b"\n"):  # empty lines before a request are allowed
            line = rfile.readline(_LINE_LIMIT + 1)
        if not line:
            return None  # closed between requests
        if len(line) > _LINE_LIMIT or not line.endswith(b"\n"):
            raise _BadRequest("request line too long")
        headers: list[tuple[str, str]] = []
        while True:
            h = rfile.readline(_LINE_LIMIT + 1)
            if not h.endswith(b"\n"):
                raise _ClientGone if not h else _BadRequest("header line too long")
            if h in (b"\r\n", b"\n"):
                break
            text = h.decode("latin-1")
            if text[0] in " \t" and headers:  # an obsolete folded line continues the last
                name, value = headers[-1]
                headers[-1] = (name, value + text.rstrip("\r\n"))
                continue
            name, colon, value = text.partition(":")
            if not colon or len(headers) >= _HEADER_COUNT_LIMIT:
                raise _BadRequest("malformed or too many headers")
            headers.append((name.strip(), value.lstrip(" \t").rstrip("\r\n")))
        return line.decode("latin-1").rstrip("\r\n"), headers

    def _environ(
        self, method: str, target: str, version: str, headers: list[tuple[str, str]], addr: Any
    ) -> dict[str, Any]:
        from moto.core.request import (
            PRESERVED_HEADER_NAMES_ENVIRON_KEY,
            environ_key_for_header,
            should_preserve_original_header_name,
        )

        url = urlsplit(target)
        path = f"/{url.netloc}{url.path}" if not url.scheme and url.netloc else url.path
        environ: dict[str, Any] = {
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            "SERVER_SOFTWARE": "zerorename-wsgi",
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": "",
            "PATH_INFO": _dance(unquote(path)),
            "QUERY_STRING": _dance(url.query),
            "REQUEST_URI": _dance(target),
            "RAW_URI": _dance(target),
            "REMOTE_ADDR": addr[0],
            "REMOTE_PORT": addr[1],
            "SERVER_NAME": self.host,
            "SERVER_PORT": str(self.port),
            "SERVER_PROTOCOL": version,
        }
        dashed = set()
        kept: dict[str, list[str]] = {}
        names: dict[str, str] = {}
        for name, value in headers:
            value = value.replace("\r\n", "")
            if "_" in name:  # werkzeug drops these; moto keeps x-amz-meta- ones
                if should_preserve_original_header_name(name):
                    names.setdefault(environ_key_for_header(name), name)
                    kept.setdefault(environ_key_for_header(name), []).append(value)
                continue
            key = name.upper().replace("-", "_")
            dashed.add(key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{key}")
            if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                key = f"HTTP_{key}"
                if key in environ:
                    value = f"{environ[key]},{value}"
            environ[key] = value
        for key, values in kept.items():
            if key not in dashed:  # an underscored header never stands in for a dashed one
                environ[key] = ",".join(values)
        environ[PRESERVED_HEADER_NAMES_ENVIRON_KEY] = {
            k: v for k, v in names.items() if k not in dashed
        }
        if url.scheme and url.netloc:
            environ["HTTP_HOST"] = url.netloc
        return environ

    def _request(self, conn: socket.socket, rfile: Any, addr: Any) -> bool | None:
        """Serve one request; True when the connection can carry another, None when the
        client closed it before a request."""
        try:
            head = self._read_head(rfile)
            if head is None:
                return None
            first, headers = head
            method, target, version = first.split(" ", 2)
            if not version.startswith("HTTP/1."):
                raise _BadRequest(f"unsupported protocol {version!r}")
        except (_BadRequest, ValueError):
            msg = b"bad request\n"
            conn.sendall(
                b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
                % (len(msg), msg)
            )
            return False
        environ = self._environ(method, target, version, headers, addr)
        te = environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        expect = environ.get("HTTP_EXPECT", "").lower().strip(" \t") == "100-continue"
        if "chunked" in te:
            body = _Input(rfile, conn, None, expect)
            environ["wsgi.input_terminated"] = True
        else:
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = -1
            if length < 0:
                conn.sendall(
                    b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
                )
                return False
            body = _Input(rfile, conn, length, expect)
        environ["wsgi.input"] = body
        conn_tokens = environ.get("HTTP_CONNECTION", "").lower()
        keep = ("close" not in conn_tokens) and (
            version == "HTTP/1.1" or "keep-alive" in conn_tokens
        )
        keep = self._respond(conn, environ, method, keep)
        return keep and body.drain(DRAIN_LIMIT)

    def _respond(
        self, conn: socket.socket, environ: dict[str, Any], method: str, keep: bool
    ) -> bool:
        """Run the application and send its answer; False when the connection must close."""
        state: dict[str, Any] = {"status": None, "headers": None, "sent": False, "chunked": False}
        body: _Input = environ["wsgi.input"]

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Any:
            if exc_info:
                try:
                    if state["sent"]:
                        raise exc_info[1].with_traceback(exc_info[2])
                finally:
                    exc_info = None
            elif state["headers"] is not None:
                raise AssertionError("headers already set")
            state["status"], state["headers"] = status, headers
            return write

        def head_bytes() -> bytes:
            status: str = state["status"]
            code = int(status.split(None, 1)[0])
            lines = [f"HTTP/1.1 {status}"]
            has_length = False
            for name, value in state["headers"]:
                lowered = name.lower()
                if lowered == "connection":
                    continue
                has_length = has_length or lowered == "content-length"
                lines.append(f"{name}: {value}")
            lines.append(f"Date: {self._date()}")
            state["no_body"] = method == "HEAD" or code in _NO_BODY or 100 <= code < 200
            if not has_length and not state["no_body"]:
                state["chunked"] = True
                lines.append("Transfer-Encoding: chunked")
            # a body the application did not read, or a 100 Continue never sent: close
            state["keep"] = (
                keep
                and not body.continue_due
                and (body.done or body.remaining is None or body.remaining <= DRAIN_LIMIT)
            )
            if not state["keep"]:
                lines.append("Connection: close")
            lines.append("\r\n")
            return "\r\n".join(lines).encode("latin-1")

        def write(data: bytes) -> None:
            if state["status"] is None:
                raise AssertionError("write() before start_response")
            out = b""
            if not state["sent"]:
                state["sent"] = True
                out = head_bytes()
            if data and not state["no_body"]:
                out += b"%x\r\n%s\r\n" % (len(data), data) if state["chunked"] else data
            if out:
                conn.sendall(out)

        try:
            result = self.app(environ, start_response)
            try:
                for data in result:
                    if data:
                        write(data)
                if not state["sent"]:
                    write(b"")
                if state["chunked"]:
                    conn.sendall(b"0\r\n\r\n")
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        except (_ClientGone, OSError):
            return False
        except Exception:
            log.exception("error serving %s %s", method, environ.get("RAW_URI"))
            if not state["sent"]:
                msg = b"internal server error\n"
                with contextlib.suppress(OSError):
                    conn.sendall(
                        b"HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(msg), msg)
                    )
            return False
        return bool(state["keep"])
