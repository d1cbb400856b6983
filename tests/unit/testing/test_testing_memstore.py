"""The in-memory store behaves like S3 where the committers depend on it, its faults hit
the request they name, and the sequential-request counter counts chains, not requests."""

from __future__ import annotations

import hashlib
import itertools

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zerorename.engine.errors import (
    BucketNotFound,
    ObjectNotFound,
    PreconditionFailed,
    RecordError,
    RetriesExhausted,
    S3Error,
    UploadNotFound,
)
from zerorename.engine.results import PartInfo, PendingUpload, UploadInfo, multipart_etag
from zerorename.servers.requestlog import Request, longest_chain, sequential_requests
from zerorename.testing import memstore
from zerorename.testing.memfaults import ProcessCrashed
from zerorename.testing.memstate import StoredObject
from zerorename.testing.memstore import MemoryState, MemoryStore

B = "bkt"


def fresh(**kw: object) -> MemoryStore:
    return MemoryStore(MemoryState(B), **kw)  # type: ignore[arg-type]


async def test_objects_put_get_head_delete() -> None:
    s = fresh()
    etag = await s.put_object(B, "a/b c+%.txt", b"hello")
    assert etag == f'"{hashlib.md5(b"hello").hexdigest()}"'
    assert await s.get_object(B, "a/b c+%.txt") == b"hello"
    info = await s.head_object(B, "a/b c+%.txt")
    assert info is not None and (info.size, info.etag) == (5, etag)
    assert b"".join([c async for c in s.iter_object(B, "a/b c+%.txt", chunk_size=2)]) == b"hello"
    assert await s.head_object(B, "missing") is None
    with pytest.raises(ObjectNotFound):
        await s.get_object(B, "missing")
    with pytest.raises(ObjectNotFound):
        [c async for c in s.iter_object(B, "missing")]
    assert await s.delete_objects(B, ["a/b c+%.txt", "missing"]) == 2  # missing is fine
    assert s.state.objects(B) == {}
    with pytest.raises(BucketNotFound):
        await s.put_object("other-bucket", "k", b"")


async def test_put_if_none_match_refuses_an_existing_key() -> None:
    s = fresh()
    await s.put_object(B, "k", b"first", if_none_match=True)
    with pytest.raises(PreconditionFailed):
        await s.put_object(B, "k", b"second", if_none_match=True)
    assert s.state.objects(B) == {"k": b"first"}
    await s.put_object(B, "k", b"third")  # unconditional: overwrites
    assert s.state.objects(B) == {"k": b"third"}


async def test_delete_batches_of_1000_one_request_each() -> None:
    s = fresh()
    keys = [f"k{i:05}" for i in range(2500)]
    for k in keys:
        s.state.buckets[B][k] = StoredObject(b"", '"x"', 0.0)
    before = s.requests
    assert await s.delete_objects(B, iter(keys)) == 2500
    assert s.requests - before == 3
    assert s.state.objects(B) == {}


def model_listing(
    keys: set[str], prefix: str, delimiter: str | None
) -> tuple[list[str], list[str]]:
    contents, prefixes = [], set()
    for k in sorted(keys):
        if not k.startswith(prefix):
            continue
        rest = k[len(prefix) :]
        if delimiter and delimiter in rest:
            prefixes.add(prefix + rest[: rest.index(delimiter) + 1])
        else:
            contents.append(k)
    return contents, sorted(prefixes)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keys=st.sets(st.text(alphabet="ab/", min_size=1, max_size=5), max_size=12),
    prefix=st.text(alphabet="ab/", max_size=2),
    delimiter=st.sampled_from([None, "/"]),
    page=st.integers(1, 4),
)
def test_listing_matches_s3s_model_on_every_page_size(
    keys: set[str], prefix: str, delimiter: str | None, page: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any keys, prefix, delimiter and page size: the listing is S3's (sorted contents,
    common prefixes once each), one ListObjectsV2 per page."""
    monkeypatch.setattr(memstore, "PAGE", page)
    s = fresh()
    for k in keys:
        s.state.buckets[B][k] = StoredObject(k.encode(), '"e"', 0.0)

    async def run() -> tuple[list[str], list[str]]:
        objs = [o.key async for o in s.list_objects(B, prefix, delimiter=delimiter)]
        subs = [p async for p in s.list_prefixes(B, prefix, delimiter=delimiter or "/")]
        return objs, subs

    objs, subs = anyio.run(run)
    want_objs, want_subs = model_listing(keys, prefix, delimiter)
    assert objs == want_objs
    assert subs == model_listing(keys, prefix, "/")[1]
    entries = len(want_objs) + (len(want_subs) if delimiter else 0)
    pages = s.stats.by_operation["ListObjectsV2"]
    assert pages <= 2 * max(1, -(-entries // page))  # one request per page, both listings


async def deferred(s: MemoryStore, key: str, data: bytes) -> PendingUpload:
    return await s.upload(B, key, data, defer=True)


async def test_multipart_invisible_until_completed_with_s3s_etag() -> None:
    s = fresh(part_size=4, min_part_size=4)
    rec = await deferred(s, "out/f.bin", b"0123456789")
    assert len(rec.parts) == 3 and rec.length == 10 and rec.checksum_algorithm == "CRC32C"
    assert await s.head_object(B, "out/f.bin") is None
    assert [o async for o in s.list_objects(B, "out/")] == []
    assert [(u.key, u.upload_id) async for u in s.list_uploads(B, "out")] == [
        ("out/f.bin", rec.upload_id)
    ]
    done = await s.complete(rec)
    assert s.state.objects(B) == {"out/f.bin": b"0123456789"}
    assert done.etag == f'"{multipart_etag(rec)}"' and done.etag.endswith('-3"')
    assert s.state.pending(B) == []
    with pytest.raises(UploadNotFound):
        await s.complete(rec)
    assert await s.abort(rec) is False  # gone: False, as the engine answers


async def test_a_copy_of_the_state_is_independent() -> None:
    """Objects and parts are shared (immutable), containers are not: a complete, a part
    dropped, an abort or a new upload on the copy leaves the original as it was, and the
    copy's next upload's sequence number goes on from the original's."""
    s = fresh(part_size=4, min_part_size=4)
    await s.put_object(B, "a", b"1")
    rec = await deferred(s, "out/f.bin", b"0123456789")
    other = await deferred(s, "out/g.bin", b"0123")
    branch = MemoryStore(s.state.copy(), part_size=4, min_part_size=4)
    await branch.complete(rec)
    branch.state.uploads[other.upload_id].parts.clear()
    await branch.abort(other)
    await branch.put_object(B, "a", b"2")
    again = await deferred(branch, "out/h.bin", b"01")
    assert s.state.objects(B) == {"a": b"1"}
    assert s.state.pending(B) == sorted(
        [("out/f.bin", rec.upload_id), ("out/g.bin", other.upload_id)]
    )
    assert [len(u.parts) for u in s.state.uploads.values()] == [3, 1]
    assert branch.state.objects(B) == {"a": b"2", "out/f.bin": b"0123456789"}
    assert branch.state.uploads[again.upload_id].seq == 3
    assert (await deferred(s, "out/h.bin", b"01")).upload_id.startswith("mem-3-")


async def test_complete_checks_parts_and_size_and_if_none_match() -> None:
    s = fresh(part_size=4)  # S3's 5 MiB minimum for every part but the last
    rec = await deferred(s, "k", b"0123456789")
    with pytest.raises(S3Error) as small:
        await s.complete(rec)
    assert small.value.code == "EntityTooSmall"
    one = await deferred(s, "one", b"abc")
    bad = PendingUpload(B, "one", one.upload_id, (PartInfo(1, '"' + "0" * 32 + '"', 3),), 3)
    with pytest.raises(S3Error) as wrong:
        await s.complete(bad)
    assert wrong.value.code == "InvalidPart"
    await s.put_object(B, "one", b"racer")
    with pytest.raises(PreconditionFailed):
        await s.complete(one, if_none_match=True)
    assert s.state.objects(B)["one"] == b"racer"  # nothing written
    assert ("one", one.upload_id) in s.state.pending(B)  # the upload stays
    await s.complete(one)
    assert s.state.objects(B)["one"] == b"abc"


async def test_list_uploads_is_by_directory_and_abort_many_counts_gone_ones() -> None:
    s = fresh()
    a = await deferred(s, "data/set1/a", b"a")
    b = await deferred(s, "data/set10/b", b"b")
    assert [u.key async for u in s.list_uploads(B, "data/set1")] == ["data/set1/a"]
    assert [u.key async for u in s.list_uploads(B, "data/set1", directory=False)] == [
        "data/set1/a",
        "data/set10/b",
    ]
    gone = UploadInfo(B, "data/x", "no-such-id", 0.0)
    bad = UploadInfo(B, "", "id", 0.0)  # an empty key would address the bucket
    before = s.requests
    res = await s.abort_many([a, gone, bad])
    assert (res.succeeded, res.failed) == (2, 1)
    assert res.failures[0].code == "RecordError"
    assert s.requests - before == 2  # the bad record sent nothing
    assert s.state.pending(B) == [("data/set10/b", b.upload_id)]
    with pytest.raises(RecordError):
        await s.abort(bad)


async def test_complete_many_reports_failures_and_bounds_concurrency() -> None:
    s = fresh(latency=0.02)
    recs = [await deferred(s, f"k{i}", b"x") for i in range(10)]
    seen: list[tuple[str, bool]] = []
    start = len(s.log)
    res = await s.complete_many(
        [*recs, recs[0]], concurrency=5, on_result=lambda r, e: seen.append((r.key, e is None))
    )
    assert (res.succeeded, res.failed) == (10, 1)
    assert res.failures[0].code == "NoSuchUpload"
    assert sorted(seen) == sorted([(f"k{i}", True) for i in range(10)] + [("k0", False)])
    # 11 completes, 5 at a time: three rounds of requests one after another
    assert sequential_requests(s.log[start:]) == 3


async def test_fail_at_hits_the_nth_request_of_an_operation() -> None:
    s = fresh()
    boom = RetriesExhausted("PutObject: SlowDown past the retry budget", code="SlowDown")
    s.fail_at(2, boom, op="PutObject")
    await s.head_object(B, "x")  # not a PutObject: not counted
    await s.put_object(B, "a", b"1")
    with pytest.raises(RetriesExhausted):
        await s.put_object(B, "b", b"2")
    await s.put_object(B, "c", b"3")  # one fault, one request
    assert sorted(s.state.objects(B)) == ["a", "c"]
    s.fail_at(1, RetriesExhausted("answer lost"), after=True)
    with pytest.raises(RetriesExhausted):
        await s.put_object(B, "d", b"4")
    assert "d" in s.state.objects(B)  # it took effect; only the answer was lost
    assert [r.error for r in s.log[-3:]] == ["RetriesExhausted", None, "RetriesExhausted"]
    with pytest.raises(ValueError):
        s.fail_at(0, boom)


async def test_crash_at_kills_the_handle_and_reopen_sees_the_same_state() -> None:
    s = fresh()
    s.crash_at(2)
    await s.put_object(B, "a", b"1")
    with pytest.raises(ProcessCrashed):
        await s.put_object(B, "b", b"2")
    with pytest.raises(ProcessCrashed):  # a dead process sends nothing more
        await s.head_object(B, "a")
    assert s.crashed and sorted(s.state.objects(B)) == ["a"]
    again = s.reopen()
    assert again.log == [] and not again.crashed
    assert await again.get_object(B, "a") == b"1"
    s2 = fresh()
    s2.crash_at(1, after=True)
    with pytest.raises(ProcessCrashed):
        await s2.put_object(B, "a", b"1")
    assert s2.state.objects(B) == {"a": b"1"}  # it landed, then the process died
    branch = s2.state.copy()
    branch.buckets[B].clear()
    assert s2.state.objects(B) == {"a": b"1"}


def req(n: int, start: float, end: float) -> Request:
    return Request(n, "PutObject", B, f"k{n}", start, end)


def test_counter_on_known_logs() -> None:
    assert sequential_requests([]) == 0
    assert sequential_requests([req(1, 0, 1), req(2, 1, 2), req(3, 2, 3)]) == 3
    assert sequential_requests([req(i, 0.001 * i, 1 + 0.001 * i) for i in range(10)]) == 1
    # one, ten in parallel, one: three deep
    log = [req(0, 0, 1)] + [req(i, 1, 2) for i in range(1, 11)] + [req(11, 2.5, 3)]
    assert [r.number for r in longest_chain(log)][::2] == [0, 11]
    assert sequential_requests(log) == 3


@given(st.lists(st.tuples(st.floats(0, 10), st.floats(0, 2)), max_size=25))
def test_counter_chain_is_a_chain_and_as_long_as_any(spans: list[tuple[float, float]]) -> None:
    log = [req(i, s, s + d) for i, (s, d) in enumerate(spans)]
    chain = longest_chain(log)
    assert all(a.end <= b.start for a, b in itertools.pairwise(chain))
    # greedy by end time gives a longest chain of intervals: the counter finds as many
    greedy, last = 0, float("-inf")
    for r in sorted(log, key=lambda r: (r.end, r.start)):
        if r.start >= last:
            greedy, last = greedy + 1, r.end
    assert len(chain) == greedy


async def test_counter_on_the_fake_with_latency() -> None:
    s = fresh(latency=0.02)
    for k in "abc":
        await s.put_object(B, k, b"x")
    assert sequential_requests(s.log) == 3
    start = len(s.log)
    async with anyio.create_task_group() as tg:
        for i in range(10):
            tg.start_soon(s.put_object, B, f"p{i}", b"x")
    assert sequential_requests(s.log[start:]) == 1
    assert sequential_requests(s.log) == 4
