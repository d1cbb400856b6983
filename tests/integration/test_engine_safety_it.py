"""Issue 10 at the engine boundary, on real servers: a record without a key never reaches
the store (``DELETE /bucket?uploadId=`` would delete the bucket), pipes and FIFOs upload
as streams, and a certificate that cannot be verified fails at once."""

from __future__ import annotations

import contextlib
import os
import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from engine_helpers import get, pending_keys
from zerorename.engine import EngineConfig, PendingUpload, UploadEngine, UploadInfo
from zerorename.engine.errors import ConfigError, RecordError
from zerorename.engine.wire.client import FastClient
from zerorename.servers.faultproxy import FaultProxy
from zerorename.servers.targets import S3Target
from zerorename.units import MiB


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


#: every way on moto; on RGW the abort through botocore, whose request RGW would take for
#: a DeleteBucket (the refusal before any request is zerorename's own, seen by the proxy)
KEYLESS_ON = [
    *(
        pytest.param("moto", how, id=f"moto-{how}")
        for how in ["abort", "abort_many", "uploadinfo", "complete", "complete_many"]
    ),
    pytest.param("rgw", "abort", marks=pytest.mark.rgw, id="rgw-abort"),
]


@pytest.mark.parametrize("fast_path", [True, False], ids=["fastpath", "botocore"])
@pytest.mark.parametrize(("s3", "how"), KEYLESS_ON, indirect=["s3"])
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
