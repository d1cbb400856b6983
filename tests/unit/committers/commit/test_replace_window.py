"""A replace commit and an older object rewritten while it runs (issue 24, item 7), on the
in-memory store: the replace deletes each planned object with its planned ETag, so a
store that honours the condition (S3) keeps an object rewritten between the replace's
last listing and its DeleteObjects; one that ignores it deletes it (the documented
window); one that refuses the ETag element gets the batch again without it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from zerorename.committers import CommitOptions, JobCommitError, MagicCommitter
from zerorename.engine.errors import RetriesExhausted, S3Error
from zerorename.testing.memfaults import Fault
from zerorename.testing.memstore import ConditionalDelete, MemoryState, MemoryStore

B = "bkt"
DEST = "out"
URI = f"s3://{B}/{DEST}"
OLD = f"{DEST}/old.csv"
OTHER = f"{DEST}/other.csv"


async def replace_job(store: MemoryStore, tmp: Path) -> tuple[Any, Any, str]:
    """Two older objects, and a replace job with one committed task: (job, summaries, key)."""
    await store.put_object(B, OLD, b"old")
    await store.put_object(B, OTHER, b"other")
    c = MagicCommitter(store, URI, conflict="replace", options=CommitOptions(staging_dir=tmp))
    job = await c.setup_job()
    ta = job.task_attempt(0)
    await ta.setup()
    async with ta.open("new.csv") as out:
        await out.write(b"new")
    summaries = [await ta.commit()]
    return job, summaries, f"{DEST}/{ta.final_rel('new.csv')}"


def rewrite_at(state: MemoryState, op: str, key: str, seen: list[str]) -> Any:
    """A gate that rewrites OLD (another writer, its own handle) right before the first
    ``op`` request on ``key`` takes effect; ``seen`` logs the requests as they come."""
    writer = MemoryStore(state)

    async def gate(operation: str, bucket: str, k: str) -> Fault | None:
        seen.append(f"{operation} {k}")
        if operation == op and k == key and "rewritten" not in seen:
            seen.append("rewritten")
            await writer.put_object(B, OLD, b"rewritten")
        return None

    return gate


async def commit_with_rewrite(
    tmp: Path, op: str, key: str | None, mode: ConditionalDelete = "honour"
) -> tuple[MemoryState, MemoryStore, list[str], str]:
    """A replace commit with OLD rewritten at the first ``op`` on ``key`` (None: the new
    file's key); (state, store, requests seen, the new file's key)."""
    state = MemoryState(B)
    store = MemoryStore(state, conditional_delete=mode)
    job, summaries, new = await replace_job(store, tmp)
    seen: list[str] = []
    store.gate = rewrite_at(state, op, new if key is None else key, seen)
    await job.commit(summaries)
    return state, store, seen, new


def replace_listings(seen: list[str]) -> list[int]:
    return [i for i, r in enumerate(seen) if r == f"ListObjectsV2 {DEST}/"]


async def test_an_object_rewritten_after_the_last_listing_survives(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The exact race: OLD rewritten after run_replacement listed it unchanged (so it is
    doomed), right before the DeleteObjects that names it takes effect."""
    caplog.set_level(logging.INFO, "zerorename.committers")
    state, store, seen, new = await commit_with_rewrite(tmp_path, "DeleteObjects", OLD)
    at = seen.index("rewritten")
    assert replace_listings(seen)[-1] < at  # the replace's last listing came before it
    objs = state.objects(B, f"{DEST}/")
    assert objs.get(OLD) == b"rewritten"  # kept: not the object the plan named
    assert OTHER not in objs and objs[new] == b"new"  # the rest of the replace happened
    kept = [r.getMessage() for r in caplog.records if "rewritten since" in r.getMessage()]
    assert len(kept) == 1 and "1 of the 2 older objects" in kept[0], kept
    assert all(r.levelno < logging.WARNING for r in caplog.records), caplog.text
    assert not [r for r in store.log if r.op == "DeleteObjects" and r.error]  # kept: no error


async def test_an_object_rewritten_before_the_last_listing_survives(tmp_path: Path) -> None:
    """Rewritten after the plan, before run_replacement's listing (at the commit's first
    complete): the listing sees another ETag, so it is not even asked to be deleted."""
    state, store, seen, new = await commit_with_rewrite(tmp_path, "CompleteMultipartUpload", None)
    assert seen.index("rewritten") < replace_listings(seen)[-1]
    objs = state.objects(B, f"{DEST}/")
    assert objs.get(OLD) == b"rewritten" and OTHER not in objs and objs[new] == b"new"
    deletes = [r for r in store.log if r.op == "DeleteObjects" and r.key == OLD]
    assert deletes == []


async def test_a_store_that_ignores_the_etag_deletes_in_the_window(tmp_path: Path) -> None:
    """The documented window, where the store ignores the condition (moto, Ceph RGW 16):
    an object rewritten between the replace's last listing and its delete is deleted."""
    state, _, seen, new = await commit_with_rewrite(tmp_path, "DeleteObjects", OLD, "ignore")
    assert "rewritten" in seen
    objs = state.objects(B, f"{DEST}/")
    assert OLD not in objs and OTHER not in objs and objs[new] == b"new"


async def test_a_store_that_refuses_the_etag_gets_the_delete_again_without_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A store that refuses the ETag element as malformed: one refused request, the batch
    again without ETags (the window open there), one warning line; the replace succeeds."""
    state, store, _, new = await commit_with_rewrite(tmp_path, "DeleteObjects", OLD, "refuse")
    objs = state.objects(B, f"{DEST}/")
    assert OLD not in objs and OTHER not in objs and objs[new] == b"new"
    deletes = [r.error for r in store.log if r.op == "DeleteObjects" and r.key == OLD]
    assert deletes == ["S3Error", None]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "refuses a DeleteObjects with ETags (MalformedXML)" in warned[0]


@pytest.mark.parametrize("mode", ["honour", "ignore"])
async def test_memory_store_conditional_delete(mode: ConditionalDelete) -> None:
    """The store itself: a key with its current ETag goes, one with another ETag stays
    (honour) or goes (ignore), a key without one goes; the count says what went."""
    store = MemoryStore(MemoryState(B), conditional_delete=mode)
    etag = await store.put_object(B, "a", b"a")
    await store.put_object(B, "b", b"b")
    await store.put_object(B, "c", b"c")
    stale = '"0123456789abcdef0123456789abcdef"'
    n = await store.delete_objects(B, ["a", "b", "c"], if_match={"a": etag, "b": stale})
    left = sorted(store.state.objects(B))
    assert (n, left) == ((2, ["b"]) if mode == "honour" else (3, []))


async def test_memory_store_refusing_the_etag_deletes_nothing() -> None:
    store = MemoryStore(MemoryState(B), conditional_delete="refuse")
    etag = await store.put_object(B, "a", b"a")
    with pytest.raises(S3Error, match="MalformedXML"):
        await store.delete_objects(B, ["a"], if_match={"a": etag})
    assert sorted(store.state.objects(B)) == ["a"]
    assert await store.delete_objects(B, ["a"]) == 1


@pytest.mark.parametrize(("mode", "survives"), [("honour", True), ("ignore", False)])
async def test_a_rollback_keeps_a_completed_object_rewritten_after_its_head(
    tmp_path: Path, mode: ConditionalDelete, survives: bool
) -> None:
    """A commit that fails at its second complete rolls back: the first completed file is
    deleted with the ETag its HEAD proved. Rewritten between that HEAD and the delete, a
    store that honours the condition keeps it; one that ignores it deletes it (the same
    window as the replace's)."""
    state = MemoryState(B)
    store = MemoryStore(state, conditional_delete=mode)
    c = MagicCommitter(store, URI, conflict="append", options=CommitOptions(staging_dir=tmp_path))
    job = await c.setup_job()
    summaries = []
    for t in range(2):
        ta = job.task_attempt(t)
        await ta.setup()
        async with ta.open(f"f{t}.csv") as out:
            await out.write(f"file {t}".encode())
        summaries.append(await ta.commit())
    store.fail_at(
        2,
        RetriesExhausted("SlowDown past the budget", code="SlowDown"),
        op="CompleteMultipartUpload",
    )
    writer = MemoryStore(state)
    rewritten: list[str] = []

    async def gate(op: str, bucket: str, key: str) -> Fault | None:
        done = [k for k in state.objects(B, f"{DEST}/") if k.endswith(".csv")]
        if op == "DeleteObjects" and done and not rewritten and key in done:
            rewritten.append(key)
            await writer.put_object(B, key, b"rewritten")
        return None

    store.gate = gate
    with pytest.raises(JobCommitError) as err:
        await job.commit(summaries)
    assert err.value.rolled_back and len(rewritten) == 1
    objs = state.objects(B, f"{DEST}/")
    assert (objs.get(rewritten[0]) == b"rewritten") is survives
