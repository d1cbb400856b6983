"""The in-process moto keeps connections alive (zerorename.testing.wsgiserver): many requests
on one TCP connection, every request body encoding the suite's clients send (Content-Length,
chunked, aws-chunked with a Content-Length, ``Expect: 100-continue``), HEAD, a large upload
and concurrent connections, all on moto's own server, signed with SigV4 as clients sign."""

from __future__ import annotations

import hashlib
import http.client
import random
import socket
import threading
import zlib
from base64 import b64encode
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from zerorename.servers.faultproxy import FaultProxy
from zerorename.servers.servers import MotoServer
from zerorename.servers.targets import S3Target

MiB = 1024 * 1024


def payload(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)


def signed(
    target: S3Target, method: str, path: str, headers: dict[str, str] | None = None
) -> dict[str, str]:
    """SigV4 headers for a request to ``target`` (payload unsigned, as over TLS clients do)."""
    assert target.endpoint_url is not None
    url = target.endpoint_url + path
    hdrs = {"x-amz-content-sha256": "UNSIGNED-PAYLOAD", **(headers or {})}
    req = AWSRequest(method=method, url=url, headers=hdrs)
    SigV4Auth(Credentials(target.access_key, target.secret_key), "s3", target.region).add_auth(req)
    return dict(req.headers.items())


def connect(target: S3Target) -> http.client.HTTPConnection:
    assert target.endpoint_url is not None
    u = urlsplit(target.endpoint_url)
    assert u.hostname is not None and u.port is not None
    return http.client.HTTPConnection(u.hostname, u.port, timeout=30)


def request(
    conn: http.client.HTTPConnection,
    target: S3Target,
    method: str,
    key: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    **kw: Any,
) -> tuple[http.client.HTTPResponse, bytes]:
    path = f"/{target.bucket}/{target.key(key)}"
    conn.request(method, path, body=body, headers=signed(target, method, path, headers), **kw)
    resp = conn.getresponse()
    return resp, resp.read()


@pytest.fixture
def on_moto(moto_server: MotoServer, moto_s3: S3Target) -> S3Target:
    """The plain-HTTP moto target (its server is the session's MotoServer)."""
    assert moto_s3.endpoint_url == moto_server.endpoint_url
    return moto_s3


def test_many_requests_on_one_connection(on_moto: S3Target) -> None:
    """PUT, GET, HEAD, a 404 and a list on one connection: none closes it. werkzeug's server
    answered every request with ``Connection: close`` and closed the socket."""
    conn = connect(on_moto)
    resp, _ = request(conn, on_moto, "PUT", "a", body=b"hello")
    assert resp.status == 200 and not resp.will_close
    sock = conn.sock
    assert sock is not None
    resp, got = request(conn, on_moto, "GET", "a")
    assert (resp.status, got) == (200, b"hello") and not resp.will_close
    resp, got = request(conn, on_moto, "HEAD", "a")
    assert (resp.status, got, resp.getheader("Content-Length")) == (200, b"", "5")
    resp, got = request(conn, on_moto, "GET", "missing")
    assert resp.status == 404 and b"NoSuchKey" in got and not resp.will_close
    resp, got = request(conn, on_moto, "PUT", "b", body=b"")
    assert resp.status == 200
    assert conn.sock is sock  # http.client opens a new socket after a close: none was opened
    conn.close()


def test_client_keeps_one_upstream_connection_through_the_proxy(
    on_moto: S3Target, fault_proxy: Callable[..., FaultProxy]
) -> None:
    """The fault proxy reuses its upstream connection to moto for a keep-alive client: one
    connection each side for 6 requests (werkzeug made the proxy open one per request)."""
    assert on_moto.endpoint_url is not None
    proxy = fault_proxy(on_moto.endpoint_url)
    c = on_moto.with_endpoint(proxy.url).boto3_client(max_pool_connections=1)
    for i in range(3):
        c.put_object(Bucket=on_moto.bucket, Key=on_moto.key(f"p{i}"), Body=b"%d" % i)
        assert c.get_object(Bucket=on_moto.bucket, Key=on_moto.key(f"p{i}"))["Body"].read()
    assert proxy.stats.requests() == 6
    assert (proxy.stats.connections, proxy.stats.upstream_connections) == (1, 1)


def test_chunked_request_body(on_moto: S3Target) -> None:
    """``Transfer-Encoding: chunked`` (aiohttp sends it for a streamed body): decoded, stored
    whole, and the connection carries the next request."""
    data = payload(300_001, 1)
    pieces = [data[i : i + 65_000] for i in range(0, len(data), 65_000)]
    conn = connect(on_moto)
    te = {"Transfer-Encoding": "chunked"}
    resp, _ = request(conn, on_moto, "PUT", "chunked", iter(pieces), te, encode_chunked=True)
    assert resp.status == 200 and not resp.will_close
    resp, got = request(conn, on_moto, "GET", "chunked")
    assert resp.status == 200 and got == data
    assert resp.getheader("ETag") == f'"{hashlib.md5(data).hexdigest()}"'
    conn.close()


def test_aws_chunked_body_with_content_length(on_moto: S3Target) -> None:
    """aws-chunked (S3's own framing, with a CRC32 trailer) inside a Content-Length body, as
    the engine streams parts: moto decodes it and keeps only the payload."""
    data = payload(200_000, 2)
    crc = b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    body = b"".join(
        b"%x\r\n%s\r\n" % (len(data[i : i + 65536]), data[i : i + 65536])
        for i in range(0, len(data), 65536)
    )
    body += f"0\r\nx-amz-checksum-crc32:{crc}\r\n\r\n".encode()
    headers = {
        "Content-Encoding": "aws-chunked",
        "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        "x-amz-decoded-content-length": str(len(data)),
        "x-amz-trailer": "x-amz-checksum-crc32",
        "Content-Length": str(len(body)),
    }
    conn = connect(on_moto)
    resp, _ = request(conn, on_moto, "PUT", "awschunked", body, headers)
    assert resp.status == 200 and not resp.will_close
    resp, got = request(conn, on_moto, "GET", "awschunked")
    assert resp.status == 200 and got == data
    conn.close()


def _read_head(sock: socket.socket) -> bytes:
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(1)
        assert data, f"connection closed after {buf!r}"
        buf += data
    return buf


def test_expect_100_continue_then_the_next_request(on_moto: S3Target) -> None:
    """``Expect: 100-continue``: the server says 100 Continue before the client sends the body
    (botocore and aiohttp wait for it), answers 200, and the connection carries on."""
    assert on_moto.endpoint_url is not None
    u = urlsplit(on_moto.endpoint_url)
    assert u.hostname is not None and u.port is not None
    data = payload(100_000, 3)
    path = f"/{on_moto.bucket}/{on_moto.key('expect')}"
    headers = signed(on_moto, "PUT", path, {"Expect": "100-continue"})
    headers |= {"Host": u.netloc, "Content-Length": str(len(data))}
    head = f"PUT {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    with socket.create_connection((u.hostname, u.port), timeout=30) as sock:
        sock.sendall(head.encode() + b"\r\n")
        assert _read_head(sock).startswith(b"HTTP/1.1 100 Continue\r\n")
        sock.sendall(data)
        answer = _read_head(sock)
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert b"connection: close" not in answer.lower()
        length = int(answer.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while length:
            length -= len(sock.recv(length))
        get = signed(on_moto, "GET", path) | {"Host": u.netloc}
        sock.sendall(
            f"GET {path} HTTP/1.1\r\n".encode()
            + "".join(f"{k}: {v}\r\n" for k, v in get.items()).encode()
            + b"\r\n"
        )
        assert _read_head(sock).startswith(b"HTTP/1.1 200 ")


def test_large_upload_and_concurrent_connections(on_moto: S3Target) -> None:
    """Six connections at once, each a 16 MiB part of one multipart upload (Content-Length)
    and then a small PUT: all stored whole, each connection kept for its second request."""
    c = on_moto.boto3_client()
    key = on_moto.key("big")
    up = c.create_multipart_upload(Bucket=on_moto.bucket, Key=key)["UploadId"]
    parts = [payload(16 * MiB, 10 + n) for n in range(6)]
    etags: dict[int, str] = {}
    errors: list[BaseException] = []

    def one(n: int) -> None:
        try:
            conn = connect(on_moto)
            path = f"/{on_moto.bucket}/{key}?partNumber={n + 1}&uploadId={up}"
            conn.request("PUT", path, body=parts[n], headers=signed(on_moto, "PUT", path))
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200 and not resp.will_close
            etags[n + 1] = str(resp.getheader("ETag"))
            sock = conn.sock
            resp, _ = request(conn, on_moto, "PUT", f"small{n}", body=b"s")
            assert resp.status == 200 and conn.sock is sock
            conn.close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    c.complete_multipart_upload(
        Bucket=on_moto.bucket,
        Key=key,
        UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": etags[n]} for n in sorted(etags)]},
    )
    got = c.get_object(Bucket=on_moto.bucket, Key=key)["Body"].read()
    assert hashlib.sha256(got).digest() == hashlib.sha256(b"".join(parts)).digest()


# ---------------------------------------------------------------- the server on its own


@pytest.fixture
def echo() -> Iterator[tuple[Any, list[dict[str, Any]]]]:
    """A WsgiServer whose app reads the body only when the path says so and echoes it."""
    from zerorename.servers.wsgiserver import WsgiServer

    seen: list[dict[str, Any]] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        body = environ["wsgi.input"].read() if environ["PATH_INFO"] == "/read" else b""
        seen.append(dict(environ))
        start_response("200 OK", [("Content-Length", str(len(body)))])
        return [body]

    server = WsgiServer(app, "127.0.0.1")
    server.start()
    try:
        yield server, seen
    finally:
        server.stop()


def test_unread_body_is_dropped_or_the_connection_closed(
    echo: tuple[Any, list[dict[str, Any]]],
) -> None:
    """A small body the application did not read is read past (the next request is parsed
    right); a large one (over DRAIN_LIMIT) makes the answer close the connection."""
    from zerorename.servers.wsgiserver import DRAIN_LIMIT

    server, seen = echo
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("PUT", "/skip", body=b"x" * 1000)
    resp = conn.getresponse()
    assert resp.read() == b"" and not resp.will_close
    conn.request("PUT", "/read", body=b"second")
    resp = conn.getresponse()
    assert resp.read() == b"second" and not resp.will_close
    # the server answers before the client has sent it all, and reads the rest before it
    # closes: a close with unread bytes would reset the connection under the client
    conn.request("PUT", "/skip", body=b"y" * (8 * DRAIN_LIMIT))
    resp = conn.getresponse()
    assert resp.read() == b"" and resp.will_close
    assert [e["REQUEST_METHOD"] for e in seen] == ["PUT", "PUT", "PUT"]
    assert server.connections == 1
    conn.close()


def test_environ_is_werkzeugs(echo: tuple[Any, list[dict[str, Any]]]) -> None:
    """PATH_INFO percent-decoded (UTF-8, as WSGI's latin-1 string), the raw target kept,
    repeated headers joined, underscored headers dropped except moto's x-amz-meta- ones."""
    server, seen = echo
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("GET", "/b/caf%C3%A9%20x?list-type=2&prefix=a%2F")
    for name, value in [("X-Rep", "1"), ("X-Rep", "2"), ("X_Bad", "no"), ("x-amz-meta-a_b", "v")]:
        conn.putheader(name, value)
    conn.endheaders()
    conn.getresponse().read()
    env = seen[-1]
    assert env["PATH_INFO"] == "/b/café x".encode().decode("latin-1")
    assert env["QUERY_STRING"] == "list-type=2&prefix=a%2F"
    assert env["RAW_URI"] == "/b/caf%C3%A9%20x?list-type=2&prefix=a%2F"
    assert env["HTTP_X_REP"] == "1,2" and "HTTP_X_BAD" not in env
    assert env["HTTP_X_AMZ_META_A_B"] == "v"
    assert env["moto.preserved_header_names"] == {"HTTP_X_AMZ_META_A_B": "x-amz-meta-a_b"}
    conn.close()


# ---------------------------------------------------------------- the proxy's header lookups


def test_header_map_finds_what_header_finds() -> None:
    """The proxy looks a message's headers up in one map: the first line of a name wins (as
    ``header`` answers), any case; tokens are matched in comma lists, trimmed, any case."""
    from zerorename.servers.faultrules import header, header_map, token_in

    headers = [
        ("Content-Length", "5"),
        ("connection", "Keep-Alive, Close"),
        ("CONTENT-LENGTH", "7"),
    ]
    named = header_map(headers)
    for name in ("content-length", "Connection", "expect"):
        assert named.get(name.lower()) == header(headers, name)
    assert token_in(named["connection"], "close") and token_in(named["connection"], "keep-alive")
    assert not token_in(named["connection"], "upgrade") and not token_in(None, "close")
    assert not token_in("closed", "close")
