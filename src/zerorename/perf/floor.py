"""The ``floor`` client of the ``upload`` scenario: the least CPU that moves the same bytes.

It uploads the same file to the same server as the other clients, as one multipart
upload with the same part size and as many connections as ``--concurrency``, doing only
what any client must: one PUT per part over keep-alive HTTP/1.1 sockets (a thread each),
signed with the engine's SigV4 (one SHA-256 and one HMAC per request, payload unsigned),
the part's CRC32C (the ``crc32c`` package, as the engine) and the bytes:

- over HTTP: a CRC32C pass over the part (1 MiB ``preadv`` into one reused buffer), the
  checksum in a header, then the part with ``os.sendfile`` (no copy in this process);
- over HTTPS: the part read once, 1 MiB at a time, checksummed and written through
  Python's ``ssl`` on the plain socket in the engine's slices (256 KiB writes, aws-chunked
  with the checksum in a trailer, the engine's framing); a store that refuses trailers
  (RGW pacific) gets every part the two-pass way instead (a CRC32C pass, then the writes).

Create and complete are raw requests on the same sockets, inside the measurement. No
retries, no progress, no bookkeeping: what it costs is what the bytes cost on this machine,
measured in the same invocation as the clients it is compared with (the "x floor" column).
"""

from __future__ import annotations

import os
import re
import socket
import ssl
import threading
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

from zerorename.perf.model import Meter, Target
from zerorename.units import MiB

NAME = "floor"
NOTE = (
    "floor: one signed PUT per part over keep-alive sockets (a thread per connection, "
    "--concurrency of them), CRC32C and nothing else; over HTTP a CRC32C pass then "
    "os.sendfile, over HTTPS one read written through ssl in 256 KiB slices with the "
    "checksum in an aws-chunked trailer (two passes where the store refuses trailers). "
    "'x floor' = a client's CPU / the floor's CPU, medians of this run."
)
COMMIT_NOTE = (
    "floor (commit): the same uploads completed with pre-signed CompleteMultipartUpload "
    "requests built before the measurement (request line, headers, one-part body), "
    "--batch-concurrency of them in flight on raw keep-alive sockets driven by one "
    "thread (a selector); measured: connecting, writing, reading and checking each answer."
)
_BLOCK = MiB
_WRITE = 256 * 1024
_UPLOAD_ID = re.compile(rb"<UploadId>([^<]+)</UploadId>")
_TIMEOUT = 120.0


class FloorError(RuntimeError):
    """A floor request got an answer no client could use (status, missing field)."""


def _origin(target: Target) -> tuple[str, int, bool]:
    url = urlsplit(target.endpoint_url or f"https://s3.{target.region}.amazonaws.com")
    tls = url.scheme == "https"
    return url.hostname or "", url.port or (443 if tls else 80), tls


def client_context(target: Target) -> ssl.SSLContext:
    """The TLS context every floor connection uses: the target's CA, else the system's."""
    return ssl.create_default_context(cafile=target.ca_bundle)


class Connection:
    """One keep-alive HTTP/1.1 connection, blocking: write a request, read its answer."""

    def __init__(self, target: Target, ctx: ssl.SSLContext | None) -> None:
        host, port, tls = _origin(target)
        sock = socket.create_connection((host, port), timeout=_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)  # blocking: os.sendfile waits (--run-timeout bounds a run)
        self.raw = sock
        self.sock: socket.socket = (
            (ctx or client_context(target)).wrap_socket(sock, server_hostname=host) if tls else sock
        )
        self.tls = tls
        self._buf = b""

    def close(self) -> None:
        self.sock.close()

    def send_head(self, method: str, target: str, headers: dict[str, str]) -> None:
        lines = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items())]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())

    def read_answer(self) -> tuple[int, dict[str, str], bytes]:
        status, headers, body, self._buf = read_answer(self.sock.recv, self._buf)
        return status, headers, body


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """Status and headers (lower-case names) of an answer's head (without the blank line)."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise FloorError(f"not an HTTP answer: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


def body_end(headers: dict[str, str], data: bytes) -> int | None:
    """Where the body that starts ``data`` ends (None: not all of it is there yet)."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        end = data.find(b"0\r\n\r\n")
        while end > 0 and data[end - 2 : end] != b"\r\n":
            end = data.find(b"0\r\n\r\n", end + 1)
        return None if end < 0 else end + 5
    length = int(headers.get("content-length", "0"))
    return length if len(data) >= length else None


def dechunk(data: bytes) -> bytes:
    out: list[bytes] = []
    pos = 0
    while True:
        eol = data.index(b"\r\n", pos)
        size = int(data[pos:eol].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(data[eol + 2 : eol + 2 + size])
        pos = eol + 4 + size


def split_answer(buf: bytes) -> tuple[int, dict[str, str], bytes, bytes] | None:
    """The first whole answer in ``buf``: (status, headers, body, the bytes after it), or
    None while part of it is missing."""
    head, found, rest = buf.partition(b"\r\n\r\n")
    if not found:
        return None
    status, headers = parse_head(head)
    end = body_end(headers, rest)
    if end is None:
        return None
    body = rest[:end]
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = dechunk(body)
    return status, headers, body, rest[end:]


def read_answer(recv: Any, buf: bytes) -> tuple[int, dict[str, str], bytes, bytes]:
    """Read one answer with ``recv``: (status, headers, body, the bytes after it)."""
    while (answer := split_answer(buf)) is None:
        more = recv(65536)
        if not more:
            raise FloorError("the server closed the connection")
        buf += more
    return answer


class _Upload:
    """The requests of one multipart upload, signed as the engine signs them."""

    def __init__(self, target: Target, key: str, algorithm: str) -> None:
        from zerorename.engine.wire import fastpath

        self.fp = fastpath
        url = (target.endpoint_url or "").rstrip("/")
        where = fastpath.target_for(f"{url}/{target.bucket}/{fastpath.PROBE_KEY}", target.region)
        if where is None:
            raise FloorError(f"the floor needs a path-style endpoint URL, not {url!r}")
        self.where = where
        self.path = where.path_prefix + fastpath.quote_key(key)
        self.access, self.secret = target.access_key or "", target.secret_key or ""
        self.algorithm = algorithm
        self.upload_id = ""

    def head(
        self, method: str, query: str, headers: dict[str, str], length: int, payload: str
    ) -> tuple[str, dict[str, str]]:
        """The request line's target and every header for one request."""
        fp = self.fp
        wire = query.replace("uploads=", "uploads") if query == "uploads=" else query
        request = fp.Request(method, self.path, query, wire, headers, None, length, payload)
        signed = fp.signed_headers(
            self.where, request, self.access, self.secret, None, fp.amz_date(time.time())
        )
        return self.path + (f"?{wire}" if wire else ""), signed

    def create(self, conn: Connection) -> None:
        extra = {} if self.algorithm == "none" else {"x-amz-checksum-algorithm": self.algorithm}
        line, headers = self.head("POST", "uploads=", extra, 0, self.fp.UNSIGNED_PAYLOAD)
        conn.send_head("POST", line, headers)
        status, _, body = conn.read_answer()
        found = _UPLOAD_ID.search(body)
        if status != 200 or not found:
            raise FloorError(f"CreateMultipartUpload answered {status}: {body[:200]!r}")
        self.upload_id = found.group(1).decode()

    def part_query(self, number: int) -> str:
        return f"partNumber={number}&uploadId={self.fp.quote_value(self.upload_id)}"

    def complete(self, conn: Connection, parts: list[dict[str, Any]]) -> None:
        body = self.fp.complete_body({"Parts": parts}) or b""
        query = f"uploadId={self.fp.quote_value(self.upload_id)}"
        line, headers = self.head("POST", query, {}, len(body), self.fp.UNSIGNED_PAYLOAD)
        conn.send_head("POST", line, headers)
        conn.sock.sendall(body)
        status, _, answer = conn.read_answer()
        if status != 200 or b"CompleteMultipartUploadResult" not in answer:
            raise FloorError(f"CompleteMultipartUpload answered {status}: {answer[:200]!r}")


class _Sender:
    """Sends parts of one file over one connection (one thread)."""

    def __init__(self, up: _Upload, conn: Connection, fd: int, mode: list[str]) -> None:
        from zerorename.engine import checksums
        from zerorename.engine.wire import trailer

        self.up, self.conn, self.fd = up, conn, fd
        self.checksums, self.trailer = checksums, trailer
        self.buf = bytearray(_BLOCK)
        self.mode = mode  # shared: ["trailer"] until a store refuses it, then ["header"]

    def _blocks(self, start: int, length: int) -> Any:
        view = memoryview(self.buf)
        pos, end = start, start + length
        while pos < end:
            n = os.preadv(self.fd, [view[: min(_BLOCK, end - pos)]], pos)
            if n <= 0:
                raise FloorError("the file is shorter than planned")
            yield view[:n]
            pos += n

    def _checksum(self, start: int, length: int) -> str | None:
        algo = self.up.algorithm
        if algo == "none":
            return None
        running = self.checksums.Running(algo)
        for block in self._blocks(start, length):
            running.update(block)
        return running.b64digest()

    def _write(self, data: memoryview) -> None:
        for i in range(0, len(data), _WRITE):
            self.conn.sock.sendall(data[i : i + _WRITE])

    def put(self, number: int, start: int, length: int) -> dict[str, Any]:
        """One UploadPart; returns the completed part (number, ETag, checksum)."""
        algo, tr = self.up.algorithm, self.trailer
        query = self.up.part_query(number)
        if self.conn.tls and algo != "none" and self.mode[0] == "trailer":
            headers = tr.request_headers(algo, length)
            size = tr.encoded_length(length, algo)
            line, sent = self.up.head("PUT", query, headers, size, tr.STREAMING_TRAILER)
            self.conn.send_head("PUT", line, sent)
            running, lead = self.checksums.Running(algo), b""
            for block in self._blocks(start, length):
                self.conn.sock.sendall(lead + tr.chunk_head(len(block)))
                running.update(block)
                self._write(block)
                lead = b"\r\n"
            value: str | None = running.b64digest()
            assert value is not None
            self.conn.sock.sendall(lead + tr.final_chunk(tr.header_name(algo), value))
            status, answer, body = self.conn.read_answer()
            if 400 <= status < 500 and status not in (403, 404):
                self.mode[0] = "header"  # the store takes no trailers: two passes from now on
                return self.put(number, start, length)
        else:
            value = self._checksum(start, length)
            headers = {} if value is None else {tr.header_name(algo): value}
            line, sent = self.up.head("PUT", query, headers, length, self.up.fp.UNSIGNED_PAYLOAD)
            self.conn.send_head("PUT", line, sent)
            if self.conn.tls:
                for block in self._blocks(start, length):
                    self._write(block)
            else:
                pos, end = start, start + length
                while pos < end:
                    pos += os.sendfile(self.conn.sock.fileno(), self.fd, pos, end - pos)
            status, answer, body = self.conn.read_answer()
        etag = answer.get("etag")
        if status != 200 or not etag:
            raise FloorError(f"UploadPart {number} answered {status}: {body[:200]!r}")
        part: dict[str, Any] = {"PartNumber": number, "ETag": etag}
        if value is not None:
            part[self.checksums.PARAM[algo]] = value
        return part


def upload_floor(target: Target, params: dict[str, Any]) -> dict[str, float]:
    """The floor for one object from the data file (``--source file`` only)."""
    from zerorename.perf import clients

    if params.get("source", "file") != "file":
        raise FloorError("the floor reads a file: run it with --source file")
    size, part_size = int(params["size"]), int(params["part_size"])
    conc = int(params["concurrency"])
    algo = str(params.get("checksum", "CRC32C"))
    key = target.key("upload", uuid.uuid4().hex)
    up = _Upload(target, key, algo)
    ranges = [(i // part_size + 1, i, min(part_size, size - i)) for i in range(0, size, part_size)]
    done: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    ctx = client_context(target) if _origin(target)[2] else None
    mode = ["trailer"]
    fd = os.open(str(params["path"]), os.O_RDONLY)
    try:
        with Meter() as m:
            conns = [Connection(target, ctx)]
            up.create(conns[0])
            todo = iter(ranges)
            lock = threading.Lock()

            def work(conn: Connection | None) -> None:
                try:
                    conn = conn or Connection(target, ctx)
                    conns.append(conn)
                    sender = _Sender(up, conn, fd, mode)
                    while not errors:
                        with lock:
                            item = next(todo, None)
                        if item is None:
                            return
                        done.append(sender.put(*item))
                except BaseException as exc:
                    errors.append(exc)

            threads = [
                threading.Thread(target=work, args=(conns[0] if i == 0 else None,))
                for i in range(min(conc, len(ranges)))
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise errors[0]
            up.complete(conns[0], sorted(done, key=lambda p: int(p["PartNumber"])))
        for conn in set(conns):
            conn.close()
    finally:
        os.close(fd)
    head = target.plain_boto3_client().head_object(Bucket=target.bucket, Key=key)
    if head["ContentLength"] != size or not str(head["ETag"]).endswith(f'-{len(ranges)}"'):
        raise FloorError(f"the floor's object is {head['ContentLength']} bytes, {head['ETag']}")
    target.plain_boto3_client().delete_object(Bucket=target.bucket, Key=key)
    extra = {}
    if ctx is not None:  # over HTTPS: parts sent with a trailer (as the engine reports them)
        trailers = algo != "none" and mode[0] == "trailer"
        extra["trailer_bodies"] = float(len(ranges) if trailers else 0)
    return clients._metrics(m, size, verified=1.0, **extra)
