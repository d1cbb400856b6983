"""UploadEngine against real S3 servers (moto and Ceph RGW) over HTTP."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import ablocks, blocks, get, make_source, object_keys, pending_keys
from zerorename.engine import (
    BytesSent,
    EngineConfig,
    PartDone,
    PendingUpload,
    UploadCompleted,
    UploadDeferred,
    UploadEngine,
    UploadResult,
    errors,
)
from zerorename.engine.checksums import compute
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)

SPECIAL_KEYS = [
    "with space/file name.bin",
    "unicode/ünïcödé-日本語.bin",
    "plus+sign/a+b.bin",
    "percent/100%25%.bin",
    "hash#and?query=yes.bin",
    "equals=k/v=1.bin",
]


def cfg(s3: S3Target, **kw: Any) -> EngineConfig:
    kw.setdefault("part_size", 5 * MiB)
    kw.setdefault("max_concurrency", 4)
    return s3.engine_config(**kw)


DATA = os.urandom(12 * MiB + 12345)


@pytest.mark.parametrize("kind", ["bytes", "memoryview", "path", "fileobj", "sync", "async"])
@MOTO
async def test_every_source_round_trips(s3: S3Target, kind: str, tmp_path: Path) -> None:
    source = make_source(kind, DATA, tmp_path)
    key = s3.key(f"src-{kind}.bin")
    async with UploadEngine(cfg(s3)) as engine:
        result = await engine.upload(s3.bucket, key, source)
    assert isinstance(result, UploadResult)
    assert (result.length, result.parts) == (len(DATA), 3)
    assert get(s3, key) == DATA
    assert pending_keys(s3) == []


@pytest.mark.parametrize("form", ["bytes", "bytearray", "memoryview", "words", "sliced"])
@pytest.mark.parametrize("size", [0, 1, 5 * MiB])
@MOTO
async def test_a_buffer_that_fits_one_part_is_one_put(s3: S3Target, form: str, size: int) -> None:
    """A bytes-like source no larger than a part takes the single-part path: one
    PutObject of exactly its bytes, whatever the buffer's shape (a view of 4-byte words
    is sent as its bytes), no multipart upload made or left."""
    import array

    data = os.urandom(size - size % 4)
    source: Any = {
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview": memoryview(data),
        "words": memoryview(array.array("I", data)),
        "sliced": memoryview(b"!" + data + b"!")[1:-1],
    }[form]
    key = s3.key(f"one-put-{form}-{size}")
    events: list[Any] = []
    async with UploadEngine(cfg(s3)) as engine:
        result = await engine.upload(s3.bucket, key, source, progress=events.append)
        with pytest.raises(errors.PlanError):  # a size it does not have: refused, not sent
            await engine.upload(s3.bucket, s3.key("wrong-size"), source, size=len(data) + 1)
    assert (result.length, result.parts, result.upload_id) == (len(data), 1, None)
    assert get(s3, key) == data
    assert object_keys(s3) == [key]
    assert pending_keys(s3) == []
    assert [type(e).__name__ for e in events if isinstance(e, UploadCompleted)] == [
        "UploadCompleted"
    ]


@pytest.mark.parametrize("size", [0, 1, 5 * MiB, 5 * MiB + 1])
async def test_tiny_zero_and_boundary_sizes(s3: S3Target, size: int) -> None:
    data = os.urandom(size)
    async with UploadEngine(cfg(s3)) as engine:
        done = await engine.upload(s3.bucket, s3.key(f"plain-{size}"), ablocks(data, 1 << 20))
        pend = await engine.upload(s3.bucket, s3.key(f"deferred-{size}"), data, defer=True)
        await engine.complete(pend)
    assert done.length == size
    assert get(s3, s3.key(f"plain-{size}")) == data
    assert get(s3, s3.key(f"deferred-{size}")) == data
    assert pending_keys(s3) == []


@pytest.mark.parametrize("key", SPECIAL_KEYS)
async def test_special_keys_round_trip_exactly(s3: S3Target, key: str) -> None:
    full = s3.key(key)
    async with UploadEngine(cfg(s3)) as engine:
        pend = await engine.upload(s3.bucket, full, b"x" * 100, defer=True)
        assert PendingUpload.from_json(pend.to_json()).key == full
        listed = [u.key async for u in engine.list_uploads(s3.bucket, s3.prefix)]
        assert listed == [full]
        await engine.complete(pend)
        listed_objects = [o.key async for o in engine.list_objects(s3.bucket, s3.prefix)]
    assert listed_objects == [full]
    assert object_keys(s3) == [full]
    assert get(s3, full) == b"x" * 100


async def test_deferred_upload_is_invisible_until_completed(s3: S3Target) -> None:
    key = s3.key("deferred/data.bin")
    events: list[Any] = []
    async with UploadEngine(cfg(s3)) as engine:
        pend = await engine.upload(s3.bucket, key, DATA, defer=True, progress=events.append)
        assert isinstance(pend, PendingUpload)
        assert await engine.head_object(s3.bucket, key) is None
        assert object_keys(s3) == []
        assert pending_keys(s3) == [key]
        assert [p.number for p in pend.parts] == [1, 2, 3]
        assert sum(p.size for p in pend.parts) == pend.length == len(DATA)
        # the record survives JSON and another engine completes it
    record = PendingUpload.from_json(pend.to_json())
    async with UploadEngine(cfg(s3)) as other:
        done = await other.complete(record)
    assert done.length == len(DATA)
    assert get(s3, key) == DATA
    assert pending_keys(s3) == []
    assert next(e for e in events if isinstance(e, UploadDeferred)).length == len(DATA)
    assert sum(e.delta for e in events if isinstance(e, BytesSent)) == len(DATA)
    assert sorted(e.number for e in events if isinstance(e, PartDone)) == [1, 2, 3]


@pytest.mark.parametrize("algorithm", ["none", "CRC32", "CRC32C", "SHA256"])
async def test_checksum_per_part_is_recorded(s3: S3Target, algorithm: str) -> None:
    async with UploadEngine(cfg(s3, checksum=algorithm)) as engine:
        pend = await engine.upload(s3.bucket, s3.key("c.bin"), DATA, defer=True)
        await engine.complete(pend)
    offsets = [0, 5 * MiB, 10 * MiB, len(DATA)]
    expected = [compute(algorithm, DATA[a:b]) for a, b in itertools.pairwise(offsets)]
    assert [p.checksum for p in pend.parts] == expected
    assert pend.checksum_algorithm == (None if algorithm == "none" else algorithm)
    assert get(s3, s3.key("c.bin")) == DATA


@MOTO
async def test_async_writer_streams_and_defers(s3: S3Target) -> None:
    key = s3.key("writer.bin")
    async with UploadEngine(cfg(s3)) as engine:
        async with engine.open_writer(s3.bucket, key, defer=True) as w:
            for block in blocks(DATA, 100_003):
                await w.write(block)
        assert isinstance(w.result, PendingUpload)
        assert object_keys(s3) == []
        await engine.complete(w.result)
    assert get(s3, key) == DATA


@MOTO
async def test_async_writer_exception_aborts(s3: S3Target) -> None:
    async with UploadEngine(cfg(s3)) as engine:
        with pytest.raises(RuntimeError, match="producer broke"):
            async with engine.open_writer(s3.bucket, s3.key("broken.bin")) as w:
                await w.write(DATA)
                raise RuntimeError("producer broke")
    assert pending_keys(s3) == []
    assert object_keys(s3) == []


@MOTO
async def test_after_create_runs_once_the_upload_exists_and_its_error_aborts(
    s3: S3Target,
) -> None:
    """``after_create`` (a committer's check that its job still runs) sees the upload
    pending; when it raises, the writer raises that error and the upload is aborted, from
    the async and the blocking writer alike."""
    seen: list[list[str]] = []

    async def look() -> None:
        seen.append(pending_keys(s3))

    async def refuse() -> None:
        raise LookupError("the job is over")

    loop = asyncio.get_running_loop()
    async with UploadEngine(cfg(s3)) as engine:
        async with engine.open_writer(s3.bucket, s3.key("ok"), defer=True, after_create=look) as w:
            await w.write(b"fine")
        assert isinstance(w.result, PendingUpload) and seen == [[s3.key("ok")]]
        await engine.abort(w.result)
        with pytest.raises(LookupError, match="the job is over"):
            async with engine.open_writer(
                s3.bucket, s3.key("async"), defer=True, after_create=refuse
            ) as w:
                for block in blocks(DATA, 1 << 20):
                    await w.write(block)

        def blocking() -> None:
            with engine.open_sync_writer(
                s3.bucket, s3.key("sync"), loop=loop, defer=True, after_create=refuse
            ) as f:
                for block in blocks(DATA, 1 << 20):
                    f.write(block)

        with pytest.raises(LookupError, match="the job is over"):
            await asyncio.to_thread(blocking)
        assert engine.stats.uploads_aborted >= 2
    assert pending_keys(s3) == [] and object_keys(s3) == []


@MOTO
async def test_sync_writer_from_a_thread(s3: S3Target) -> None:
    key = s3.key("sync-writer.csv")
    loop = asyncio.get_running_loop()
    async with UploadEngine(cfg(s3)) as engine:

        def produce() -> Any:
            with engine.open_sync_writer(s3.bucket, key, loop=loop, defer=True) as f:
                for block in blocks(DATA, 65536):
                    f.write(block)
                assert f.tell() == len(DATA)
            return f.result

        pend = await asyncio.to_thread(produce)
        assert isinstance(pend, PendingUpload)
        await engine.complete(pend)

        def broken() -> None:
            with engine.open_sync_writer(s3.bucket, s3.key("broken"), loop=loop) as f:
                f.write(DATA)
                raise ValueError("writer failed")

        with pytest.raises(ValueError, match="writer failed"):
            await asyncio.to_thread(broken)
        with pytest.raises(errors.EngineError, match="another thread"):
            engine.open_sync_writer(s3.bucket, key, loop=loop)
    assert get(s3, key) == DATA
    assert pending_keys(s3) == []


@MOTO
async def test_failing_source_aborts_the_upload(s3: S3Target) -> None:
    async def bad() -> AsyncIterator[bytes]:
        yield os.urandom(11 * MiB)
        raise OSError("disk vanished")

    async with UploadEngine(cfg(s3)) as engine:
        with pytest.raises(OSError, match="disk vanished"):
            await engine.upload(s3.bucket, s3.key("bad.bin"), bad())
        assert engine.stats.uploads_aborted == 1
    assert pending_keys(s3) == []


@MOTO
async def test_cancelled_upload_aborts(s3: S3Target) -> None:
    started = asyncio.Event()

    async def slow() -> AsyncIterator[bytes]:
        yield os.urandom(6 * MiB)
        started.set()
        await asyncio.sleep(3600)
        yield b""

    async with UploadEngine(cfg(s3)) as engine:
        task = asyncio.ensure_future(engine.upload(s3.bucket, s3.key("c.bin"), slow()))
        await started.wait()
        while engine.stats.parts_uploaded < 1:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert engine.stats.uploads_aborted == 1
    assert pending_keys(s3) == []


async def test_complete_many_and_abort_many_stream(s3: S3Target) -> None:
    n = 60
    async with UploadEngine(cfg(s3)) as engine:
        records = [
            await engine.upload(s3.bucket, s3.key(f"many/{i:03d}"), b"%d" % i, defer=True)
            for i in range(n)
        ]
        assert len(pending_keys(s3)) == n
        pulled = 0

        async def source() -> AsyncIterator[PendingUpload]:
            nonlocal pulled
            for r in records[: n // 2]:
                pulled += 1
                yield r

        seen: list[str] = []
        result = await engine.complete_many(
            source(), concurrency=8, on_result=lambda r, e: seen.append(r.key)
        )
        assert (result.succeeded, result.failed) == (n // 2, 0)
        assert result.bytes == sum(r.length for r in records[: n // 2])
        assert pulled == n // 2 and len(seen) == n // 2
        aborted = await engine.abort_many(iter(records[n // 2 :]), concurrency=8)
        assert (aborted.succeeded, aborted.failed) == (n - n // 2, 0)
    assert pending_keys(s3) == []
    assert object_keys(s3) == sorted(r.key for r in records[: n // 2])


async def test_list_uploads_treats_prefix_as_directory(s3: S3Target) -> None:
    async with UploadEngine(cfg(s3)) as engine:
        a = await engine.upload(s3.bucket, s3.key("dataset1/part-0"), b"a", defer=True)
        b = await engine.upload(s3.bucket, s3.key("dataset10/part-0"), b"b", defer=True)
        dir1 = [u.key async for u in engine.list_uploads(s3.bucket, s3.key("dataset1"))]
        raw = [
            u.key async for u in engine.list_uploads(s3.bucket, s3.key("dataset1"), directory=False)
        ]
        assert dir1 == [a.key]
        assert sorted(raw) == sorted([a.key, b.key])
        await engine.abort_many([a, b])


async def test_if_none_match_refuses_existing_key_on_moto(moto_s3: S3Target) -> None:
    s3 = moto_s3
    key = s3.key("exists.bin")
    async with UploadEngine(cfg(s3)) as engine:
        await engine.put_object(s3.bucket, key, b"old")
        pend = await engine.upload(s3.bucket, key, b"new", defer=True)
        with pytest.raises(errors.PreconditionFailed):
            await engine.complete(pend, if_none_match=True)
        with pytest.raises(errors.PreconditionFailed):
            await engine.put_object(s3.bucket, key, b"x", if_none_match=True)
        await engine.abort(pend)
    assert get(s3, key) == b"old"


async def test_object_operations(s3: S3Target) -> None:
    async with UploadEngine(cfg(s3)) as engine:
        for i in range(5):
            await engine.put_object(s3.bucket, s3.key(f"d/p={i % 2}/f{i}"), b"v%d" % i)
        assert await engine.get_object(s3.bucket, s3.key("d/p=0/f0")) == b"v0"
        chunks = [c async for c in engine.iter_object(s3.bucket, s3.key("d/p=1/f1"), chunk_size=1)]
        assert b"".join(chunks) == b"v1"
        info = await engine.head_object(s3.bucket, s3.key("d/p=1/f3"))
        assert info is not None and info.size == 2
        assert await engine.head_object(s3.bucket, s3.key("nope")) is None
        with pytest.raises(errors.ObjectNotFound):
            await engine.get_object(s3.bucket, s3.key("nope"))
        prefixes = [p async for p in engine.list_prefixes(s3.bucket, s3.key("d/"))]
        assert prefixes == [s3.key("d/p=0/"), s3.key("d/p=1/")]
        keys = [o.key async for o in engine.list_objects(s3.bucket, s3.prefix)]
        assert len(keys) == 5
        assert await engine.delete_objects(s3.bucket, iter(keys)) == 5
    assert object_keys(s3) == []


@MOTO
async def test_stats_and_engine_event_callback(s3: S3Target) -> None:
    events: list[Any] = []

    async def on_event(e: Any) -> None:
        events.append(e)

    async with UploadEngine(cfg(s3), on_event=on_event) as engine:
        await engine.upload(s3.bucket, s3.key("s.bin"), DATA)
        stats = engine.stats
    assert stats.parts_uploaded == 3 and stats.bytes_uploaded == len(DATA)
    assert stats.by_operation["UploadPart"] == 3
    assert [type(e) for e in events if isinstance(e, UploadCompleted)] == [UploadCompleted]
    assert hashlib.md5(get(s3, s3.key("s.bin"))).digest() == hashlib.md5(DATA).digest()


# ------------------------------------------------------------------- bad input


async def test_bad_input_is_refused_before_any_request(moto_s3: S3Target) -> None:
    s3 = moto_s3
    async with UploadEngine(cfg(s3)) as engine:
        with pytest.raises(errors.ConfigError, match="invalid bucket name"):
            await engine.upload("Bad Bucket/x", "k", b"x")
        with pytest.raises(errors.ConfigError, match="non-empty"):
            await engine.upload(s3.bucket, "", b"x")
        with pytest.raises(errors.ConfigError, match="cannot upload a int"):
            await engine.upload(s3.bucket, "k", 42)
        with pytest.raises(errors.ConfigError, match="not a readable file"):
            await engine.upload(s3.bucket, "k", "/no/such/file.parquet")
        assert engine.stats.requests == 0
    with pytest.raises(errors.ConfigError, match="5 MiB"):
        cfg(s3, part_size=1024)


async def test_missing_bucket_fails_fast(s3: S3Target) -> None:
    async with UploadEngine(cfg(s3)) as engine:
        with pytest.raises(errors.BucketNotFound, match="does not exist"):
            await engine.upload("zr-no-such-bucket-x1", "k", DATA)
        assert engine.stats.retries == 0


async def test_bad_credentials_fail_fast_on_rgw(rgw_s3: S3Target) -> None:
    s3 = rgw_s3
    bad = s3.engine_config(
        aws_access_key_id="WRONGKEY000000000000",
        aws_secret_access_key="wrongsecret000000000000000000000000000000",
    )
    async with UploadEngine(bad) as engine:
        with pytest.raises(errors.AccessDenied) as info:
            await engine.upload(s3.bucket, s3.key("k"), b"x")
        assert engine.stats.retries == 0
    assert "wrongsecret" not in str(info.value)


async def test_unreachable_endpoint_gives_up_within_budget() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    from zerorename.engine import RetryConfig

    config = EngineConfig(
        endpoint_url=f"http://127.0.0.1:{port}",
        region="us-east-1",
        addressing_style="path",
        aws_access_key_id="a",
        aws_secret_access_key="b",
        connect_timeout=1,
        retry=RetryConfig(max_attempts=3, base_delay=0.01, max_delay=0.05, max_elapsed=10),
    )
    async with UploadEngine(config) as engine:
        with pytest.raises(errors.EndpointUnreachable, match="endpoint_url"):
            await engine.upload("bucket", "key", b"x")
        assert engine.stats.requests == 3
        assert engine.stats.retries == 2


def test_engine_closes_twice_and_refuses_use_when_closed(moto_s3: S3Target) -> None:
    async def main() -> None:
        engine = UploadEngine(cfg(moto_s3))
        async with engine:
            pass
        await engine.close()
        with pytest.raises(errors.EngineError, match="not open"):
            await engine.put_object(moto_s3.bucket, "k", b"x")

    asyncio.run(main())


async def test_signed_payloads_work_too(moto_s3: S3Target) -> None:
    s3 = moto_s3
    async with UploadEngine(cfg(s3, payload_signing=True)) as engine:
        await engine.upload(s3.bucket, s3.key("signed.bin"), DATA)
    assert get(s3, s3.key("signed.bin")) == DATA


async def test_batch_source_error_surfaces_plainly(moto_s3: S3Target) -> None:
    s3 = moto_s3

    async def broken() -> AsyncIterator[PendingUpload]:
        yield await engine.upload(s3.bucket, s3.key("ok"), b"1", defer=True)
        raise LookupError("record source failed")

    async with UploadEngine(cfg(s3)) as engine:
        with pytest.raises(LookupError, match="record source failed"):
            await engine.complete_many(broken())


async def test_many_small_writers_hold_no_part_sized_buffers(moto_s3: S3Target) -> None:
    """Writers grow their buffers with the data: 16 open writers of a few bytes each must
    not allocate 16 part sizes (16 x 16 MiB = 256 MiB, eight times the bound). tracemalloc
    counts allocations, even of pages never touched, so an eager part-size buffer shows up
    here (it traces the in-process moto server too, which is why there are not more)."""
    import tracemalloc

    s3 = moto_s3
    async with UploadEngine(s3.engine_config(part_size=16 * MiB)) as engine:
        writers = [
            engine.open_writer(s3.bucket, s3.key(f"small/{i}"), defer=True) for i in range(16)
        ]
        tracemalloc.start()
        try:
            for w in writers:
                await w.__aenter__()
                await w.write(b"tiny")
            for w in writers:  # closed in opening order, not nested: writers allow that
                await w.__aexit__(None, None, None)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        await engine.abort_many([w.result for w in writers])  # type: ignore[misc]
    assert peak < 32 * MiB, f"peak traced allocations {peak / MiB:.1f} MiB"
