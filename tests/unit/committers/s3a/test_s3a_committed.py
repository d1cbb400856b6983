"""`jobs abort|resume` of an S3A job that had committed, and of one whose completed object
another job rewrote identically (issue 20, findings 2 and 3), on the in-memory store.

2. X committed (every upload complete, its _SUCCESS written), its driver died in the
   cleanup, so ``__magic_job-X/`` stays; a later job Y appends and writes its own
   _SUCCESS. Abort of X must refuse and change nothing; resume finishes only the cleanup
   and keeps Y's _SUCCESS.
3. X crashed with part of its output completed; a re-run Y wrote the same bytes with the
   same part layout to the same keys and committed. S3A keys carry no job id, so abort of
   X keeps (and reports) every object X may have completed: it deletes nothing visible.
"""

from __future__ import annotations

import json

import pytest

from zerorename.committers.codec.success import SuccessData
from zerorename.committers.errors import JobNotFound, JournalError
from zerorename.committers.paths import Destination
from zerorename.committers.s3a.jobs import abort_s3a_job, resume_s3a_job, rolled_back
from zerorename.committers.s3a.read import UploadState
from zerorename.engine.results import ObjectInfo
from zerorename.testing.memstate import MemoryState
from zerorename.testing.memstore import MemoryStore
from zerorename.testing.s3acrash import lay_out_on

B = "bucket"
URI = f"s3://{B}/s3a/out"
DEST = Destination.parse(URI)
X = "3f2a9c1e-6c0b-4d57-9a59-0123456789ab"
Y = "9d7c1b2a-1111-4222-8333-444455556666"
ROOT = f"s3a/out/__magic_job-{X}/"
SUCCESS = "s3a/out/_SUCCESS"


def outputs(state: MemoryState) -> dict[str, bytes]:
    return {
        k: v
        for k, v in state.objects(B).items()
        if not k.startswith("s3a/out/__magic") and k != SUCCESS
    }


async def committed_then_appended() -> tuple[MemoryState, MemoryStore]:
    """X committed (resume ran to its _SUCCESS) but its directory stayed (its cleanup
    died: the records put back); then Y appended a file and wrote its _SUCCESS."""
    state = MemoryState(B)
    store = MemoryStore(state)
    await lay_out_on(store, URI, X)
    kept = dict(state.objects(B, ROOT))
    await resume_s3a_job(store, DEST, X)
    for key, data in kept.items():  # the cleanup "died": X's directory is still there
        await store.put_object(B, key, data)
    assert json.loads(state.objects(B)[SUCCESS])["jobId"] == X
    p = await store.upload(B, DEST.key(f"part-00000-{Y}-c000.csv"), b"y's row\n", defer=True)
    assert (await store.complete_many([p])).ok
    y_success = SuccessData(job_id=Y, committer="magic", filenames=["/" + p.key])
    await store.put_object(B, SUCCESS, y_success.to_json())
    return state, store


async def test_abort_of_a_committed_job_whose_success_was_replaced_is_refused() -> None:
    state, store = await committed_then_appended()
    before = (dict(state.objects(B)), state.pending(B))
    with pytest.raises(JournalError, match=r"committed.*every upload.*jobs resume"):
        await abort_s3a_job(store, DEST, X)
    assert (dict(state.objects(B)), state.pending(B)) == before


async def test_abort_of_a_committed_job_whose_output_was_replaced_is_no_rollback() -> None:
    # a replace removed X's files after X committed: abort finds nothing of X pending and
    # says so (it deletes only X's records), never "aborted" (simulation s3a-late 51)
    state, store = await committed_then_appended()
    x_files = [k for k in outputs(state) if X in k]
    await store.delete_objects(B, x_files)
    res = await abort_s3a_job(store, DEST, X)
    assert not res.rolled_back and res.uploads_aborted == 0
    assert not state.objects(B, ROOT) and f"part-00000-{Y}-c000.csv" in str(outputs(state))


def test_an_abort_rolls_back_only_a_job_whose_commit_never_finished() -> None:
    s = UploadState
    other = ObjectInfo(B, "k", 3, '"0123"', 0.0)  # another writer's object at the key
    assert rolled_back([], []) and rolled_back([s.COMPLETED, s.PENDING], [other, None])
    # one completed, one gone with nothing at its key: an earlier abort (cut short)
    # aborted the rest of a commit that never finished (simulation s3a 1309)
    assert rolled_back([s.COMPLETED, s.MISSING], [other, None])
    # every upload gone (a replace removed a committed job's output), or the missing
    # one's key holding another object (rewritten): it may have committed
    assert not rolled_back([s.MISSING], [None]) and not rolled_back(
        [s.MISSING, s.MISSING], [None, None]
    )
    assert not rolled_back([s.MISSING, s.COMPLETED], [other, other])


async def test_resume_of_it_finishes_the_cleanup_and_keeps_the_newer_success() -> None:
    state, store = await committed_then_appended()
    files = outputs(state)
    y_success = state.objects(B)[SUCCESS]
    said: list[str] = []
    res = await resume_s3a_job(store, DEST, X, report=said.append)
    assert res.completed_now == 0 and res.already_completed == 4
    assert not res.success_written
    assert state.objects(B)[SUCCESS] == y_success  # not overwritten by X's
    assert outputs(state) == files and state.objects(B, ROOT) == {}
    assert any("newer _SUCCESS" in line for line in said), said
    with pytest.raises(JobNotFound):
        await resume_s3a_job(store, DEST, X)


async def test_resume_of_a_committed_job_writes_its_success_where_none_is_newer() -> None:
    """X committed, its _SUCCESS and its directory's cleanup both lost: no _SUCCESS at all
    (or an older one): resume writes X's."""
    state, store = await committed_then_appended()
    await store.delete_objects(B, [SUCCESS])
    res = await resume_s3a_job(store, DEST, X)
    assert res.success_written and json.loads(state.objects(B)[SUCCESS])["jobId"] == X


async def rerun_rewrote_identically() -> tuple[MemoryState, MemoryStore, list[str]]:
    """X crashed with task 0's two files completed; Y re-ran and completed uploads of the
    same bytes in the same parts at the same keys (the same multipart ETag)."""
    state = MemoryState(B)
    store = MemoryStore(state)
    await lay_out_on(store, URI, X)
    completed = sorted(k for k in outputs(state) if "part-0000" in k and state.objects(B)[k])
    assert len(completed) == 2
    for key in completed:
        p = await store.upload(B, key, state.objects(B)[key], defer=True)
        assert (await store.complete_many([p])).ok
    await store.put_object(B, SUCCESS, SuccessData(job_id=Y, committer="magic").to_json())
    return state, store, completed


async def test_abort_keeps_what_another_job_may_have_written_identically() -> None:
    state, store, completed = await rerun_rewrote_identically()
    ys = {k: state.objects(B)[k] for k in completed}
    res = await abort_s3a_job(store, DEST, X)
    assert {k: state.objects(B).get(k) for k in completed} == ys  # Y's files stay
    assert sorted(uri for uri, _ in res.maybe_completed) == [f"s3://{B}/{k}" for k in completed]
    assert [u for u in state.pending(B) if X in u[0]] == []  # X's pending uploads aborted
    assert state.objects(B, ROOT) == {}
