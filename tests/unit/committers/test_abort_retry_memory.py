"""A failed ``jobs abort`` can be run again and finishes the job (simulation finding 12).

A job with its marker, a dead task's upload (no record) and maybe a committed task (its
pendingset); another job's pending upload beside it. An abort meets a crash, or throttling past
the retry budget, at each of its requests in turn; a second abort (a new process) then
finds the job and leaves nothing of it: no pending upload, no record. A throttled upload
abort is one CommitterError line saying to run the abort again."""

from __future__ import annotations

from pathlib import Path

import pytest

from zerorename.committers import CommitOptions, CommitterError, JobNotFound, MagicCommitter
from zerorename.engine.errors import RetriesExhausted
from zerorename.testing.memfaults import ProcessCrashed
from zerorename.testing.memstore import MemoryState, MemoryStore

B = "bkt"
URI = f"s3://{B}/out"


def committer(store: MemoryStore, tmp: Path) -> MagicCommitter:
    return MagicCommitter(store, URI, conflict="fail", options=CommitOptions(staging_dir=tmp))


async def prepare(tmp: Path, committed: bool) -> tuple[MemoryState, str, str]:
    state = MemoryState(B)
    store = MemoryStore(state)
    other = await committer(store, tmp).setup_job()
    ota = other.task_attempt(0)
    await ota.setup()
    async with ota.open("other.csv") as out:
        await out.write(b"other")
    await ota.commit()
    job = await committer(store, tmp).setup_job()
    if committed:
        ta = job.task_attempt(0)
        await ta.setup()
        async with ta.open("a.csv") as out:
            await out.write(b"a")
        await ta.commit()
    # a task whose process died writing its record: its upload is pending, unrecorded
    dying = MemoryStore(state)
    dying.crash_at(1, op="PutObject")
    dead = (await committer(dying, tmp).open_job(job.job_id)).task_attempt(1)
    await dead.setup()
    with pytest.raises((ProcessCrashed, BaseExceptionGroup)):
        async with dead.open("b.csv") as out:
            await out.write(b"b")
    assert not [k for k in state.objects(B) if k.endswith(".csv.pending")]
    return state, job.job_id, other.job_id


def job_left(state: MemoryState, job_id: str) -> tuple[list[str], list[str]]:
    objects = [k for k in state.objects(B) if job_id in k]
    return objects, [k for k, _ in state.pending(B) if job_id in k]


@pytest.mark.parametrize("committed", [True, False], ids=["a-task-committed", "no-record"])
@pytest.mark.parametrize("fault", ["crash", "throttled"])
async def test_an_abort_cut_at_any_request_is_finished_by_the_next(
    tmp_path: Path, fault: str, committed: bool
) -> None:
    state, job_id, other_id = await prepare(tmp_path, committed)
    assert job_left(state, job_id)[1], "the dead task's upload is pending"
    clean = state.copy()
    store = MemoryStore(clean)
    await (await committer(store, tmp_path).open_job(job_id)).abort()
    assert job_left(clean, job_id) == ([], [])
    total = store.requests
    seen_error = False
    retried = 0
    for n in range(1, total + 1):
        cut = state.copy()
        first = MemoryStore(cut)
        job = await committer(first, tmp_path).open_job(job_id)
        if fault == "crash":
            first.crash_at(n)
        else:
            first.fail_at(n, RetriesExhausted("SlowDown past the budget", code="SlowDown"))
        try:
            await job.abort()
        except CommitterError as exc:
            assert "\n" not in str(exc)
            if "could not be aborted" in str(exc):
                assert "run the abort again" in str(exc)
                seen_error = True
        except BaseExceptionGroup as group:  # the crash, met by requests run side by side
            assert group.split(ProcessCrashed)[1] is None, group
        except ProcessCrashed:
            pass
        if job_left(cut, job_id) == ([], []):
            with pytest.raises(JobNotFound):  # the cut abort had finished
                await committer(MemoryStore(cut), tmp_path).open_job(job_id)
            continue
        retried += 1
        again = await committer(MemoryStore(cut), tmp_path).open_job(job_id)
        await again.abort()
        assert job_left(cut, job_id) == ([], []), f"fault at request {n}"
        others = [k for k, _ in cut.pending(B) if other_id in k]
        assert others == [k for k, _ in state.pending(B) if other_id in k]
    assert retried >= total // 2  # a fault up to the upload aborts leaves the job
    assert fault == "crash" or seen_error
