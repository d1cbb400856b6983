"""Trailing checksums on real servers (engine/wire/trailer.py): with the checksum in an
aws-chunked trailer a file part is read once -- counted at the source: every read of the
file goes through counting wrappers of ``os.pread`` and ``os.preadv`` -- and each part's
ETag and CRC32C are what the store confirms and reads back (moto takes trailers). Ceph RGW
pacific refuses them (400 XAmzContentSHA256Mismatch): the engine finds that out on its
first trailer request, says so in its stats, and sends every part the two-pass way with
nothing lost. Every test but the either-store one (both servers over HTTP; the others
cover TLS) runs over HTTP and HTTPS (``also_https``): over HTTPS with the default
(``trailer_checksum="auto"``), over plain HTTP with ``"always"`` (auto keeps sendfile
there)."""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import data_file, get, open_engine, pending_keys, zero_copy_bytes
from zerorename.engine import PendingUpload, UploadEngine
from zerorename.engine.checksums import compute
from zerorename.engine.wire.client import FastClient, TrailerState
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

PART = 5 * MiB


def https(s3: S3Target) -> bool:
    return (s3.endpoint_url or "").startswith("https:")


@pytest.fixture
def file_reads(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], int]:
    """Counts the bytes ``os.pread`` and ``os.preadv`` (the checksum pass) read per file
    (by inode): ``reads(path)``."""
    real, real_v = os.pread, os.preadv
    lock = threading.Lock()
    counts: dict[int, int] = {}

    def count(fd: int, n: int) -> None:
        inode = os.fstat(fd).st_ino
        with lock:
            counts[inode] = counts.get(inode, 0) + n

    def pread(fd: int, length: int, offset: int) -> bytes:
        data = real(fd, length, offset)
        count(fd, len(data))
        return data

    def preadv(fd: int, buffers: Any, offset: int, flags: int = 0) -> int:
        n = real_v(fd, buffers, offset, flags)
        count(fd, n)
        return n

    monkeypatch.setattr(os, "pread", pread)
    monkeypatch.setattr(os, "preadv", preadv)
    return lambda path: counts.get(os.stat(path).st_ino, 0)


async def trailer_engine(s3: S3Target, trailer: str, **kw: Any) -> UploadEngine:
    """An open engine whose file parts go through the transport (no sendfile); trailer
    "on": the default over HTTPS, "always" over plain HTTP."""
    if trailer == "on":
        trailer = "auto" if https(s3) else "always"
    kw.setdefault("part_size", PART)
    kw.setdefault("max_concurrency", 4)
    return await open_engine(s3.engine_config(trailer_checksum=trailer, **kw), "writes")


def fast(engine: UploadEngine) -> FastClient:
    client = engine._client
    assert isinstance(client, FastClient)
    return client


def check_parts(record: PendingUpload, data: bytes, part_size: int = PART) -> None:
    """Every part's size, ETag (MD5) and CRC32C are those of its bytes."""
    assert record.length == len(data) and record.checksum_algorithm == "CRC32C"
    for p in record.parts:
        piece = data[(p.number - 1) * part_size : p.number * part_size]
        assert p.size == len(piece), p.number
        assert p.etag.strip('"') == hashlib.md5(piece).hexdigest(), p.number
        assert p.checksum == compute("CRC32C", piece), p.number


def composite_crc32c(record: PendingUpload) -> str:
    """The object's checksum S3 derives from the parts' (CRC32C of their raw CRCs)."""
    raw = b"".join(base64.b64decode(p.checksum or "") for p in record.parts)
    value = compute("CRC32C", raw)
    assert value is not None
    return value


def listed_parts(s3: S3Target, record: PendingUpload) -> list[tuple[int, str, int]]:
    resp = s3.boto3_client().list_parts(Bucket=s3.bucket, Key=record.key, UploadId=record.upload_id)
    return [(p["PartNumber"], p["ETag"], p["Size"]) for p in resp["Parts"]]


@pytest.mark.parametrize("trailer", ["on", "never"])
@pytest.mark.also_https
async def test_a_file_is_read_once_with_a_trailer_twice_without(
    moto_s3: S3Target, trailer: str, tmp_path: Path, file_reads: Callable[[Path], int]
) -> None:
    """4 parts, 4 in flight: with the trailer every byte of the file is read once (the
    first part decides for the endpoint, the others wait for it, none goes two-pass);
    without, twice (a checksum pass, then the send pass). Same parts either way."""
    s3 = moto_s3
    path, data = data_file(tmp_path, 3 * PART + 4321)
    key = s3.key(f"once-{trailer}.bin")
    engine = await trailer_engine(s3, trailer)
    async with engine:
        record = await engine.upload(s3.bucket, key, path, defer=True)
        reads = file_reads(path)
        assert listed_parts(s3, record) == [(p.number, p.etag, p.size) for p in record.parts]
        await engine.complete(record)
        stats = engine.stats
        states = dict(fast(engine).trailer_states)
    assert reads == (len(data) if trailer == "on" else 2 * len(data))
    check_parts(record, data)
    assert get(s3, key) == data
    head = s3.boto3_client().head_object(Bucket=s3.bucket, Key=key, ChecksumMode="ENABLED")
    assert head["ChecksumCRC32C"] == composite_crc32c(record)  # the parts' CRC32Cs read back
    if trailer == "on":
        assert (stats.trailer_checksums, stats.trailer_bodies) == (True, 4)
        assert list(states.values()) == [TrailerState.ON]
    else:
        assert (stats.trailer_checksums, stats.trailer_bodies, states) == (None, 0, {})
    assert stats.trailer_fallbacks == 0 and stats.retries == 0
    assert pending_keys(s3) == []


@pytest.mark.also_https
async def test_stream_and_buffer_parts_and_a_small_put_carry_trailers(moto_s3: S3Target) -> None:
    """Parts cut from a stream of unknown size, a bytes source and a one-request put: each
    body's CRC32C is computed as it is sent and is what moto confirms and reads back."""
    s3 = moto_s3
    data = os.urandom(2 * PART + 999)

    async def stream() -> AsyncIterator[bytes]:
        for start in range(0, len(data), 300_000):
            yield data[start : start + 300_000]

    engine = await trailer_engine(s3, "on")
    async with engine:
        streamed = await engine.upload(s3.bucket, s3.key("stream.bin"), stream(), defer=True)
        buffered = await engine.upload(s3.bucket, s3.key("bytes.bin"), data, defer=True)
        small = await engine.upload(s3.bucket, s3.key("small.bin"), data[:1000])
        for record in (streamed, buffered):
            check_parts(record, data)
            await engine.complete(record)
        stats = engine.stats
    assert (stats.trailer_checksums, stats.trailer_bodies, stats.trailer_fallbacks) == (True, 7, 0)
    for name, record in (("stream.bin", streamed), ("bytes.bin", buffered)):
        assert get(s3, s3.key(name)) == data
        head = s3.boto3_client().head_object(
            Bucket=s3.bucket, Key=s3.key(name), ChecksumMode="ENABLED"
        )
        assert head["ChecksumCRC32C"] == composite_crc32c(record)
    assert small.etag.strip('"') == hashlib.md5(data[:1000]).hexdigest()
    head = s3.boto3_client().head_object(
        Bucket=s3.bucket, Key=s3.key("small.bin"), ChecksumMode="ENABLED"
    )
    assert head["ChecksumCRC32C"] == compute("CRC32C", data[:1000])
    assert get(s3, s3.key("small.bin")) == data[:1000]


@pytest.mark.also_https
async def test_rgw_refuses_trailers_once_and_gets_every_part_two_pass(
    rgw_s3: S3Target, tmp_path: Path, file_reads: Callable[[Path], int]
) -> None:
    """Ceph RGW pacific answers the first trailer request 400 XAmzContentSHA256Mismatch:
    that one request is refused (the parts in flight waited for it), the engine remembers
    it, the stats say so, and every part goes the two-pass way; a second upload sends
    no trailer at all. The object and every part are right; nothing is left pending."""
    s3 = rgw_s3
    path, data = data_file(tmp_path, 3 * PART + 4321)
    engine = await trailer_engine(s3, "on")
    async with engine:
        record = await engine.upload(s3.bucket, s3.key("rgw-1.bin"), path, defer=True)
        assert listed_parts(s3, record) == [(p.number, p.etag, p.size) for p in record.parts]
        await engine.complete(record)
        first_reads = file_reads(path)
        again = await engine.upload(s3.bucket, s3.key("rgw-2.bin"), path)
        second_reads = file_reads(path) - first_reads
        stats = engine.stats
        client = fast(engine)
    assert stats.trailer_checksums is False
    assert (stats.trailer_bodies, stats.trailer_fallbacks) == (0, 1)
    assert "XAmzContentSHA256Mismatch" in (client.trailer_refusal or "")
    assert list(client.trailer_states.values()) == [TrailerState.OFF]
    assert second_reads == 2 * len(data)  # two-pass from the start: no trailer tried
    assert first_reads >= 2 * len(data)
    check_parts(record, data)
    assert again.parts == 4
    assert get(s3, s3.key("rgw-1.bin")) == data
    assert get(s3, s3.key("rgw-2.bin")) == data
    assert pending_keys(s3) == []


async def test_either_store_gets_the_file_right(s3: S3Target, tmp_path: Path) -> None:
    """Whichever store: trailers where it takes them, two passes where not; same object."""
    path, data = data_file(tmp_path, 2 * PART + 1)
    engine = await trailer_engine(s3, "on", max_concurrency=2)
    async with engine:
        record = await engine.upload(s3.bucket, s3.key("either.bin"), path, defer=True)
        await engine.complete(record)
        stats = engine.stats
    assert stats.trailer_checksums is s3.name.startswith("moto")
    check_parts(record, data)
    assert get(s3, s3.key("either.bin")) == data


@pytest.mark.also_https
async def test_auto_is_trailers_over_https_sendfile_over_http(
    moto_s3: S3Target, tmp_path: Path
) -> None:
    """The default (auto) sends no trailer over plain HTTP: sendfile sends the file part
    without reading it here, so the one checksum pass is the only read. Over HTTPS (no
    sendfile under TLS) every part carries a trailer."""
    s3 = moto_s3
    path, data = data_file(tmp_path, 2 * PART + 17)
    engine = await open_engine(s3.engine_config(part_size=PART), "sendfile")
    async with engine:
        assert engine.config.trailer_checksum == "auto"
        record = await engine.upload(s3.bucket, s3.key("auto.bin"), path, defer=True)
        await engine.complete(record)
        sent = zero_copy_bytes(engine)
        stats = engine.stats
    if https(s3):
        assert sent == 0
        assert (stats.trailer_checksums, stats.trailer_bodies) == (True, 3)
    else:
        assert sent == len(data)
        assert (stats.trailer_checksums, stats.trailer_bodies) == (None, 0)
    check_parts(record, data)
    assert get(s3, s3.key("auto.bin")) == data
