"""Every record is read with a size cap enforced while reading (issue 20, finding 9): an
oversized marker, journal or plan makes open/resume/abort fail in one line naming the
key, with nothing changed and no more than the cap read. On the in-memory store."""

from __future__ import annotations

from pathlib import Path

import pytest

from unit.committers.test_protocol_memory import B, prepare
from zerorename.committers import CommitterError, objectstore
from zerorename.committers.paths import Destination, JobLayout
from zerorename.engine.errors import ConfigError, ObjectNotFound, ObjectTooLarge
from zerorename.testing.memstore import MemoryState, MemoryStore

QUERY = "2b7c3f0e-1d2a-4e5b-9c8d-7a6f5e4d3c2b"
RECORDS = {
    "marker": ("marker", objectstore.MARKER_CAP),
    "journal": ("journal", objectstore.JOURNAL_CAP),
}


async def test_get_object_stops_at_its_cap() -> None:
    store = MemoryStore(MemoryState(B))
    await store.put_object(B, "k", b"x" * 100)
    assert await store.get_object(B, "k", max_size=100) == b"x" * 100
    store.bytes_read = 0
    with pytest.raises(ObjectTooLarge, match=r"s3://bkt/k .* 99 bytes") as err:
        await store.get_object(B, "k", max_size=99)
    assert "\n" not in str(err.value) and store.bytes_read == 100  # cap + 1 at most
    with pytest.raises(ConfigError, match="max_size"):
        await store.get_object(B, "k", max_size=-1)
    with pytest.raises(ObjectNotFound):
        await store.get_object(B, "nothing", max_size=1)


@pytest.mark.parametrize("record", list(RECORDS))
@pytest.mark.parametrize("action", ["resume", "abort"])
async def test_an_oversized_record_fails_in_one_line_and_changes_nothing(
    record: str, action: str, tmp_path: Path
) -> None:
    p = await prepare("magic", "append", tmp_path)
    attr, cap = RECORDS[record]
    key = getattr(JobLayout(Destination.parse(f"s3://{B}/out"), p.job_id), attr)
    await p.store().put_object(B, key, b" " * (cap + 1))  # whitespace: JSON would parse it
    before = p.state.copy()
    store = p.store()
    with pytest.raises(CommitterError) as err:
        job = await p.committer(store).open_job(p.job_id)
        await getattr(job, action)()
    msg = str(err.value)
    assert key in msg and f"{cap} bytes" in msg and "\n" not in msg
    assert isinstance(err.value.__cause__, ObjectTooLarge)
    assert p.state.objects(B) == before.objects(B)
    assert p.state.pending(B) == before.pending(B)
    assert store.bytes_read <= cap + 1 + 64 * 1024  # the oversized record read to its cap


async def test_an_oversized_stream_log_is_refused_at_its_cap() -> None:
    """The stream log's 4 MiB cap was checked after the whole object was read (on every
    batch commit, committed_files and read_stream_log): now the read stops at it."""
    from zerorename.spark_adapter.stream.log import MAX_LOG_BYTES, log_key
    from zerorename.spark_adapter.stream.read import read_log

    dest = Destination.parse(f"s3://{B}/out")
    store = MemoryStore(MemoryState(B))
    key = log_key(dest.list_prefix, QUERY)
    await store.put_object(B, key, b" " * (8 * MAX_LOG_BYTES))
    store.bytes_read = 0
    with pytest.raises(ObjectTooLarge, match=f"{MAX_LOG_BYTES} bytes"):
        await read_log(store, dest, QUERY)
    assert store.bytes_read == MAX_LOG_BYTES + 1
