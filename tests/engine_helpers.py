"""Helpers shared by the engine's integration and fault tests: what they read back from the
store (with plain boto3), the files they upload, and engines opened in one of the three ways
a file part can be sent. (tests/ is on sys.path: pytest puts the conftest's directory there.)"""

from __future__ import annotations

import hashlib
import io
import random
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

from zerorename.engine import EngineConfig, Event, PendingUpload, UploadEngine
from zerorename.engine.checksums import compute
from zerorename.engine.wire.client import FastClient
from zerorename.servers.targets import S3Target

#: how a file part goes out: sendfile on the fast path, transport writes on the fast path,
#: or botocore (fast_path=False)
SEND_MODES = ["sendfile", "writes", "botocore"]


def get(s3: S3Target, key: str) -> bytes:
    """The whole object at ``key``."""
    body: bytes = s3.boto3_client().get_object(Bucket=s3.bucket, Key=key)["Body"].read()
    return body


def check_parts(s3: S3Target, key: str, record: PendingUpload, data: bytes, part: int) -> None:
    """The object at ``key`` is ``data`` byte for byte, and every part of ``record`` (cut
    every ``part`` bytes) has its bytes' MD5 ETag and CRC32C."""
    for p in record.parts:
        piece = data[(p.number - 1) * part : p.number * part]
        assert p.etag.strip('"') == hashlib.md5(piece).hexdigest(), f"part {p.number}"
        assert p.checksum == compute("CRC32C", piece), f"part {p.number}"
    assert get(s3, key) == data


def pending_keys(s3: S3Target) -> list[str]:
    """Keys of the multipart uploads still pending under the test's prefix."""
    resp = s3.boto3_client().list_multipart_uploads(Bucket=s3.bucket, Prefix=s3.prefix)
    return sorted(u["Key"] for u in resp.get("Uploads", []))


def object_keys(s3: S3Target) -> list[str]:
    """Keys of the objects under the test's prefix."""
    resp = s3.boto3_client().list_objects_v2(Bucket=s3.bucket, Prefix=s3.prefix)
    return sorted(o["Key"] for o in resp.get("Contents", []))


def data_file(tmp_path: Path, size: int, seed: int = 1) -> tuple[Path, bytes]:
    """A file of ``size`` random bytes (reproducible from ``seed``) and its contents."""
    data = random.Random(seed).randbytes(size)
    path = tmp_path / f"data-{seed}.bin"
    path.write_bytes(data)
    return path, data


async def open_engine(
    config: EngineConfig, mode: str, on_event: Callable[[Event], None] | None = None
) -> UploadEngine:
    """An open engine that sends file parts the ``mode`` way (``config.fast_path`` must be
    off exactly for ``botocore``)."""
    engine = UploadEngine(config, on_event=on_event)
    await engine.open()
    client = engine._client
    assert isinstance(client, FastClient) == (mode != "botocore"), (mode, client)
    if mode == "writes":
        assert isinstance(client, FastClient)
        client.zero_copy = False
    return engine


def zero_copy_bytes(engine: UploadEngine) -> int:
    """Bytes the engine sent with sendfile so far."""
    client = engine._client
    return client.zero_copy_bytes if isinstance(client, FastClient) else 0


def blocks(data: bytes, step: int) -> Iterator[bytes]:
    """``data`` in blocks of ``step`` bytes (a sync iterable source)."""
    for i in range(0, len(data), step):
        yield data[i : i + step]


async def ablocks(data: bytes, step: int) -> AsyncIterator[bytes]:
    """``data`` in blocks of ``step`` bytes (an async iterable source)."""
    for block in blocks(data, step):
        yield block


def make_source(kind: str, data: bytes, tmp: Path) -> Any:
    """``data`` as an upload source of one kind: bytes, memoryview, path, fileobj (a
    buffered reader over memory), sync or async (iterables of odd-sized blocks)."""
    if kind == "bytes":
        return data
    if kind == "memoryview":
        return memoryview(bytearray(data))
    if kind == "path":
        (tmp / "f").write_bytes(data)
        return tmp / "f"
    if kind == "fileobj":
        return io.BufferedReader(io.BytesIO(data))  # type: ignore[arg-type]
    if kind == "sync":
        return blocks(data, 777_777)
    if kind == "async":
        return ablocks(data, 1 << 20)
    raise ValueError(f"no source kind {kind!r}")
