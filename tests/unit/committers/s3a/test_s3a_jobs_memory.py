"""`jobs resume|abort` of a crashed S3A magic job on the in-memory store, the process dying
at every request (before or after it took effect): resume again finishes the job exactly
as an uninterrupted resume, abort from any such point leaves nothing of the job (or is
refused, changing nothing, once the job's _SUCCESS is written); an abort dying anywhere
is finished by another abort. Another S3A job's records and uploads are never touched."""

from __future__ import annotations

import contextlib
import json

import pytest

from zerorename.committers.errors import CommitterError, JobNotFound, JournalError
from zerorename.committers.paths import Destination
from zerorename.committers.s3a.jobs import abort_s3a_job, resume_s3a_job
from zerorename.committers.s3a.layout import S3AJobLayout
from zerorename.testing.memfaults import ProcessCrashed
from zerorename.testing.memstate import MemoryState
from zerorename.testing.memstore import MemoryStore
from zerorename.testing.s3acrash import lay_out_on

B = "bucket"
URI = f"s3://{B}/s3a/out"
DEST = Destination.parse(URI)
JOB = "3f2a9c1e-6c0b-4d57-9a59-0123456789ab"
OTHER = "9d7c1b2a-1111-4222-8333-444455556666"
ROOT = f"s3a/out/__magic_job-{JOB}/"


def crash_of(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(crash_of(e) for e in exc.exceptions)
    return isinstance(exc, ProcessCrashed) or (
        exc.__cause__ is not None and crash_of(exc.__cause__)
    )


async def crashed() -> MemoryState:
    """The job, crashed with half its uploads completed, next to another S3A job."""
    state = MemoryState(B)
    store = MemoryStore(state)
    await lay_out_on(store, URI, JOB)
    await lay_out_on(store, URI, OTHER)
    return state


def others(state: MemoryState) -> tuple[dict[str, bytes], list[tuple[str, str]]]:
    """Everything that is not this job's: OTHER's records, outputs and uploads."""
    objs = {k: v for k, v in state.objects(B).items() if JOB not in k and k != "s3a/out/_SUCCESS"}
    ups = [u for u in state.pending(B) if JOB not in u[0]]
    return objs, ups


def outputs(state: MemoryState) -> dict[str, bytes]:
    return {k: v for k, v in state.objects(B).items() if JOB in k and not k.startswith(ROOT)}


async def resume(state: MemoryState) -> None:
    await resume_s3a_job(MemoryStore(state), DEST, JOB)


async def abort(state: MemoryState) -> None:
    await abort_s3a_job(MemoryStore(state), DEST, JOB)


def check_resumed(state: MemoryState, clean: MemoryState) -> None:
    assert outputs(state) == outputs(clean)
    assert [u for u in state.pending(B) if JOB in u[0]] == []
    assert state.objects(B, ROOT) == {}
    success = json.loads(state.objects(B)["s3a/out/_SUCCESS"])
    want = json.loads(clean.objects(B)["s3a/out/_SUCCESS"])
    assert success["jobId"] == JOB and sorted(success["filenames"]) == sorted(want["filenames"])
    assert others(state) == others(clean)


def check_aborted(state: MemoryState, base: MemoryState, before: MemoryState) -> None:
    """Nothing of the job left but the objects it may have completed: abort deletes no
    object (S3A keys carry no job id; issue 20), so they are as ``before`` it."""
    assert outputs(state) == outputs(before) and state.objects(B, ROOT) == {}
    assert [u for u in state.pending(B) if JOB in u[0]] == []
    assert others(state) == others(base)


async def requests_of(state: MemoryState, action: str) -> int:
    store = MemoryStore(state)
    fn = resume_s3a_job if action == "resume" else abort_s3a_job
    await fn(store, DEST, JOB)
    return store.requests


@pytest.mark.parametrize("after", [False, True], ids=["before-effect", "after-effect"])
async def test_resume_dying_at_every_request(after: bool) -> None:
    base = await crashed()
    clean = base.copy()
    total = await requests_of(clean, "resume")
    assert len(outputs(clean)) == 4  # the 4 outputs of the 2 committed tasks
    seen = {"aborted": 0, "abort refused": 0, "already clean": 0}
    for n in range(1, total + 1):
        state = base.copy()
        dying = MemoryStore(state)
        dying.crash_at(n, after=after)
        with pytest.raises(BaseException) as died:
            await resume_s3a_job(dying, DEST, JOB)
        assert crash_of(died.value), f"request {n}: {died.value!r}"
        rolled = state.copy()
        try:
            await abort(rolled)
        except JournalError:  # its _SUCCESS is written: abort changes nothing
            assert rolled.objects(B) == state.objects(B)
            assert rolled.pending(B) == state.pending(B)
            seen["abort refused"] += 1
        except JobNotFound:  # the directory is gone: the job was finished
            check_resumed(rolled, clean)
            seen["already clean"] += 1
        else:
            check_aborted(rolled, base, state)
            seen["aborted"] += 1
        with contextlib.suppress(JobNotFound):  # the dying resume deleted all of it
            await resume(state)
        check_resumed(state, clean)
    assert seen["aborted"] and seen["abort refused"], seen


@pytest.mark.parametrize("after", [False, True], ids=["before-effect", "after-effect"])
async def test_abort_dying_at_every_request(after: bool) -> None:
    base = await crashed()
    clean = base.copy()
    total = await requests_of(clean, "abort")
    check_aborted(clean, base, base)
    for n in range(1, total + 1):
        state = base.copy()
        dying = MemoryStore(state)
        dying.crash_at(n, after=after)
        with pytest.raises(BaseException) as died:
            await abort_s3a_job(dying, DEST, JOB)
        assert crash_of(died.value), f"request {n}: {died.value!r}"
        with contextlib.suppress(JobNotFound):
            await abort(state)
        check_aborted(state, base, base)


async def test_a_resume_cut_short_in_its_cleanup_keeps_the_whole_success() -> None:
    """The directory half deleted after _SUCCESS: the pendingsets left name fewer files,
    yet the second resume keeps the first one's _SUCCESS (every file listed)."""
    state = await crashed()
    store = MemoryStore(state)
    store.crash_at(1, op="DeleteObjects", after=False)
    with pytest.raises(BaseException) as died:
        await resume_s3a_job(store, DEST, JOB)
    assert crash_of(died.value)
    first = state.objects(B)["s3a/out/_SUCCESS"]
    one = next(k for k in state.objects(B, ROOT) if k.endswith("m_000000.pendingset"))
    del state.buckets[B][one]  # as if the delete had taken this one before dying
    await resume(state)
    assert state.objects(B)["s3a/out/_SUCCESS"] == first
    assert len(json.loads(first)["filenames"]) == 4


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("no committed task", "has no committed task"),
        ("two attempts", "committed tasks in attempts 00, 01"),
    ],
)
async def test_resume_refuses_what_it_cannot_finish_and_changes_nothing(
    change: str, says: str
) -> None:
    state = await crashed()
    attempt = f"{ROOT}job-{JOB}/00/"
    sets = sorted(k for k in state.objects(B, attempt) if k.endswith(".pendingset"))
    objs = state.buckets[B]
    layout = S3AJobLayout(DEST, JOB)
    for key in sets:
        if change == "two attempts":  # the second app attempt committed this task again
            objs[key.replace("/00/", "/01/")] = objs[key]
            continue
        # the task never committed: its uploads are named by its attempt's .pending files
        for i, commit in enumerate(json.loads(state.objects(B)[key])["commits"]):
            rel = commit["destinationKey"][len("s3a/out/") :]
            pending = layout.pending(0, f"attempt_{i}_{len(sets)}", rel)
            await MemoryStore(state).put_object(B, pending, json.dumps(commit).encode())
        del objs[key]
    before = (state.objects(B), state.pending(B))
    with pytest.raises(CommitterError, match=says) as ei:
        await resume(state)
    assert "\n" not in str(ei.value) and "jobs abort" in str(ei.value)
    assert (state.objects(B), state.pending(B)) == before
    await abort(state)  # what the message says to do
    assert state.objects(B, ROOT) == {} and [u for u in state.pending(B) if JOB in u[0]] == []
