"""The blocking upload writer across the process portal, on moto (the portal and the writer
are zerorename's own, whatever the store): an engine kept as a portal resource, a writer
per worker thread, and the after-close hook a committer records a deferred upload with."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine_helpers import get, object_keys, pending_keys
from zerorename.engine import PendingUpload, UploadEngine
from zerorename.portal import process_portal
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)

DATA = os.urandom(11 * MiB + 777)


@MOTO
def test_writers_from_threads_through_the_process_portal(s3: S3Target) -> None:
    portal = process_portal()
    key = ("test-portal-writer", s3.prefix)
    engine = portal.resource(key, lambda: UploadEngine(s3.engine_config(part_size=5 * MiB)))
    recorded: list[PendingUpload] = []

    async def record(result: object) -> None:
        assert portal.in_loop_thread()  # the hook runs on the loop, before close() returns
        assert isinstance(result, PendingUpload)
        recorded.append(result)

    def produce(i: int) -> PendingUpload:
        with engine.open_sync_writer(s3.bucket, s3.key(f"w{i}.bin"), loop=portal, defer=True) as f:
            f.after_close(record)
            for pos in range(0, len(DATA), 1 << 20):
                f.write(DATA[pos : pos + (1 << 20)])
            assert f.tell() == len(DATA)
        assert f.result in recorded
        assert isinstance(f.result, PendingUpload)
        return f.result

    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            pending = list(pool.map(produce, range(3)))
        assert object_keys(s3) == []  # deferred: nothing visible yet
        for p in pending:
            portal.run(engine.complete(p))
        assert [get(s3, s3.key(f"w{i}.bin")) for i in range(3)] == [DATA] * 3
    finally:
        portal.discard(key)
    assert pending_keys(s3) == []


@MOTO
def test_an_after_close_error_is_raised_by_close(s3: S3Target) -> None:
    """A hook that fails (a record that could not be written) fails close(); the
    deferred upload is the hook's to abort, as a committer's does."""
    portal = process_portal()
    key = ("test-portal-writer-hook", s3.prefix)
    engine = portal.resource(key, lambda: UploadEngine(s3.engine_config()))

    async def refuse(result: object) -> None:
        assert isinstance(result, PendingUpload)
        await engine.abort(result)
        raise OSError("record store unavailable")

    try:
        w = engine.open_sync_writer(s3.bucket, s3.key("hook.bin"), loop=portal, defer=True)
        w.after_close(refuse)
        w.write(b"abc")
        with pytest.raises(OSError, match="record store unavailable"):
            w.close()
        assert w.closed
    finally:
        portal.discard(key)
    assert pending_keys(s3) == [] and object_keys(s3) == []
