"""Issue 10 at the engine boundary, on real servers: a record without a key never reaches
the store (``DELETE /bucket?uploadId=`` would delete the bucket), pipes and FIFOs upload
as streams, and a certificate that cannot be verified fails at once."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from engine_helpers import get, pending_keys
from zerorename.engine import EngineConfig, PendingUpload, RetryConfig, UploadEngine, UploadInfo
from zerorename.engine.client import FastClient
from zerorename.engine.errors import CertificateError, ConfigError, RecordError, S3Error
from zerorename.testing.faultproxy import FaultProxy
from zerorename.testing.targets import S3Target
from zerorename.testing.tls import CertPair, session_tls

MiB = 1024 * 1024


def _keyless(pend: PendingUpload) -> PendingUpload:
    """``pend`` with an empty key: made past the constructor's check, as a caller that
    builds records its own way (or mutates one) could."""
    object.__setattr__(pend, "key", "")
    return pend


async def _engine(config: EngineConfig, fast_path: bool) -> UploadEngine:
    engine = UploadEngine(config)
    await engine.open()
    assert isinstance(engine._client, FastClient) == fast_path
    return engine


@pytest.mark.parametrize("fast_path", [True, False], ids=["fastpath", "botocore"])
@pytest.mark.parametrize("how", ["abort", "abort_many", "uploadinfo", "complete", "complete_many"])
async def test_a_keyless_record_sends_nothing_and_the_bucket_stays(
    s3: S3Target, fault_proxy: Callable[..., FaultProxy], fast_path: bool, how: str
) -> None:
    """The regression of issue 10 item 1: the empty bucket is still there and the proxy saw
    no request at all (no AbortMultipartUpload, no DeleteBucket)."""
    config = s3.engine_config(fast_path=fast_path)
    async with UploadEngine(config) as engine:  # a real upload id, straight to the server
        pend = await engine.upload(s3.bucket, s3.key("victim"), b"x", defer=True)
        await engine.abort(pend)  # the bucket is empty again
    proxy = fault_proxy(s3.endpoint_url)
    record = _keyless(pend)
    engine = await _engine(
        s3.with_endpoint(proxy.url).engine_config(fast_path=fast_path), fast_path
    )
    try:
        if how == "abort":
            with pytest.raises(RecordError, match="non-empty"):
                await engine.abort(record)
        elif how == "uploadinfo":
            with pytest.raises(RecordError, match="non-empty"):
                await engine.abort(UploadInfo(s3.bucket, "", pend.upload_id, 0.0))
        elif how == "complete":
            with pytest.raises(RecordError, match="non-empty"):
                await engine.complete(record)
        else:
            batch = getattr(engine, how)
            result = await batch([record])
            assert (result.succeeded, result.failed) == (0, 1)
            assert result.failures[0].code == "RecordError"
        # lower down too: the client itself refuses an object operation without a key
        with pytest.raises(ConfigError, match="refused"):
            await engine._client.abort_multipart_upload(
                Bucket=s3.bucket, Key="", UploadId=pend.upload_id
            )
    finally:
        await engine.close()
    assert proxy.stats.requests() == 0, proxy.stats.log()
    s3.boto3_client().head_bucket(Bucket=s3.bucket)  # still there


def test_a_null_bucket_is_refused_not_the_bucket_none() -> None:
    d = {
        "version": 1,
        "bucket": None,
        "key": "k",
        "upload_id": "u",
        "parts": [{"number": 1, "etag": '"e"', "size": 1}],
        "length": 1,
        "created": 0.0,
    }
    with pytest.raises(RecordError, match="bucket"):
        PendingUpload.from_dict(d)


# -- pipes and FIFOs ---------------------------------------------------------------------
def _data(size: int) -> bytes:
    return random.Random(size).randbytes(size)


@contextlib.contextmanager
def _writer(path_or_fd: str | int, data: bytes) -> Iterator[None]:
    """Write ``data`` into a pipe (fd) or FIFO (path) from a thread, in uneven blocks."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fd = path_or_fd if isinstance(path_or_fd, int) else os.open(path_or_fd, os.O_WRONLY)
            with os.fdopen(fd, "wb", buffering=0) as f:
                view = memoryview(data)
                while view:
                    n = f.write(view[:300_001])
                    assert n is not None
                    view = view[n:]
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join(30)
        assert not errors, errors


@pytest.mark.parametrize("fast_path", [True, False], ids=["fastpath", "botocore"])
@pytest.mark.parametrize("kind", ["pipe", "fifo-object", "fifo-path", "fifo-str"])
async def test_pipes_and_fifos_stream(
    moto_s3: S3Target, tmp_path: Path, fast_path: bool, kind: str
) -> None:
    """``echo ... | upload``: a pipe (like sys.stdin.buffer) or a FIFO streams as blocks
    of unknown size (was: OSError Illegal seek, or refused as not a file)."""
    data = _data(12 * MiB + 12345)  # three parts of 5 MiB
    key = moto_s3.key(f"from-{kind}")
    config = moto_s3.engine_config(fast_path=fast_path, part_size=5 * MiB)
    async with UploadEngine(config) as engine:
        if kind == "pipe":
            r, w = os.pipe()
            with _writer(w, data), os.fdopen(r, "rb") as source:
                result = await engine.upload(moto_s3.bucket, key, source)
        else:
            fifo = tmp_path / "fifo"
            os.mkfifo(fifo)
            with _writer(str(fifo), data):
                if kind == "fifo-object":
                    # opening a FIFO blocks until its writer opens it: off the loop
                    source = await anyio.to_thread.run_sync(open, fifo, "rb")
                    with source:
                        result = await engine.upload(moto_s3.bucket, key, source)
                else:
                    src = fifo if kind == "fifo-path" else str(fifo)
                    result = await engine.upload(moto_s3.bucket, key, src)
    assert result.length == len(data) and result.parts == 3
    assert get(moto_s3, key) == data
    assert pending_keys(moto_s3) == []


async def test_a_small_pipe_is_one_put(moto_s3: S3Target) -> None:
    r, w = os.pipe()
    async with UploadEngine(moto_s3.engine_config()) as engine:
        with _writer(w, b"hi\n"), os.fdopen(r, "rb") as source:
            result = await engine.upload(moto_s3.bucket, moto_s3.key("hi"), source)
    assert result.parts == 1 and result.etag
    assert get(moto_s3, moto_s3.key("hi")) == b"hi\n"


# -- certificates ------------------------------------------------------------------------
@contextlib.contextmanager
def _tls_server(pair: CertPair) -> Iterator[tuple[int, list[int]]]:
    """A TLS listener presenting ``pair`` (speaking no HTTP); counts the handshakes tried."""
    context = pair.server_context()
    sock = socket.create_server(("127.0.0.1", 0))
    sock.settimeout(0.2)
    handshakes: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            handshakes.append(1)
            with contextlib.suppress(OSError, ssl.SSLError):
                conn.settimeout(5)
                tls = context.wrap_socket(conn, server_side=True)
                tls.close()
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1], handshakes
    finally:
        stop.set()
        thread.join(5)
        sock.close()


@pytest.mark.parametrize("fast_path", [True, False], ids=["fastpath", "botocore"])
async def test_an_unverifiable_certificate_fails_at_once(tmp_path: Path, fast_path: bool) -> None:
    with _tls_server(session_tls().server) as (port, handshakes):
        config = EngineConfig(
            endpoint_url=f"https://127.0.0.1:{port}",
            region="us-east-1",
            addressing_style="path",
            aws_access_key_id="AKIDTEST",
            aws_secret_access_key="secret-test",
            fast_path=fast_path,
            retry=RetryConfig(max_attempts=5, base_delay=0.05, max_elapsed=60),
        )
        async with UploadEngine(config) as engine:
            assert isinstance(engine._client, FastClient) == fast_path
            with pytest.raises(CertificateError) as info:
                await engine.put_object("zr-bucket", "k", b"x")
            assert engine.stats.requests == 1 and engine.stats.retries == 0
    message = str(info.value)
    assert f"https://127.0.0.1:{port}" in message and "AWS_CA_BUNDLE" in message
    assert "secret-test" not in message and "\n" not in message
    assert len(handshakes) == 1  # no retry reached the server


@pytest.mark.parametrize("fast_path", [True, False], ids=["fastpath", "botocore"])
async def test_the_ca_bundle_option_verifies_the_certificate(
    tmp_path: Path, fast_path: bool
) -> None:
    """With ``ca_bundle`` the same certificate verifies: the failure that follows (the
    listener speaks no HTTP) is anything but a CertificateError."""
    tls = session_tls()
    with _tls_server(tls.server) as (port, _):
        config = EngineConfig(
            endpoint_url=f"https://127.0.0.1:{port}",
            region="us-east-1",
            addressing_style="path",
            aws_access_key_id="AKIDTEST",
            aws_secret_access_key="secret-test",
            fast_path=fast_path,
            ca_bundle=str(tls.ca_bundle),
            retry=RetryConfig(max_attempts=1),
        )
        async with UploadEngine(config) as engine:
            assert isinstance(engine._client, FastClient) == fast_path
            with pytest.raises(S3Error) as info:
                await engine.put_object("zr-bucket", "k", b"x")
    assert not isinstance(info.value, CertificateError), info.value
