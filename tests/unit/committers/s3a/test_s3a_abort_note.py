"""The abort note (:mod:`zerorename.committers.s3aabort`): an S3A job's abort cut short at
any request, by a crash or by a failed request, is finished by the next abort, and between
them they name every object the job may have completed (an uninterrupted abort names
them once). Found by the simulation (stop 35, seed 3947 and five more): an abort that
deleted the pendingset naming a completed object and then failed left an object no later
command could name. A resume refuses a job whose abort began; a note that is not an
abort note of the job changes nothing."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerorename.committers.errors import CommitterError, JobNotFound, JournalError
from zerorename.committers.paths import Destination
from zerorename.committers.s3a.abort import (
    NOTE_KIND,
    AbortNote,
    S3AAbortResult,
    abort_s3a_job,
    parse_note,
)
from zerorename.committers.s3a.jobs import list_s3a_jobs, resume_s3a_job, show_s3a_job
from zerorename.committers.s3a.layout import S3AJobLayout, S3ALayoutKind
from zerorename.engine.errors import RetriesExhausted
from zerorename.testing.memstate import MemoryState
from zerorename.testing.memstore import MemoryStore
from zerorename.testing.s3acrash import lay_out_on

B = "bucket"
URI = f"s3://{B}/s3a/out"
DEST = Destination.parse(URI)
JOB = "3f2a9c1e-6c0b-4d57-9a59-0123456789ab"
LAYOUT = S3AJobLayout(DEST, JOB)


async def crashed(kind: S3ALayoutKind = S3ALayoutKind.HADOOP_34) -> MemoryState:
    """The job, its commit dead after the first task's uploads were completed."""
    state = MemoryState(B)
    await lay_out_on(MemoryStore(state), URI, JOB, kind)
    return state


def names(res: S3AAbortResult) -> set[str]:
    return {uri for uri, _ in res.maybe_completed}


async def aborted(state: MemoryState, told: list[S3AAbortResult]) -> S3AAbortResult:
    return await abort_s3a_job(MemoryStore(state), DEST, JOB, tell=told.append)


@pytest.mark.parametrize("kind", list(S3ALayoutKind))
@pytest.mark.parametrize("after", [False, True], ids=["before-effect", "after-effect"])
async def test_an_abort_cut_short_anywhere_still_names_every_kept_object(
    after: bool, kind: S3ALayoutKind
) -> None:
    base = await crashed(kind)
    clean = base.copy()
    store = MemoryStore(clean)
    want = names(await abort_s3a_job(store, DEST, JOB))
    assert len(want) == 2  # the first task's two completed outputs
    for n in range(1, store.requests + 1):
        state = base.copy()
        dying = MemoryStore(state)
        dying.crash_at(n, after=after)
        told: list[S3AAbortResult] = []
        with contextlib.suppress(BaseException):
            await abort_s3a_job(dying, DEST, JOB, tell=told.append)
        seen = set().union(*(names(r) for r in told))
        try:
            again = await aborted(state, told)
        except JobNotFound:  # the first one had finished: it told before its last delete
            assert seen == want, f"request {n}"
        else:
            assert seen | names(again) == want, f"request {n}"
            assert again.rolled_back, f"request {n}: the note's verdict"
        assert state.objects(B, S3AJobLayout(DEST, JOB, kind).root) == {}
        assert {k for k in state.objects(B) if "part-" in k} == {
            u.removeprefix(f"s3://{B}/") for u in want
        }


async def test_an_abort_that_fails_after_the_first_delete_leaves_its_note_to_the_next() -> None:
    # the simulation's seed 3947, on one job: the directory's second delete fails
    state = await crashed()
    store = MemoryStore(state)
    store.fail_at(
        2, RetriesExhausted("SlowDown past the budget", code="SlowDown"), op="DeleteObjects"
    )
    with pytest.raises(CommitterError):
        await abort_s3a_job(store, DEST, JOB)
    note = parse_note(state.objects(B)[LAYOUT.abort_note], LAYOUT)
    assert len(note.maybe_completed) == 2 and note.rolled_back
    # the job is still listed, shows the abort, and refuses a resume, changing nothing
    (entry,) = [e async for e in list_s3a_jobs(MemoryStore(state), DEST)]
    assert "an abort began" in entry.state
    shown = await show_s3a_job(MemoryStore(state), DEST, JOB)
    assert shown["committed"] is False and len(shown["keptByAbort"]) == 2
    before = state.copy()
    with pytest.raises(JournalError, match="an abort began"):
        await resume_s3a_job(MemoryStore(state), DEST, JOB)
    assert state.objects(B) == before.objects(B)
    told: list[S3AAbortResult] = []
    res = await aborted(state, told)
    assert told == [res] and len(res.maybe_completed) == 2 and res.rolled_back
    assert state.objects(B, LAYOUT.root) == {}


@pytest.mark.parametrize(
    "doc",
    [
        b"not json",
        b"[]",
        json.dumps({"kind": "other", "version": 1}).encode(),
        json.dumps(
            {
                "kind": NOTE_KIND,
                "version": 1,
                "jobId": "9d7c1b2a-1111-4222-8333-444455556666",
                "rolledBack": True,
                "uploadsAborted": 0,
                "maybeCompleted": [],
                "kept": [],
            }
        ).encode(),
        AbortNote(JOB, True, 1, {"elsewhere/part-0": "x"}, {}).to_json(),
        AbortNote(JOB, True, 1, {f"s3a/out/__magic_job-{JOB}/x": "x"}, {}).to_json(),
    ],
    ids=["not-json", "not-object", "kind", "other-job", "outside", "a-record"],
)
async def test_a_bad_note_is_refused_and_changes_nothing(doc: bytes) -> None:
    state = await crashed()
    await MemoryStore(state).put_object(B, LAYOUT.abort_note, doc)
    before = state.copy()
    with pytest.raises(CommitterError, match="is not an abort note of S3A job"):
        await abort_s3a_job(MemoryStore(state), DEST, JOB)
    assert state.objects(B) == before.objects(B) and state.pending(B) == before.pending(B)


_keys = st.lists(
    st.text(st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=8),
    max_size=4,
).map(lambda parts: {f"s3a/out/{p}": "why" for p in parts if p not in (".", "..")})


@given(maybe=_keys, rolled=st.booleans(), count=st.integers(0, 10**6))
def test_a_note_reads_back_as_written(maybe: dict[str, str], rolled: bool, count: int) -> None:
    note = AbortNote(JOB, rolled, count, maybe, {})
    assert parse_note(note.to_json(), LAYOUT) == note


@given(data=st.binary(max_size=300))
def test_any_bytes_are_a_note_or_one_refusal(data: bytes) -> None:
    try:
        parse_note(data, LAYOUT)
    except CommitterError as exc:
        assert "\n" not in str(exc) and "is not an abort note" in str(exc)
