"""Attacks on the single-part path (helper attack5): a bytes-like source no larger than a
part is one PutObject (engine/core.py ``upload``, ``_whole_body``). The multipart path is
the reference: a buffer smaller than a part was copied into the part before anything was
sent, so what the caller does to it afterwards never reaches the object."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from engine_helpers import get, object_keys, pending_keys
from zerorename.engine import BytesSent, EngineConfig, UploadCompleted, UploadEngine
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)


def cfg(s3: S3Target, **kw: Any) -> EngineConfig:
    kw.setdefault("part_size", 5 * MiB)
    kw.setdefault("max_concurrency", 4)
    return s3.engine_config(**kw)


@pytest.mark.parametrize("form", ["bytearray", "memoryview"])
@MOTO
async def test_a_buffer_changed_while_it_is_sent_does_not_reach_the_object(
    s3: S3Target, form: str
) -> None:
    data = os.urandom(4 * MiB)
    buf = bytearray(data)
    source: Any = buf if form == "bytearray" else memoryview(buf)
    key = s3.key(f"changed-{form}")
    events: list[Any] = []

    def progress(e: Any) -> None:
        events.append(e)
        if isinstance(e, BytesSent):
            buf[:] = b"\0" * len(buf)  # the caller reuses its buffer mid-upload

    async with UploadEngine(cfg(s3)) as engine:
        result = await engine.upload(s3.bucket, key, source, progress=progress)
    assert result.parts == 1 and result.upload_id is None
    assert any(isinstance(e, BytesSent) for e in events)
    assert get(s3, key) == data  # what the buffer held when upload() was called
    assert pending_keys(s3) == []


@MOTO
async def test_cancelled_mid_put_leaves_no_object_and_no_upload(s3: S3Target) -> None:
    data = os.urandom(4 * MiB)
    key = s3.key("cancelled")
    sent = asyncio.Event()

    def progress(e: Any) -> None:
        if isinstance(e, BytesSent):
            sent.set()

    async with UploadEngine(cfg(s3)) as engine:
        task = asyncio.ensure_future(engine.upload(s3.bucket, key, data, progress=progress))
        await sent.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert object_keys(s3) == []
    assert pending_keys(s3) == []


@MOTO
async def test_defer_is_still_a_multipart_upload_and_after_create_runs(s3: S3Target) -> None:
    data = os.urandom(1000)
    key = s3.key("deferred-small")
    created: list[Any] = []

    async def after_create(*args: Any) -> None:
        created.append(args)

    async with UploadEngine(cfg(s3)) as engine:
        pend = await engine.upload(s3.bucket, key, data, defer=True, after_create=after_create)
        assert pend.upload_id  # a multipart upload, listed until completed
        assert pending_keys(s3) == [key]
        assert object_keys(s3) == []
        assert len(created) == 1
        await engine.complete(pend)
    assert get(s3, key) == data


@pytest.mark.parametrize("size", [0, 1, 3 * MiB + 7, 5 * MiB])
@MOTO
async def test_progress_of_one_put_is_the_same_as_of_a_stream(s3: S3Target, size: int) -> None:
    """One UploadCompleted and BytesSent adding up to the size, as the stream of the same
    bytes (the part-stream path) reports."""
    data = os.urandom(size)

    async def one_block() -> Any:
        yield data

    got: dict[str, list[Any]] = {"put": [], "stream": []}
    async with UploadEngine(cfg(s3)) as engine:
        await engine.upload(s3.bucket, s3.key("p"), data, progress=got["put"].append)
        await engine.upload(s3.bucket, s3.key("s"), one_block(), progress=got["stream"].append)
    for events in got.values():
        done = [e for e in events if isinstance(e, UploadCompleted)]
        assert len(done) == 1 and done[0].length == size
    totals = {
        how: sum(e.delta for e in events if isinstance(e, BytesSent)) for how, events in got.items()
    }
    assert totals["put"] == totals["stream"] == size
