"""File sources on moto and Ceph RGW: their parts are ranges of the file, read while they
are checksummed and sent (engine/bodies/filebody.py). Whichever way the bytes go -- sendfile on
the fast path, fresh blocks written through the transport, or botocore -- the object and
every part's ETag and checksum are the file's, byte for byte; connections are reused
under many parts in flight; a file object's position is honoured; a declared size the
file does not hold and a file that shrinks mid-upload fail cleanly, leaving nothing."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import SEND_MODES, data_file, get, object_keys, pending_keys, zero_copy_bytes
from engine_helpers import open_engine as open_mode_engine
from zerorename.engine import Event, PartDone, PendingUpload, UploadEngine, errors
from zerorename.engine.checksums import compute
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)

PART = 5 * MiB
#: sendfile: the fast path's zero copy; writes: the fast path writing pread blocks;
#: botocore: fast_path off (aiobotocore sends the range as an async iterable)


async def open_engine(
    s3: S3Target, mode: str, on_event: Callable[[Event], None] | None = None, **kw: Any
) -> UploadEngine:
    kw.setdefault("part_size", PART)
    kw.setdefault("max_concurrency", 4)
    config = s3.engine_config(fast_path=mode != "botocore", **kw)
    return await open_mode_engine(config, mode, on_event)


def check_parts(record: PendingUpload, data: bytes, part_size: int) -> None:
    """Every part's size, ETag (MD5 of its bytes) and CRC32C are the file's."""
    assert [p.number for p in record.parts] == list(range(1, len(record.parts) + 1))
    assert record.length == len(data)
    for p in record.parts:
        piece = data[(p.number - 1) * part_size : p.number * part_size]
        assert p.size == len(piece)
        assert p.etag.strip('"') == hashlib.md5(piece).hexdigest(), f"part {p.number}"
        assert p.checksum == compute("CRC32C", piece), f"part {p.number}"


def multipart_etag(data: bytes, part_size: int) -> str:
    digests = b"".join(
        hashlib.md5(data[i : i + part_size]).digest() for i in range(0, len(data), part_size)
    )
    return f'"{hashlib.md5(digests).hexdigest()}-{-(-len(data) // part_size)}"'


@pytest.mark.parametrize("mode", SEND_MODES)
async def test_a_file_uploads_byte_for_byte_every_way(
    s3: S3Target, mode: str, tmp_path: Path
) -> None:
    path, data = data_file(tmp_path, 4 * PART + 12345)
    key = s3.key(f"file-{mode}.bin")
    engine = await open_engine(s3, mode)
    async with engine:
        record = await engine.upload(s3.bucket, key, path, defer=True)
        assert object_keys(s3) == []  # deferred: nothing visible yet
        await engine.complete(record)
        sent_with_sendfile = zero_copy_bytes(engine)
        assert engine.stats.retries == 0
    assert sent_with_sendfile == (len(data) if mode == "sendfile" else 0)
    check_parts(record, data, PART)
    assert get(s3, key) == data
    head = s3.boto3_client().head_object(Bucket=s3.bucket, Key=key)
    assert head["ETag"] == multipart_etag(data, PART)
    assert pending_keys(s3) == []


#: both fast-path ways on moto; on RGW the zero-copy one (the gateway's keep-alive under
#: queued parts; how the fast path writes a range is zerorename's own)
REUSE_ON = [
    pytest.param("moto", "sendfile", id="moto-sendfile"),
    pytest.param("moto", "writes", id="moto-writes"),
    pytest.param("rgw", "sendfile", marks=pytest.mark.rgw, id="rgw-sendfile"),
]
#: every way on moto; on RGW the one where the file shrinks while a part is on the wire
#: (sendfile, no checksum pass): the gateway holds a request cut short; the other ways find
#: the shrink before a byte is sent, zerorename's own check
SHRINK_ON = [
    *(
        pytest.param("moto", mode, checksum, id=f"moto-{mode}-{checksum}")
        for mode in SEND_MODES
        for checksum in ("CRC32C", "none")
    ),
    pytest.param("rgw", "sendfile", "none", marks=pytest.mark.rgw, id="rgw-sendfile-none"),
]


@pytest.mark.parametrize(("s3", "mode"), REUSE_ON, indirect=["s3"])
async def test_many_parts_in_flight_on_few_reused_connections(
    s3: S3Target, mode: str, tmp_path: Path
) -> None:
    """12 parts, 8 in flight, 2 connections: requests queue for connections and every
    connection carries several parts one after another; two files at once."""
    files = [data_file(tmp_path, 6 * PART + 777 * seed, seed) for seed in (1, 2)]
    engine = await open_engine(s3, mode, max_concurrency=8, max_pool_connections=2)
    async with engine:
        records = [
            await engine.upload(s3.bucket, s3.key(f"many-{n}.bin"), path, defer=True)
            for n, (path, _) in enumerate(files)
        ]
        for record in records:
            await engine.complete(record)
        sent = zero_copy_bytes(engine)
    assert sent == (sum(len(d) for _, d in files) if mode == "sendfile" else 0)
    for n, (record, (_, data)) in enumerate(zip(records, files, strict=True)):
        check_parts(record, data, PART)
        assert get(s3, s3.key(f"many-{n}.bin")) == data


async def test_small_and_empty_files_are_one_put(moto_s3: S3Target, tmp_path: Path) -> None:
    s3 = moto_s3
    engine = await open_engine(s3, "sendfile")
    async with engine:
        for size in (0, 1, PART, PART + 1):
            path, data = data_file(tmp_path, size, seed=size + 10)
            result = await engine.upload(s3.bucket, s3.key(f"s-{size}"), path)
            assert (result.length, result.parts) == (size, 1 if size <= PART else 2)
            assert get(s3, s3.key(f"s-{size}")) == data
    assert pending_keys(s3) == []


@MOTO
async def test_a_file_object_uploads_from_its_position(s3: S3Target, tmp_path: Path) -> None:
    """A buffered file read a little: its descriptor is ahead of what was read, the upload
    starts at the file object's own position, and leaves it at the end."""
    path, data = data_file(tmp_path, 2 * PART + 99)
    key = s3.key("from-position.bin")
    engine = await open_engine(s3, "sendfile")
    async with engine:
        with open(path, "rb") as f:  # noqa: ASYNC230 (a small local file)
            f.seek(1000)
            assert f.read(24) == data[1000:1024]
            assert os.lseek(f.fileno(), 0, os.SEEK_CUR) > 1024  # the buffer read ahead
            result = await engine.upload(s3.bucket, key, f)
            assert f.tell() == len(data) and f.read() == b""
        assert zero_copy_bytes(engine) == len(data) - 1024
    assert result.length == len(data) - 1024
    assert get(s3, key) == data[1024:]


async def test_a_read_write_file_object_uploads_what_was_written(
    moto_s3: S3Target, tmp_path: Path
) -> None:
    """Bytes written through a buffered read-write file object are uploaded too (what it
    buffered is flushed before its descriptor is read)."""
    s3 = moto_s3
    path, data = data_file(tmp_path, PART + 10)
    extra = b"written through the file object" * 100
    engine = await open_engine(s3, "sendfile")
    async with engine:
        with open(path, "r+b") as f:  # noqa: ASYNC230 (a small local file)
            f.seek(0, os.SEEK_END)
            f.write(extra)
            f.seek(PART)
            result = await engine.upload(s3.bucket, s3.key("rw.bin"), f)
            assert f.tell() == len(data) + len(extra)
    assert result.length == 10 + len(extra)
    assert get(s3, s3.key("rw.bin")) == data[PART:] + extra


async def test_a_declared_size_the_file_does_not_hold_is_refused(
    moto_s3: S3Target, tmp_path: Path
) -> None:
    s3 = moto_s3
    path, data = data_file(tmp_path, PART + 10)
    engine = await open_engine(s3, "sendfile")
    async with engine:
        for wrong in (len(data) - 1, len(data) + 1):
            with pytest.raises(errors.PlanError, match="declared"):
                await engine.upload(s3.bucket, s3.key("wrong-size.bin"), path, size=wrong)
        with open(path, "rb") as f:  # noqa: ASYNC230 (a small local file)
            with pytest.raises(errors.PlanError, match="declared"):
                await engine.upload(s3.bucket, s3.key("wrong-size.bin"), f, size=3)
            assert f.tell() == 0
    assert pending_keys(s3) == [] and object_keys(s3) == []


@pytest.mark.parametrize(("s3", "mode", "checksum"), SHRINK_ON, indirect=["s3"])
async def test_a_file_that_shrinks_mid_upload_fails_and_leaves_nothing(
    s3: S3Target, mode: str, checksum: str, tmp_path: Path
) -> None:
    """Truncated once the first part is in: a later part finds its bytes gone, in its
    checksum pass or (with no checksum) while it is sent. That is the file's fault, not
    the network's: no retry, the upload is aborted."""
    path, _ = data_file(tmp_path, 4 * PART)

    def shrink(event: Event) -> None:
        if isinstance(event, PartDone) and event.number == 1:
            os.truncate(path, PART + 100)

    engine = await open_engine(s3, mode, shrink, max_concurrency=1, checksum=checksum)
    async with engine:
        with pytest.raises(errors.SourceChanged, match="shrank"):
            await engine.upload(s3.bucket, s3.key("shrinks.bin"), path)
        assert engine.stats.retries == 0
        assert engine.stats.uploads_aborted == 1
    assert pending_keys(s3) == [] and object_keys(s3) == []
