"""Concurrent commits on one destination, interleaved on the in-memory store (issue 20,
findings 4 and 5): the destination's commit lock makes the outcome some serial order.
And a dead holder's lock released by the next job (fenced) or by ``jobs abort``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerorename.committers import (
    CommitOptions,
    ConflictError,
    JobCommitError,
    MagicCommitter,
)
from zerorename.committers.commit.journal import Journal, State
from zerorename.committers.commit.lock import (
    DestinationLocked,
    LockLost,
    LockRecord,
    Verdict,
    judge,
    taken_after_fence,
)
from zerorename.committers.errors import RecordFormatError
from zerorename.testing.memstore import ConditionalDelete, MemoryState, MemoryStore
from zerorename.testing.rounds import rounds

B = "bkt"
DEST = "out"
URI = f"s3://{B}/{DEST}"
LOCK = f"{DEST}/__magic_commit/lock.json"


def options(tmp: Path, **kw: Any) -> CommitOptions:
    return CommitOptions(staging_dir=tmp, progress_interval=0.05, **kw)


async def ready_job(
    store: MemoryStore, tmp: Path, conflict: str, tag: str, n: int, **kw: Any
) -> Any:
    """A magic job with ``n`` committed tasks of one file each; (job, summaries, keys)."""
    c = MagicCommitter(store, URI, conflict=conflict, options=options(tmp, **kw))
    job = await c.setup_job()
    summaries, keys = [], []
    for t in range(n):
        ta = job.task_attempt(t)
        await ta.setup()
        async with ta.open(f"{tag}-{t}.csv") as out:
            await out.write(f"{tag} {t}".encode())
        keys.append(f"{DEST}/{ta.final_rel(f'{tag}-{t}.csv')}")
        summaries.append(await ta.commit())
    return job, summaries, keys


def data(state: MemoryState) -> dict[str, bytes]:
    return {
        k: v
        for k, v in state.objects(B, f"{DEST}/").items()
        if "__magic" not in k and not k.endswith("/_SUCCESS")
    }


async def until(done: Any) -> None:
    """Poll ``done()`` (a state another task changes) every millisecond."""
    while True:
        if done():
            return
        await anyio.sleep(0.001)


def held_at(op: str, key: str, arrived: anyio.Event, go: anyio.Event) -> Any:
    """A store gate: the request ``op`` on ``key`` sets ``arrived`` and waits for ``go``
    (so a test orders two jobs' requests by events, not by latency)."""

    async def gate(o: str, bucket: str, k: str) -> None:
        if (o, k) == (op, key) and not go.is_set():
            arrived.set()
            await go.wait()

    return gate


async def test_replace_never_deletes_part_of_a_commit_running_at_the_same_time(
    tmp_path: Path,
) -> None:
    """Finding 4: append job B is completing (one file at a time) when replace job A
    starts. A's plan must hold all of B's files (B committed first) or none: never part.
    Ordered by store gates: B's second complete waits until A found the lock held (A's
    read of the lock follows only a refused create), so A starts with one of B's six
    files completed, on any machine."""
    state = MemoryState(B)
    setup = MemoryStore(state)
    await setup.put_object(B, f"{DEST}/old.csv", b"old")
    b_job, b_sums, b_keys = await ready_job(setup, tmp_path, "append", "b", 6, concurrency=1)
    a_job, a_sums, a_keys = await ready_job(setup, tmp_path, "replace", "a", 2)
    b_one, a_waits = anyio.Event(), anyio.Event()
    completes = 0

    async def b_gate(op: str, bucket: str, key: str) -> None:
        nonlocal completes
        if op == "CompleteMultipartUpload":
            completes += 1
            if completes == 2:
                b_one.set()
                await a_waits.wait()

    b_store = MemoryStore(state)
    b_store.gate = b_gate
    b_job = await MagicCommitter(b_store, URI, options=options(tmp_path, concurrency=1)).open_job(
        b_job.job_id
    )
    a_store = MemoryStore(state)

    async def a_gate(op: str, bucket: str, key: str) -> None:
        if (op, key) == ("GetObject", LOCK):  # after a refused create: A waits for B
            a_waits.set()

    a_store.gate = a_gate
    a_job = await MagicCommitter(a_store, URI, options=options(tmp_path)).open_job(a_job.job_id)
    results: dict[str, Any] = {}

    async def run_b() -> None:
        results["b"] = await b_job.commit(b_sums)

    async def run_a() -> None:
        await b_one.wait()  # B has completed a file, not all of them
        assert sum(k in state.objects(B) for k in b_keys) == 1
        results["a"] = await a_job.commit(a_sums)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_b)
        tg.start_soon(run_a)
    left = [k for k in b_keys if k in state.objects(B)]
    # A ordered after B (B committed before A's plan): all of B's files replaced
    assert left == [], f"{len(left)} of B's {len(b_keys)} files survived A's replace"
    assert data(state) == {k: state.objects(B)[k] for k in a_keys}
    assert LOCK not in state.objects(B)
    assert results["b"].files == 6 and results["a"].files == 2


async def test_two_fail_mode_commits_to_an_empty_destination_at_most_one_succeeds(
    tmp_path: Path,
) -> None:
    """Finding 5: both commits start together, each pre-check would run before the
    other's completes; one succeeds, the other refuses and leaves nothing. The two run in
    lockstep (virtual rounds: each request takes one round), so they meet on any machine."""
    state = MemoryState(B)
    setup = MemoryStore(state)
    j1, s1, k1 = await ready_job(setup, tmp_path, "fail", "one", 3)
    j2, s2, k2 = await ready_job(setup, tmp_path, "fail", "two", 3)
    outcome: dict[str, BaseException | None] = {}
    stores = [MemoryStore(state), MemoryStore(state)]

    async def run(store: MemoryStore, job_id: str, sums: Any, name: str) -> None:
        c = MagicCommitter(store, URI, conflict="fail", options=options(tmp_path))
        job = await c.open_job(job_id)
        try:
            await job.commit(sums)
            outcome[name] = None
        except ConflictError as exc:
            outcome[name] = exc

    async with rounds(*stores), anyio.create_task_group() as tg:
        tg.start_soon(run, stores[0], j1.job_id, s1, "one")
        tg.start_soon(run, stores[1], j2.job_id, s2, "two")
    # both tried the lock in the same round (neither listed before the other's commit)
    tries = [next(r.start for r in s.log if r.op == "PutObject" and r.key == LOCK) for s in stores]
    assert tries[0] == tries[1]
    winners = [n for n, e in outcome.items() if e is None]
    assert len(winners) == 1, outcome
    (loser,) = [e for e in outcome.values() if e is not None]
    assert isinstance(loser, ConflictError) and loser.rolled_back and "\n" not in str(loser)
    won = k1 if winners == ["one"] else k2
    assert sorted(data(state)) == sorted(won)
    lost = j2 if winners == ["one"] else j1
    assert not [k for k in state.objects(B) if lost.job_id in k]
    assert not [k for k, _ in state.pending(B) if lost.job_id in k]
    assert LOCK not in state.objects(B)


async def test_a_dead_holder_without_journal_is_fenced_by_the_next_job(tmp_path: Path) -> None:
    """Job H dies right after taking the lock (before its journal): the next job K finds it
    stale (lock_stale_after 0 here), fences H off (a tombstone journal) and commits; H can
    never complete anything after that, and ``abort`` removes it, lock untouched."""
    state = MemoryState(B)
    setup = MemoryStore(state)
    h, hs, _ = await ready_job(setup, tmp_path, "fail", "h", 2)
    k, ks, kk = await ready_job(setup, tmp_path, "append", "k", 2)
    dying = MemoryStore(state)
    dying.crash_at(1, op="PutObject", after=True)  # the lock, taken; then dead
    hc = MagicCommitter(dying, URI, conflict="fail", options=options(tmp_path))
    with pytest.raises(BaseException) as died:
        await (await hc.open_job(h.job_id)).commit(hs)
    assert "crashed" in repr(died.value) and LOCK in state.objects(B)
    assert json.loads(state.objects(B)[LOCK])["jobId"] == h.job_id
    kc = MagicCommitter(MemoryStore(state), URI, options=options(tmp_path, lock_stale_after=0))
    await (await kc.open_job(k.job_id)).commit(ks)
    assert sorted(data(state)) == sorted(kk) and LOCK not in state.objects(B)
    tomb = json.loads(state.objects(B)[f"{DEST}/__magic_job-{h.job_id}/journal.json"])
    assert tomb["fenced_by"] == k.job_id and tomb["state"] == "rolling_back"
    # H's driver comes back: its commit is refused as fenced off (LockLost; it was
    # JournalError "already started a commit", which H never did), abort removes all of it
    again = MagicCommitter(MemoryStore(state), URI, conflict="fail", options=options(tmp_path))
    hj = await again.open_job(h.job_id)
    with pytest.raises(LockLost, match=f"job {k.job_id} released its lock"):
        await hj.commit(hs)
    await hj.abort()
    assert not [x for x in state.objects(B) if h.job_id in x]
    assert not [x for x, _ in state.pending(B) if h.job_id in x]
    assert sorted(data(state)) == sorted(kk)


async def fenced_while_committing(tmp: Path, op: str) -> tuple[Any, MemoryState, Any, Any]:
    """Replace job H takes the lock (round 1) and its request ``op`` on its journal (the
    first journal write, or round 1's read) is held until append job K, whose
    lock_stale_after is 0, has fenced H off (a tombstone journal), released H's lock and
    committed; (what H's commit raised, the state, H's store, K's keys)."""
    state = MemoryState(B)
    setup = MemoryStore(state)
    h, hs, _ = await ready_job(setup, tmp, "replace", "h", 2)
    k, ks, kk = await ready_job(setup, tmp, "append", "k", 2)
    at_journal, k_done = anyio.Event(), anyio.Event()
    h_store = MemoryStore(state)
    h_store.gate = held_at(op, f"{DEST}/__magic_job-{h.job_id}/journal.json", at_journal, k_done)
    hc = MagicCommitter(h_store, URI, conflict="replace", options=options(tmp))
    hj = await hc.open_job(h.job_id)
    kc = MagicCommitter(MemoryStore(state), URI, options=options(tmp, lock_stale_after=0))
    kj = await kc.open_job(k.job_id)
    caught: list[BaseException] = []

    async def run_h() -> None:
        try:
            await hj.commit(hs)
        except Exception as exc:
            caught.append(exc)

    async def run_k() -> None:
        await at_journal.wait()  # H's request waits at its gate...
        await until(lambda: LOCK in state.objects(B))  # ...and H's lock is taken
        assert json.loads(state.objects(B)[LOCK])["jobId"] == h.job_id
        try:
            await kj.commit(ks)
        finally:
            k_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_h)
        tg.start_soon(run_k)
    (err,) = caught
    return err, state, h_store, (h, kk)


@pytest.mark.parametrize("op", ["PutObject", "GetObject"])
async def test_a_live_holder_fenced_off_completes_nothing(tmp_path: Path, op: str) -> None:
    """The holder that is only slow (it holds the lock past lock_stale_after with no
    journal) re-checks before it acts, and fails with LockLost having completed nothing;
    the fencing job commits. PutObject: the fence lands before H's first journal write
    (If-None-Match finds the tombstone); GetObject: before H's round-1 read of its journal
    completes, which found the tombstone and raised JournalError "already started a
    commit; use resume() or abort()" (a fresh commit's refusal that is not true), as one
    loaded run did when this test ordered the jobs by the store's latency."""
    err, state, h_store, (h, kk) = await fenced_while_committing(tmp_path, op)
    lost = err if isinstance(err, LockLost) else err.__cause__
    assert isinstance(lost, LockLost), repr(err)
    msg = str(err)
    assert "\n" not in msg and f"zerorename jobs abort {URI} {h.job_id}" in msg
    assert not [r for r in h_store.log if r.op == "CompleteMultipartUpload"]
    assert sorted(data(state)) == sorted(kk) and LOCK not in state.objects(B)
    assert not [x for x in state.objects(B) if h.job_id in x and "__magic" not in x]
    if not (isinstance(err, JobCommitError) and err.rolled_back):  # else nothing is left
        hc = MagicCommitter(MemoryStore(state), URI, conflict="replace", options=options(tmp_path))
        await (await hc.open_job(h.job_id)).abort()
    assert not [x for x in state.objects(B) if h.job_id in x]
    assert sorted(data(state)) == sorted(kk)


async def fenced_h(tmp: Path) -> tuple[MemoryState, Any, Any, Any]:
    """H died holding the lock (no journal); K (lock_stale_after 0) fenced it off (a
    tombstone naming the fenced record) and committed; (state, H, H's summaries, K's
    keys)."""
    state = MemoryState(B)
    setup = MemoryStore(state)
    h, hs, _ = await ready_job(setup, tmp, "fail", "h", 1)
    k, ks, kk = await ready_job(setup, tmp, "append", "k", 1)
    await setup.put_object(B, LOCK, LockRecord(h.job_id).to_json())  # H died holding it
    kc = MagicCommitter(MemoryStore(state), URI, options=options(tmp, lock_stale_after=0))
    await (await kc.open_job(k.job_id)).commit(ks)  # K fences H off
    assert LOCK not in state.objects(B)
    return state, h, hs, kk


async def test_a_fenced_jobs_retried_commit_leaves_the_destination_unlocked(
    tmp_path: Path,
) -> None:
    """H was fenced off (a tombstone journal) and its lock released; H's commit run again
    takes the free lock in round 1 and is refused (LockLost). It releases the lock it
    took (the stored record is the one it wrote, the tombstone fenced another): it used
    to leave it naming H, so every other commit waited lock_wait and refused until the
    lock was lock_stale_after old. ``jobs abort`` of H then leaves nothing of H."""
    state, h, hs, kk = await fenced_h(tmp_path)
    h_store = MemoryStore(state)
    again = MagicCommitter(h_store, URI, conflict="fail", options=options(tmp_path))
    hj = await again.open_job(h.job_id)
    with pytest.raises(LockLost):
        await hj.commit(hs)
    assert LOCK not in state.objects(B)
    assert [r for r in h_store.log if r.op == "PutObject" and r.key == LOCK]  # it took it
    # another job commits at once (lock_wait 0: it never waits)
    state2 = MemoryStore(state)
    j, js, jk = await ready_job(state2, tmp_path, "append", "j", 1, lock_wait=0.0)
    await j.commit(js)
    await hj.abort()
    assert LOCK not in state.objects(B)
    assert not [x for x in state.objects(B) if h.job_id in x]
    assert sorted(data(state)) == sorted(kk + jk)


@pytest.mark.parametrize("mode", ["honour", "ignore", "refuse"])
async def test_abort_releases_a_lock_the_fenced_job_took_again(
    tmp_path: Path, mode: ConditionalDelete
) -> None:
    """H's retried commit dies right after taking the lock (before its refusal could
    release it): the lock names H, H's journal is K's tombstone. ``jobs abort`` of H
    releases it (it used to stay until lock_stale_after, every commit refused), on a
    store that honours, ignores or refuses a conditional delete."""
    state, h, hs, kk = await fenced_h(tmp_path)
    await dies_holding_the_lock(state, tmp_path, h.job_id, hs)
    assert json.loads(state.objects(B)[LOCK])["jobId"] == h.job_id
    store = MemoryStore(state, conditional_delete=mode)
    again = MagicCommitter(store, URI, conflict="fail", options=options(tmp_path))
    await (await again.open_job(h.job_id)).abort()
    assert LOCK not in state.objects(B)
    assert not [x for x in state.objects(B) if h.job_id in x]
    assert sorted(data(state)) == sorted(kk)


async def dies_holding_the_lock(state: MemoryState, tmp: Path, job_id: str, sums: Any) -> None:
    """Job ``job_id``'s commit dies right after its lock create took effect."""
    dying = MemoryStore(state)
    dying.crash_at(1, op="PutObject", after=True)  # the lock, taken; then dead
    hc = MagicCommitter(dying, URI, conflict="fail", options=options(tmp))
    with pytest.raises(BaseException) as died:
        await (await hc.open_job(job_id)).commit(sums)
    assert "crashed" in repr(died.value)


def swap_lock_at_delete(store: MemoryStore, state: MemoryState, other: LockRecord) -> Any:
    """A store gate: when ``store`` sends the DeleteObjects of the lock (the release,
    after its read), the lock is first replaced by ``other``'s (a concurrent job took it
    between the release's read and its delete)."""

    async def gate(op: str, bucket: str, key: str) -> None:
        if (op, key) == ("DeleteObjects", LOCK) and LOCK in state.objects(B):
            mem = MemoryStore(state)
            await mem.delete_objects(B, [LOCK])
            await mem.put_object(B, LOCK, other.to_json(), if_none_match=True)

    return gate


@pytest.mark.parametrize("who", ["refused commit", "abort"])
async def test_a_lock_another_job_took_between_read_and_delete_is_kept(
    tmp_path: Path, who: str
) -> None:
    """The race the release guards: between its read of the lock (H's record) and its
    delete, the lock becomes job J's. The delete carries the ETag of the record it read
    (If-Match): a store that honours it keeps J's lock."""
    state, h, hs, _ = await fenced_h(tmp_path)
    other = LockRecord("33333333-3333-4333-8333-333333333333")
    store = MemoryStore(state, conditional_delete="honour")
    hc = MagicCommitter(store, URI, conflict="fail", options=options(tmp_path))
    hj = await hc.open_job(h.job_id)
    if who == "abort":
        await dies_holding_the_lock(state, tmp_path, h.job_id, hs)
        store.gate = swap_lock_at_delete(store, state, other)
        await hj.abort()
    else:
        store.gate = swap_lock_at_delete(store, state, other)
        with pytest.raises(LockLost):
            await hj.commit(hs)
    assert LockRecord.from_json(state.objects(B)[LOCK]) == other
    # the release read H's record and sent its delete (the swap came in between)
    assert [r for r in store.log if (r.op, r.key) == ("DeleteObjects", LOCK)]


@pytest.mark.parametrize("conflict", ["fail", "append"])
async def test_a_job_refused_mid_fence_leaves_the_record_to_its_fencer(
    tmp_path: Path, conflict: str
) -> None:
    """H took the lock (record W) and K fences W: K's tombstone names W. H, refused at its
    first journal write (LockLost) after K's tombstone and before K's delete of W, must
    leave W to K (two deletes of one lock let a third job's lock, taken between them, be
    deleted by the later one). Ordered by gates: H's journal write waits for K's
    tombstone, K's delete of the lock waits for H's commit to end."""
    state = MemoryState(B)
    setup = MemoryStore(state)
    h, hs, _ = await ready_job(setup, tmp_path, conflict, "h", 1)
    k, ks, kk = await ready_job(setup, tmp_path, "append", "k", 1)
    journal = f"{DEST}/__magic_job-{h.job_id}/journal.json"
    tombed, h_done = anyio.Event(), anyio.Event()
    seen: list[bytes | None] = []

    async def h_gate(op: str, bucket: str, key: str) -> None:
        if (op, key) == ("PutObject", journal):
            await tombed.wait()

    async def k_gate(op: str, bucket: str, key: str) -> None:
        if (op, key) == ("GetObject", LOCK) and journal in state.objects(B):
            tombed.set()  # K's re-read of the lock after its tombstone
        if (op, key) == ("DeleteObjects", LOCK) and not h_done.is_set():
            await h_done.wait()
            seen.append(state.objects(B).get(LOCK))

    h_store = MemoryStore(state)
    h_store.gate = h_gate
    k_store = MemoryStore(state)
    k_store.gate = k_gate
    hj = await MagicCommitter(h_store, URI, conflict=conflict, options=options(tmp_path)).open_job(
        h.job_id
    )
    kj = await MagicCommitter(k_store, URI, options=options(tmp_path, lock_stale_after=0)).open_job(
        k.job_id
    )
    caught: list[BaseException] = []

    async def run_h() -> None:
        try:
            await hj.commit(hs)
        except Exception as exc:
            caught.append(exc)
        finally:
            h_done.set()

    async def run_k() -> None:
        await until(lambda: LOCK in state.objects(B))  # H holds it
        await kj.commit(ks)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_h)
        tg.start_soon(run_k)
    (err,) = caught
    assert isinstance(err if isinstance(err, LockLost) else err.__cause__, LockLost), repr(err)
    (w,) = seen  # the record K fenced was still there when K deleted it
    assert w is not None and LockRecord.from_json(w).job_id == h.job_id
    assert LOCK not in state.objects(B) and sorted(data(state)) == sorted(kk)


def test_taken_after_fence() -> None:
    me, k = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
    fenced = LockRecord(me, 100.0, "h")
    again = LockRecord(me, 200.0, "h")
    tomb = Journal(me, State.ROLLING_BACK, fenced_by=k, fenced_lock=100.0)
    assert taken_after_fence(tomb, again, me)
    assert not taken_after_fence(tomb, fenced, me)  # the fencer deletes that one
    assert not taken_after_fence(tomb, LockRecord(k, 200.0), me)  # not ours
    assert not taken_after_fence(tomb, None, me)
    assert not taken_after_fence(None, again, me)
    old = Journal(me, State.ROLLING_BACK, fenced_by=k)  # an older tombstone: no proof
    assert not taken_after_fence(old, again, me)
    own = Journal(me, State.ROLLING_BACK, fenced_by=me, fenced_lock=100.0)
    assert not taken_after_fence(own, again, me)
    assert not taken_after_fence(Journal(me), again, me)  # a live journal
    assert Journal.from_json(tomb.to_json()) == tomb
    assert b"fenced_lock" not in Journal(me).to_json()


async def crashed_mid_commit(state: MemoryState, tmp: Path) -> tuple[Any, Any, Any]:
    """Job H dies after its first complete (journal 'completing', lock held) and job K is
    ready to commit; (H's id, K's job on a fresh store, K's summaries)."""
    setup = MemoryStore(state)
    h, hs, _ = await ready_job(setup, tmp, "append", "h", 3)
    k, ks, kk = await ready_job(setup, tmp, "replace", "k", 1)
    dying = MemoryStore(state)
    dying.crash_at(1, op="CompleteMultipartUpload", after=True)
    hc = MagicCommitter(dying, URI, options=options(tmp, rollback_on_failure=False))
    with pytest.raises(BaseExceptionGroup):  # the crash, in the commit's task group
        await (await hc.open_job(h.job_id)).commit(hs)
    assert json.loads(state.objects(B)[LOCK])["jobId"] == h.job_id
    return h.job_id, (k, ks, kk), hs


@pytest.mark.parametrize("release", ["abort", "resume"])
async def test_a_dead_holder_with_a_journal_blocks_until_abort_or_resume(
    release: str, tmp_path: Path
) -> None:
    """A holder whose journal says it is committing is never fenced: the next job waits
    (lock_wait), then refuses in one line with nothing changed, naming the holder and
    ``jobs resume|abort``; abort (or resume) of the holder releases the lock."""
    state = MemoryState(B)
    h_id, (k, ks, kk), _ = await crashed_mid_commit(state, tmp_path)
    before = state.copy()
    opts = options(tmp_path, lock_wait=0.2, lock_stale_after=0)
    kc = MagicCommitter(MemoryStore(state), URI, conflict="replace", options=opts)
    kj = await kc.open_job(k.job_id)
    with pytest.raises(DestinationLocked) as refused:
        await kj.commit(ks)
    msg = str(refused.value)
    assert h_id in msg and f"zerorename jobs resume|abort {URI} {h_id}" in msg
    assert "\n" not in msg
    assert state.objects(B) == before.objects(B) and state.pending(B) == before.pending(B)
    hc = MagicCommitter(MemoryStore(state), URI, options=options(tmp_path))
    hj = await hc.open_job(h_id)
    await (hj.abort() if release == "abort" else hj.resume())
    assert LOCK not in state.objects(B)
    await kj.commit(ks)  # the same job commits once the lock is free
    assert sorted(data(state)) == sorted(kk) and LOCK not in state.objects(B)


async def test_resume_waits_for_the_lock_another_commit_holds(tmp_path: Path) -> None:
    """A commit that waited with its journal (append, lock held elsewhere) and died there
    resumes only once it holds the lock."""
    state = MemoryState(B)
    setup = MemoryStore(state)
    other = LockRecord("11111111-1111-4111-8111-111111111111")
    await setup.put_object(B, LOCK, other.to_json())
    await setup.put_object(B, f"{DEST}/__magic_job-{other.job_id}/journal.json", b"{}")
    h, hs, hk = await ready_job(setup, tmp_path, "append", "h", 2)
    hc = MagicCommitter(MemoryStore(state), URI, options=options(tmp_path, lock_wait=0.1))
    with pytest.raises(DestinationLocked):
        await (await hc.open_job(h.job_id)).commit(hs)
    # nothing of the commit is left (its journal removed): commit again later
    assert f"{DEST}/__magic_job-{h.job_id}/journal.json" not in state.objects(B)
    assert not [k for k in hk if k in state.objects(B)]
    await setup.delete_objects(B, [LOCK])
    await (await hc.open_job(h.job_id)).commit(hs)
    assert sorted(data(state)) == sorted(hk)


def test_judge() -> None:
    me, other = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
    held = LockRecord(other, 100.0, "h")
    assert judge(LockRecord(me, 0.0), me, False, 1e9, 10) is Verdict.OURS
    assert judge(held, me, True, 1e9, 10) is Verdict.WAIT  # a journal: never fenced
    assert judge(held, me, False, 105.0, 10) is Verdict.WAIT
    assert judge(held, me, False, 110.0, 10) is Verdict.FENCE


@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_lock_record_parses_or_refuses(data: bytes) -> None:
    try:
        rec = LockRecord.from_json(data)
    except RecordFormatError:
        return
    assert LockRecord.from_json(rec.to_json()) == rec


def test_lock_record_round_trips() -> None:
    rec = LockRecord("11111111-1111-4111-8111-111111111111", 5.0, "host ü")
    assert LockRecord.from_json(rec.to_json()) == rec
    with pytest.raises(RecordFormatError):
        LockRecord.from_json(rec.to_json().replace(b"11111111-", b"1111111x-"))


@pytest.mark.parametrize("conflict", ["append", "fail", "replace"])
async def test_an_oversized_lock_is_refused_as_a_bad_record_with_nothing_changed(
    tmp_path: Path, conflict: str
) -> None:
    # a lock.json past its cap is a bad record like one that does not parse: the commit
    # refuses in one line and completes nothing (it took the read for an I/O failure and
    # rolled back, and the rollback, reading the lock again, failed too)
    state = MemoryState(B)
    store = MemoryStore(state)
    await store.put_object(B, LOCK, b"{" + b" " * (300 * 1024) + b"}")
    job, summaries, _ = await ready_job(store, tmp_path, conflict, "a", 2, lock_wait=0.0)
    with pytest.raises(JobCommitError) as refused:
        await job.commit(summaries)
    msg = str(refused.value)
    assert "\n" not in msg and "refused: a record is bad" in msg and "lock.json" in msg
    assert "larger than" in msg and data(state) == {}


async def test_a_fenced_jobs_retried_commit_crashing_at_any_request_then_abort(
    tmp_path: Path,
) -> None:
    """H's retried commit (fenced off) dies before or after any of its requests; then
    ``jobs abort`` of H: the lock is free, nothing of H is left, K's files are intact, and
    another job commits without waiting."""
    ready, h, hs, kk = await fenced_h(tmp_path)
    clean = MemoryStore(ready.copy())
    with pytest.raises(LockLost):
        await (
            await MagicCommitter(clean, URI, conflict="fail", options=options(tmp_path)).open_job(
                h.job_id
            )
        ).commit(hs)
    for n in range(1, clean.requests + 1):
        for after in (False, True):
            state = ready.copy()
            dying = MemoryStore(state)
            dying.crash_at(n, after=after)
            hc = MagicCommitter(dying, URI, conflict="fail", options=options(tmp_path))
            with pytest.raises(BaseException):  # noqa: B017 - the crash, or LockLost
                await (await hc.open_job(h.job_id)).commit(hs)
            again = MagicCommitter(MemoryStore(state), URI, options=options(tmp_path))
            await (await again.open_job(h.job_id)).abort()
            where = (n, after)
            assert LOCK not in state.objects(B), where
            assert not [x for x in state.objects(B) if h.job_id in x], where
            assert not [x for x, _ in state.pending(B) if h.job_id in x], where
            assert sorted(data(state)) == sorted(kk), where
            j, js, jk = await ready_job(
                MemoryStore(state), tmp_path, "append", "j", 1, lock_wait=0.0
            )
            await j.commit(js)
            assert sorted(data(state)) == sorted(kk + jk), where
