"""Attacks on the fenced lock's release (branch fence): a fenced job H (its journal is
job K's tombstone naming the record K fenced) whose commit runs again, or that is
aborted, in any order, racing other jobs, crashing, on a store that drips or lies.
The invariant: no job deletes a lock record another job holds, nothing committed is
lost, no destination stays locked forever. A confirmed defect is a strict xfail whose
reason names the interleaving; an attack that holds is a regression test."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from unit.committers.commit.test_commit_lock_memory import (
    DEST,
    LOCK,
    URI,
    B,
    data,
    dies_holding_the_lock,
    fenced_h,
    options,
    ready_job,
)
from zerorename.aio import to_the_end
from zerorename.committers import ConflictError, MagicCommitter
from zerorename.committers.commit.journal import Journal
from zerorename.committers.commit.lock import DestinationLocked, LockLost, LockRecord
from zerorename.committers.errors import JobNotFound
from zerorename.engine.errors import S3Error
from zerorename.portal import LoopPortal
from zerorename.testing.memfaults import AnswerLost, Fault
from zerorename.testing.memstore import ConditionalDelete, MemoryState, MemoryStore

OTHER = LockRecord("33333333-3333-4333-8333-333333333333")


def journal_of(job_id: str) -> str:
    return f"{DEST}/__magic_job-{job_id}/journal.json"


def lock_now(state: MemoryState) -> LockRecord | None:
    raw = state.objects(B).get(LOCK)
    return None if raw is None else LockRecord.from_json(raw)


async def h_job(state: MemoryState, tmp: Path, h: Any, **kw: Any) -> Any:
    store = MemoryStore(state, **kw)
    c = MagicCommitter(store, URI, conflict="fail", options=options(tmp))
    return store, await c.open_job(h.job_id)


async def clean_end(state: MemoryState, tmp: Path, h: Any, kept: list[str]) -> None:
    """Nothing of H, the lock free, the committed files intact, and another job commits
    at once (lock_wait 0)."""
    assert LOCK not in state.objects(B), lock_now(state)
    assert not [x for x in state.objects(B) if h.job_id in x]
    assert not [x for x, _ in state.pending(B) if h.job_id in x]
    assert sorted(data(state)) == sorted(kept)
    j, js, jk = await ready_job(MemoryStore(state), tmp, "append", "j", 1, lock_wait=0.0)
    await j.commit(js)
    assert sorted(data(state)) == sorted(kept + jk)


# -- (a) a careless operator -----------------------------------------------------------
def abort_at(n: int, state: MemoryState, tmp: Path, h: Any) -> tuple[Any, list[str]]:
    """A gate: before the ``n``-th request of the store it is set on, ``jobs abort`` of H
    runs whole (the careless operator, while H's commit runs)."""
    count, outcome = 0, []

    async def gate(op: str, bucket: str, key: str) -> None:
        nonlocal count
        count += 1
        if count == n:
            try:
                _, other = await h_job(state, tmp, h)
                await other.abort()
                outcome.append("aborted")
            except JobNotFound:
                outcome.append("gone")

    return gate, outcome


async def test_an_abort_between_any_two_requests_of_the_retried_commit(
    tmp_path: Path,
) -> None:
    """``jobs abort`` of the fenced H runs whole before each request of H's retried
    commit in turn (no command claim keeps an abort from a commit). H completes nothing
    (the abort removed its marker and uploads: a commit that found the tombstone gone
    is refused as not active), the lock never names another job, and after one more
    abort nothing of H is left, K's files intact, the next job commits at once."""
    ready, h, hs, kk = await fenced_h(tmp_path)
    probe_state = ready.copy()
    probe, hj = await h_job(probe_state, tmp_path, h)
    opened = probe.requests
    with pytest.raises(LockLost):
        await hj.commit(hs)
    for n in range(1, probe.requests - opened + 1):
        state = ready.copy()
        store, hj = await h_job(state, tmp_path, h)
        store.gate, outcome = abort_at(n, state, tmp_path, h)
        with pytest.raises(Exception) as refused:
            await hj.commit(hs)
        where = (n, outcome, refused.value)
        assert outcome == ["aborted"], where
        assert "\n" not in str(refused.value), where
        holder = lock_now(state)
        assert holder is None or holder.job_id == h.job_id, where
        with contextlib.suppress(JobNotFound):
            _, again = await h_job(state, tmp_path, h)
            await again.abort()
        await clean_end(state, tmp_path, h, kk)


async def test_careless_orders_of_commit_abort_resume_end_clean(tmp_path: Path) -> None:
    """On the fenced H: every order of up to three of (retried commit, abort, resume),
    each step's refusal tolerated, then one more abort: the lock is free, nothing of H
    is left, K's files are intact, another job commits without waiting."""
    ready, h, hs, kk = await fenced_h(tmp_path)
    steps = ("commit", "abort", "resume")
    for n in (1, 2, 3):
        for order in itertools.product(steps, repeat=n):
            state = ready.copy()
            for step in order:
                try:
                    _, hj = await h_job(state, tmp_path, h)
                    if step == "commit":
                        await hj.commit(hs)
                    elif step == "abort":
                        await hj.abort()
                    else:
                        await hj.resume()
                except Exception as exc:  # a refusal (or JobNotFound: gone) is one line
                    assert "\n" not in str(exc), (order, exc)
                holder = lock_now(state)
                # never a lock naming another job than H
                assert holder is None or holder.job_id == h.job_id, (order, holder)
            with contextlib.suppress(JobNotFound):  # an abort already left nothing
                _, hj = await h_job(state, tmp_path, h)
                await hj.abort()
            await clean_end(state, tmp_path, h, kk)


# -- (b) a concurrent job ----------------------------------------------------------------
def abort_and_take_at_delete(state: MemoryState, tmp: Path, h: Any) -> Any:
    """A gate for H's retried commit: when its release sends the DeleteObjects of the lock
    (after its HEAD and read found r2), ``jobs abort H`` runs whole (it deletes r2 and
    the tombstone) and job OTHER takes the free lock."""
    done: list[bool] = []

    async def gate(op: str, bucket: str, key: str) -> None:
        if (op, key) == ("DeleteObjects", LOCK) and not done:
            done.append(True)
            _, other = await h_job(state, tmp, h)
            await other.abort()
            assert LOCK not in state.objects(B)
            await MemoryStore(state).put_object(B, LOCK, OTHER.to_json(), if_none_match=True)

    return gate


@pytest.mark.parametrize(
    "mode",
    [
        "honour",
        pytest.param(
            "ignore",
            marks=pytest.mark.xfail(
                strict=True,
                reason="delete_lock relies on If-Match once the abort removed the tombstone: "
                "H's refused commit HEADs and reads its r2, then `jobs abort H` deletes r2 and "
                "the tombstone and job J takes the lock; H's DeleteObjects(If-Match r2's ETag) "
                "on a store that ignores If-Match (moto, Ceph RGW 16) deletes J's lock: the "
                "store holds no lock.json while J commits",
            ),
        ),
        # a HEAD before the unconditional fallback sees J's lock (was an xfail: the fallback
        # resent blindly); a store that ignores If-Match keeps the HEAD-to-delete window
        "refuse",
    ],
)
async def test_a_refused_commits_release_racing_an_abort_keeps_the_next_jobs_lock(
    tmp_path: Path, mode: ConditionalDelete
) -> None:
    state, h, hs, _ = await fenced_h(tmp_path)
    h_store, hj = await h_job(state, tmp_path, h, conditional_delete=mode)
    h_store.gate = abort_and_take_at_delete(state, tmp_path, h)
    with pytest.raises(LockLost):
        await hj.commit(hs)
    assert [r for r in h_store.log if (r.op, r.key) == ("DeleteObjects", LOCK)]
    assert lock_now(state) == OTHER


async def test_an_old_tombstone_without_fenced_lock_releases_nothing_and_locks_not_forever(
    tmp_path: Path,
) -> None:
    """K was an older zerorename: its tombstone names no fenced record. H's retried commit
    takes the free lock, is refused and leaves it (no proof it is not the fenced one);
    jobs abort of H leaves it too. The next job waits (DestinationLocked), then, once the
    lock is lock_stale_after old, fences H again and commits; a second abort of H leaves
    nothing of H."""
    state, h, hs, kk = await fenced_h(tmp_path)
    journal = journal_of(h.job_id)
    old = Journal.from_json(state.objects(B)[journal])
    old.fenced_lock = None
    await MemoryStore(state).put_object(B, journal, old.to_json())
    assert b"fenced_lock" not in state.objects(B)[journal]
    _, hj = await h_job(state, tmp_path, h)
    with pytest.raises(LockLost):
        await hj.commit(hs)
    held = lock_now(state)
    assert held is not None and held.job_id == h.job_id  # kept
    _, hj = await h_job(state, tmp_path, h)
    await hj.abort()
    assert lock_now(state) == held  # still kept: the abort proves nothing either
    j, js, jk = await ready_job(MemoryStore(state), tmp_path, "append", "j", 1, lock_wait=0.0)
    with pytest.raises(DestinationLocked):
        await j.commit(js)
    jc = MagicCommitter(
        MemoryStore(state), URI, options=options(tmp_path, lock_stale_after=0, lock_wait=0.0)
    )
    await (await jc.open_job(j.job_id)).commit(js)  # fences H's lock (no journal now)
    tomb = json.loads(state.objects(B)[journal])
    assert tomb["fenced_by"] == j.job_id and tomb["fenced_lock"] == held.acquired
    _, hj = await h_job(state, tmp_path, h)
    await hj.abort()
    assert LOCK not in state.objects(B)
    assert not [x for x in state.objects(B) if h.job_id in x]
    assert sorted(data(state)) == sorted(kk + jk)


async def test_a_fenced_job_dead_holding_its_retaken_lock_blocks_until_its_abort(
    tmp_path: Path,
) -> None:
    """H's retried commit dies right after taking the free lock (r2): its journal is K's
    tombstone, which counts as a journal, so no other job ever fences r2 (not even with
    lock_stale_after 0): the next job is refused in one line naming H and the command
    that frees it; ``jobs abort`` of H does."""
    state, h, hs, kk = await fenced_h(tmp_path)
    await dies_holding_the_lock(state, tmp_path, h.job_id, hs)
    j, js, jk = await ready_job(MemoryStore(state), tmp_path, "append", "j", 1)
    jc = MagicCommitter(
        MemoryStore(state), URI, options=options(tmp_path, lock_stale_after=0, lock_wait=0.0)
    )
    with pytest.raises(DestinationLocked) as refused:
        await (await jc.open_job(j.job_id)).commit(js)
    msg = str(refused.value)
    assert "\n" not in msg and h.job_id in msg and "jobs resume|abort" in msg
    assert json.loads(state.objects(B)[LOCK])["jobId"] == h.job_id
    _, hj = await h_job(state, tmp_path, h)
    await hj.abort()
    await (await jc.open_job(j.job_id)).commit(js)
    assert LOCK not in state.objects(B)
    assert sorted(data(state)) == sorted(kk + jk)


# -- (c) a crash or an error at every request ------------------------------------------
def faults() -> list[tuple[str, bool]]:
    return [(kind, after) for kind in ("crash", "500") for after in (False, True)]


def arm(store: MemoryStore, n: int, kind: str, after: bool) -> None:
    if kind == "crash":
        store.crash_at(n, after=after)
    else:
        err = S3Error("InternalError 500", code="InternalError", status=500)
        store.fail_at(n, err, after=after)


@pytest.mark.parametrize("who", ["abort", "refused commit"])
async def test_a_fault_at_every_request_of_the_release_then_abort_ends_clean(
    tmp_path: Path, who: str
) -> None:
    """H holds r2 after K's fence. Its release (``jobs abort``, or its refused commit run
    again) dies or gets a 500 (before it took effect, or with its answer lost) at each of
    its requests; then ``jobs abort`` again (twice if need be): the lock is free, nothing
    of H left, K's files intact, the next job commits at once. The lock is never one
    naming another job."""
    ready, h, hs, kk = await fenced_h(tmp_path)
    if who == "abort":
        await dies_holding_the_lock(ready, tmp_path, h.job_id, hs)
    probe_state = ready.copy()
    probe, hj = await h_job(probe_state, tmp_path, h)
    opened = probe.requests  # open_job's, before the release
    with contextlib.suppress(LockLost):
        await (hj.abort() if who == "abort" else hj.commit(hs))
    assert LOCK not in probe_state.objects(B)
    for n in range(1, probe.requests - opened + 1):
        for kind, after in faults():
            where = (n, kind, after)
            state = ready.copy()
            store, hj = await h_job(state, tmp_path, h)
            arm(store, n, kind, after)
            with contextlib.suppress(BaseException):
                await (hj.abort() if who == "abort" else hj.commit(hs))
            holder = lock_now(state)
            assert holder is None or holder.job_id == h.job_id, where
            with contextlib.suppress(JobNotFound):
                _, again = await h_job(state, tmp_path, h)
                await again.abort()
            try:
                await clean_end(state, tmp_path, h, kk)
            except AssertionError as exc:
                raise AssertionError(f"{where}: {exc}") from exc


# -- (d) a store that drips: a delete's answer lost and the engine sends it again ------
def resent_with_a_taker(state: MemoryState, nth: int, seen: list[LockRecord | None]) -> Any:
    """A gate for the releasing job's store: its ``nth`` DeleteObjects of the lock takes
    effect and its answer is lost, so the store resends it as the engine's retrier does
    (the caller's recheck first: ``MemoryStore.lose_answer_at``). Job OTHER takes the
    free lock before the next request (the recheck's HEAD, or a blind resend). ``seen``
    gets the lock as the first request after that exchange finds it."""
    count = 0
    phase = 0  # 1: the answer is lost; 2: OTHER took the lock

    async def gate(op: str, bucket: str, key: str) -> Fault | None:
        nonlocal count, phase
        if phase == 1 and LOCK not in state.objects(B):  # once the first send took effect
            phase = 2  # (a request sent alongside may come first)
            await MemoryStore(state).put_object(B, LOCK, OTHER.to_json(), if_none_match=True)
        elif phase == 2 and (op, key) not in (("HeadObject", LOCK), ("DeleteObjects", LOCK)):
            if not seen:
                seen.append(lock_now(state))
        elif phase == 0 and (op, key) == ("DeleteObjects", LOCK):
            count += 1
            if count == nth:
                phase = 1
                return Fault(1, None, True, AnswerLost("the answer was lost"))
        return None

    return gate


MODES: list[ConditionalDelete] = ["honour", "ignore", "refuse"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("who", ["refused commit", "fencer", "abort", "self-fence", "success"])
async def test_a_resent_lock_delete_keeps_a_lock_taken_in_between(
    tmp_path: Path, who: str, mode: ConditionalDelete
) -> None:
    """Every release of the lock, on a store that honours, ignores or refuses If-Match:
    the resend after a lost answer (the first send freed the lock, job OTHER took it)
    keeps OTHER's lock, because the store is asked again (HEAD) before any resend. On a
    store that refuses ETags the first DeleteObjects is refused whole and the second
    (unconditional, after a HEAD) is the one whose answer is lost."""
    seen: list[LockRecord | None] = []
    nth = 2 if mode == "refuse" else 1
    if who == "fencer":
        state = MemoryState(B)
        setup = MemoryStore(state)
        h, _, _ = await ready_job(setup, tmp_path, "fail", "h", 1)
        k, ks, _ = await ready_job(setup, tmp_path, "append", "k", 1)
        await setup.put_object(B, LOCK, LockRecord(h.job_id).to_json())  # H died holding it
        k_store = MemoryStore(state, conditional_delete=mode)
        k_store.gate = resent_with_a_taker(state, nth, seen)
        kc = MagicCommitter(k_store, URI, options=options(tmp_path, lock_stale_after=0))
        with contextlib.suppress(Exception):
            await (await kc.open_job(k.job_id)).commit(ks)
    elif who == "self-fence":  # H's fail-mode commit refused (a conflict): its rollback releases
        state = MemoryState(B)
        setup = MemoryStore(state)
        h, hs, hk = await ready_job(setup, tmp_path, "fail", "h", 1)
        await setup.put_object(B, hk[0], b"there before")
        h_store = MemoryStore(state, conditional_delete=mode)
        h_store.gate = resent_with_a_taker(state, nth, seen)
        hc = MagicCommitter(h_store, URI, conflict="fail", options=options(tmp_path))
        with pytest.raises(ConflictError):
            await (await hc.open_job(h.job_id)).commit(hs)
    elif who == "success":  # a fail-mode commit that commits: its release frees the lock
        state = MemoryState(B)
        setup = MemoryStore(state)
        h, hs, _ = await ready_job(setup, tmp_path, "fail", "h", 1)
        h_store = MemoryStore(state, conditional_delete=mode)
        h_store.gate = resent_with_a_taker(state, nth, seen)
        hc = MagicCommitter(h_store, URI, conflict="fail", options=options(tmp_path))
        await (await hc.open_job(h.job_id)).commit(hs)
    elif who == "abort":
        state, h, hs, _ = await fenced_h(tmp_path)
        await dies_holding_the_lock(state, tmp_path, h.job_id, hs)
        h_store, hj = await h_job(state, tmp_path, h, conditional_delete=mode)
        h_store.gate = resent_with_a_taker(state, nth, seen)
        await hj.abort()
    else:
        state, h, hs, _ = await fenced_h(tmp_path)
        h_store, hj = await h_job(state, tmp_path, h, conditional_delete=mode)
        h_store.gate = resent_with_a_taker(state, nth, seen)
        with pytest.raises(LockLost):
            await hj.commit(hs)
    if not seen:  # the resend was its last request: the lock as it left it
        seen.append(lock_now(state))
    assert seen == [OTHER]
    if who != "fencer":  # (K goes on to fence OTHER, silent and stale, by the protocol)
        assert lock_now(state) == OTHER  # no request sent alongside deleted it later


# -- the portal's shutdown --------------------------------------------------------------
def closing_resource(order: list[str]) -> Any:
    @asynccontextmanager
    async def res() -> AsyncIterator[str]:
        yield "engine"
        order.append("closed")

    return res


async def clean_up(release: asyncio.Event, order: list[str]) -> None:
    """A rollback's clean-up, still running when close() begins: it goes on for some
    more steps after ``release`` (set just before close() is submitted to the loop)."""
    await release.wait()
    for _ in range(10):
        await asyncio.sleep(0)
    order.append("clean-up done")


def test_an_owned_portal_closes_its_engine_after_a_callers_clean_up() -> None:
    """close() from the caller's thread while a to_the_end clean-up runs: the resource
    closes after the clean-up ended. Ordered on the loop (release is queued before the
    shutdown), not by time."""
    portal = LoopPortal(name="attack-portal")
    order: list[str] = []
    portal.resource("engine", closing_resource(order))
    release = portal.run(_event())
    fut = portal.start(to_the_end(clean_up(release, order), cleanup=True))
    portal.loop.call_soon_threadsafe(release.set)
    portal.close()
    assert order == ["clean-up done", "closed"]
    assert fut.done()


async def _event() -> asyncio.Event:
    return asyncio.Event()


async def test_an_attached_portal_closes_its_engine_after_a_callers_clean_up() -> None:
    """An attached portal (an async program's own loop) also waits for the callers'
    coroutines handed in through it before it closes their engine."""
    loop = asyncio.get_running_loop()
    portal = LoopPortal.attach(loop)
    order: list[str] = []
    await asyncio.to_thread(portal.resource, "engine", closing_resource(order))
    release = asyncio.Event()
    fut = await asyncio.to_thread(portal.start, to_the_end(clean_up(release, order)))

    def close() -> None:
        loop.call_soon_threadsafe(release.set)
        portal.close()

    await asyncio.to_thread(close)
    with contextlib.suppress(asyncio.CancelledError):  # the close cancelled the caller
        await asyncio.wrap_future(fut)
    assert order == ["clean-up done", "closed"]


def whole_commit_at(
    n: int, state: MemoryState, tmp: Path, j: Any, js: Any, mode: ConditionalDelete
) -> tuple[Any, list[str]]:
    """A gate: before the ``n``-th request of the store it is set on, job ``j``'s whole
    commit runs (lock_wait 0, lock_stale_after 0); its outcome goes to the list."""
    count, outcome = 0, []

    async def gate(op: str, bucket: str, key: str) -> None:
        nonlocal count
        count += 1
        if count == n:
            jc = MagicCommitter(
                MemoryStore(state, conditional_delete=mode),
                URI,
                options=options(tmp, lock_wait=0.0, lock_stale_after=0),
            )
            try:
                await (await jc.open_job(j.job_id)).commit(js)
                outcome.append("committed")
            except DestinationLocked:
                outcome.append("refused")

    return gate, outcome


@pytest.mark.parametrize("mode", ["honour", "ignore", "refuse"])
@pytest.mark.parametrize("who", ["abort", "refused commit"])
async def test_another_jobs_whole_commit_between_any_two_requests_of_the_release(
    tmp_path: Path, who: str, mode: ConditionalDelete
) -> None:
    """Job J (lock_wait 0, lock_stale_after 0: it fences whatever it may) runs its whole
    commit before each request of H's release in turn: J commits (the lock free) or is
    refused (H holds it, its journal a tombstone); either way H's release never leaves a
    lock naming another job, and after one more abort of H nothing of H is left and J's
    and K's files are there."""
    ready, h, hs, kk = await fenced_h(tmp_path)
    if who == "abort":
        await dies_holding_the_lock(ready, tmp_path, h.job_id, hs)
    j, js, jk = await ready_job(MemoryStore(ready), tmp_path, "append", "j", 1)
    probe_state = ready.copy()
    probe, hj = await h_job(probe_state, tmp_path, h, conditional_delete=mode)
    opened = probe.requests  # open_job's, before the release
    with contextlib.suppress(LockLost):
        await (hj.abort() if who == "abort" else hj.commit(hs))
    for n in range(1, probe.requests - opened + 1):
        state = ready.copy()
        store, hj = await h_job(state, tmp_path, h, conditional_delete=mode)
        store.gate, outcome = whole_commit_at(n, state, tmp_path, j, js, mode)
        with contextlib.suppress(LockLost):
            await (hj.abort() if who == "abort" else hj.commit(hs))
        where = (n, outcome)
        assert len(outcome) == 1, where
        holder = lock_now(state)
        assert holder is None or holder.job_id == h.job_id, where
        with contextlib.suppress(JobNotFound):
            _, again = await h_job(state, tmp_path, h)
            await again.abort()
        if outcome == ["refused"]:
            await (await MagicCommitter(MemoryStore(state), URI).open_job(j.job_id)).commit(js)
        assert LOCK not in state.objects(B), where
        assert not [x for x in state.objects(B) if h.job_id in x], where
        assert sorted(data(state)) == sorted(kk + jk), where


@pytest.mark.parametrize("mode", ["honour", "ignore", "refuse"])
async def test_resume_of_a_fenced_job_holding_a_retaken_lock_releases_it(
    tmp_path: Path, mode: ConditionalDelete
) -> None:
    """``jobs resume`` instead of abort on H (dead holding r2, its journal K's tombstone):
    it finishes the rollback (refused in one line saying so) and the lock goes too."""
    state, h, hs, kk = await fenced_h(tmp_path)
    await dies_holding_the_lock(state, tmp_path, h.job_id, hs)
    _, hj = await h_job(state, tmp_path, h, conditional_delete=mode)
    with pytest.raises(Exception, match="rolling back; the rollback is now finished") as ended:
        await hj.resume()
    assert "\n" not in str(ended.value)
    await clean_end(state, tmp_path, h, kk)


@pytest.mark.parametrize("second", ["abort", "resume"])
async def test_a_second_abort_or_resume_between_any_two_requests_of_an_abort(
    tmp_path: Path, second: str
) -> None:
    """Two operators on H (dead holding r2): the second command (an abort, whose claim
    takes the first one's over, or a resume, refused by the abort's claim) runs whole
    before each request of the first abort in turn. The lock never names another job;
    after one more abort nothing of H is left and the next job commits at once."""
    ready, h, hs, kk = await fenced_h(tmp_path)
    await dies_holding_the_lock(ready, tmp_path, h.job_id, hs)
    probe_state = ready.copy()
    probe, hj = await h_job(probe_state, tmp_path, h)
    opened = probe.requests
    await hj.abort()
    for n in range(1, probe.requests - opened + 1):
        state = ready.copy()
        store, hj = await h_job(state, tmp_path, h)
        count = 0

        async def gate(op: str, bucket: str, key: str, n: int = n, st: MemoryState = state) -> None:
            nonlocal count
            count += 1
            if count == n:
                with contextlib.suppress(Exception):  # refused, or nothing left of H
                    _, other = await h_job(st, tmp_path, h)
                    await (other.abort() if second == "abort" else other.resume())

        store.gate = gate
        with contextlib.suppress(Exception):  # refused, or nothing left of H
            await hj.abort()
        holder = lock_now(state)
        assert holder is None or holder.job_id == h.job_id, n
        with contextlib.suppress(JobNotFound):
            _, again = await h_job(state, tmp_path, h)
            await again.abort()
        await clean_end(state, tmp_path, h, kk)
