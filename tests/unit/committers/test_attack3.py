"""Attacks on this session's deleting code (helper attack3, issue 20), on the in-memory
store, each command run as the CLI does (``zerorename.sim.operators.run_cli``, the stream
hook included):

- the per-run command claims of ``zerorename jobs resume|abort`` (committers/cmdclaim.py)
  on a streaming query's batch job, which the other claim tests do not drive: the other
  verb inside a run, at every request, is refused by the claims alone; a second run of the
  verb and then the other verb inside the first leave the batch's files visible exactly
  when the query's log records the batch;
- a job named by another spelling of its UUID (upper case, no hyphens), which the CLI
  takes: the stream hook and the S3A lookup match the id's exact text, the zerorename
  job's lookup its canonical form, so a stream batch's job or an S3A job was handled as a
  plain zerorename job (the batch published twice, a committed S3A job reported aborted
  and left without its _SUCCESS, kept objects never named); strict xfails until the CLI
  took the id as its records spell it (``committers.cli._stored_spelling``);
- the job commit's failure policy (jobpolicy's tables) against the code it replaced
  (commit 4e71a09), for every fault, entry, state and option."""

from __future__ import annotations

from typing import Any

import pytest

from unit.committers.s3a.test_attack2_s3a_abort import JOB as S3A_JOB
from unit.committers.s3a.test_attack2_s3a_abort import URI as S3A_URI
from unit.committers.s3a.test_attack2_s3a_abort import B as S3A_B
from unit.committers.s3a.test_attack2_s3a_abort import before, cli, kept, want_kept
from unit.committers.s3a.test_attack2_s3a_abort import crashed as s3a_crashed
from unit.spark_adapter.stream.test_streaming_sink import (
    URI,
    B,
    commit_batch,
    crashing,
    data_of,
    expected,
    log_of,
    run_tasks,
    sink,
)
from zerorename.cli.claims import claim_dir
from zerorename.committers.commit.journal import State
from zerorename.committers.commit.policy import (
    RULES,
    Entry,
    Fault,
    OnFailure,
    Raise,
    Reaction,
    Work,
    reaction,
    works,
)
from zerorename.committers.conflict import ConflictMode
from zerorename.committers.errors import CommitterError
from zerorename.committers.paths import Destination
from zerorename.committers.s3a.layout import S3ALayoutKind
from zerorename.testing.memfaults import ProcessCrashed
from zerorename.testing.memstate import MemoryState
from zerorename.testing.memstore import MemoryStore

S3A_DEST = S3A_URI.removeprefix(f"s3://{S3A_B}/")


async def died_in_commit(n: int = 1) -> tuple[MemoryState, str]:
    """Batch 0 committed; batch 1's driver died right after its ``n``-th complete (the
    log's intent and the journal stored, part of the batch's files visible)."""
    state = MemoryState(B)
    store = MemoryStore(state)
    await commit_batch(store, 0, "t0")
    job_id, results = await run_tasks(store, 1, "t1")
    store.crash_at(n, op="CompleteMultipartUpload", after=True)
    await crashing(sink(store).commit(1, job_id, results))
    return state, job_id


def batch_recorded(state: MemoryState) -> bool:
    lg = log_of(state)
    return lg["pending"] is None and 1 in [e["batch"] for e in lg["recent"]]


def job_left(state: MemoryState, job_id: str) -> list[str]:
    """The job's records, note and claims."""
    return [k for k in state.objects(B) if job_id in k and ("__magic" in k or "/jobs/" in k)]


async def requests_of(state: MemoryState, *argv: str) -> int:
    store = MemoryStore(state.copy())
    _, exc = await cli(store.state, *argv, store=store)
    assert exc is None, exc
    return store.requests


@pytest.mark.parametrize("verb", ["abort", "resume"])
async def test_a_stream_jobs_second_run_and_the_other_verb_inside_the_first(verb: str) -> None:
    """Run 1 of ``verb`` on a stream batch's job whose driver died in its commit is paused
    before each of its requests; run 2 of ``verb`` runs whole (it may succeed and delete
    run 1's claim, or find nothing to do), then the other verb runs whole; run 1 goes on.
    Never do a resume and an abort both report success; the batch's files are all there
    exactly when the log records the batch (none of them, and no intent, otherwise); a
    later run of the winning verb leaves nothing of the job, no claim either. (Once run 2
    deleted run 1's claim, what stops the other verb is the job's own state: a journal
    rolling back, a log that records the batch; this holds with the claims disabled too.)"""
    base, job_id = await died_in_commit()
    other = "abort" if verb == "resume" else "resume"
    total = await requests_of(base, verb, URI, job_id)
    assert total > 10
    for n in range(1, total + 1):
        state = base.copy()
        seen: list[Any] = []

        async def second_then_other(state: MemoryState = state, seen: list[Any] = seen) -> None:
            seen.append((await cli(state, verb, URI, job_id))[1])
            seen.append((await cli(state, other, URI, job_id))[1])

        first = MemoryStore(state)
        first.gate = before(n, second_then_other)
        _, first_exc = await cli(state, verb, URI, job_id, store=first)
        second_exc, other_exc = seen
        if other_exc is None:
            assert first_exc is not None and second_exc is not None, (
                f"request {n}: a {verb} and an {other} of one job both reported success"
            )
        winner = other if other_exc is None else verb
        await cli(state, winner, URI, job_id)  # a later operator's clean-up
        if batch_recorded(state):
            assert winner == "resume", n
            assert data_of(state) == expected(range(2)), n
        else:
            assert log_of(state)["pending"] is None, n
            assert data_of(state) == expected(range(1)), n
        assert job_left(state, job_id) == [], (n, job_left(state, job_id))
        assert not state.pending(B), n


#: the requests that change nothing
READS = {"GetObject", "HeadObject", "ListObjectsV2", "ListMultipartUploads", "ListParts"}


@pytest.mark.parametrize("verb", ["abort", "resume"])
async def test_a_stream_jobs_other_verb_is_refused_at_every_request_of_a_run(verb: str) -> None:
    """The other verb, run whole before each request of a run of ``verb`` on a stream
    batch's job, from the run's second request (its claim written) to its last (its
    claim's delete): refused in one line naming the run's claim, and it writes nothing
    but its own claim (the claims alone stop it: the run's other requests in flight go on
    meanwhile, so the store itself may change)."""
    base, job_id = await died_in_commit()
    other = "abort" if verb == "resume" else "resume"
    total = await requests_of(base, verb, URI, job_id)
    mine = claim_dir(Destination.parse(URI), job_id)
    for n in range(2, total + 1):
        state = base.copy()
        seen: list[Any] = []

        async def other_whole(state: MemoryState = state, seen: list[Any] = seen) -> None:
            claim = [k for k in state.objects(B) if k.startswith(mine)]
            store = MemoryStore(state)
            seen.append((claim, (await cli(state, other, URI, job_id, store=store))[1]))
            seen.append([(r.op, r.key) for r in store.log if r.op not in READS])

        first = MemoryStore(state)
        first.gate = before(n, other_whole)
        _, first_exc = await cli(state, verb, URI, job_id, store=first)
        assert first_exc is None, (n, first_exc)
        (claim, exc), writes = seen
        assert isinstance(exc, CommitterError), f"request {n}: the {other} was not refused"
        assert "\n" not in str(exc) and f"s3://{B}/{claim[0]}" in str(exc), (n, exc)
        assert writes and all(k.startswith(mine + other) for _, k in writes), (n, writes)
        assert job_left(state, job_id) == [], (n, job_left(state, job_id))


def spellings(job_id: str) -> list[str]:
    """Other spellings of the same UUID that the CLI takes (``check_job_id`` canonicalises
    any form ``uuid.UUID`` parses), as an operator may paste them."""
    return [job_id.upper(), job_id.replace("-", "")]


@pytest.mark.parametrize("form", [0, 1], ids=["upper", "no-hyphens"])
async def test_a_stream_jobs_resume_under_another_spelling_of_its_id(form: int) -> None:
    """A stream batch's job whose driver died in its commit, resumed by the operator
    under another spelling of its id: it must be resumed as the stream's job (the batch
    recorded in the log, no _SUCCESS) or refused; never published outside the log."""
    state, job_id = await died_in_commit()
    _, exc = await cli(state, "resume", URI, spellings(job_id)[form])
    if exc is None:
        assert batch_recorded(state), "the batch was published but the log does not record it"
        assert f"{URI.removeprefix(f's3://{B}/')}/_SUCCESS" not in state.objects(B)
    # Spark runs batch 1 again: it finds it committed, or writes it (once)
    await commit_batch(MemoryStore(state), 1, "rerun")
    assert data_of(state) == expected(range(2))


@pytest.mark.parametrize("form", [0, 1], ids=["upper", "no-hyphens"])
async def test_a_stream_jobs_abort_under_another_spelling_of_its_id(form: int) -> None:
    state, job_id = await died_in_commit()
    _, exc = await cli(state, "abort", URI, spellings(job_id)[form])
    assert exc is None, exc
    assert log_of(state)["pending"] is None
    assert job_left(state, job_id) == [], job_left(state, job_id)


# -- an S3A job named by another spelling of its UUID ---------------------------------------
async def s3a_committed(kind: S3ALayoutKind) -> MemoryState:
    """An S3A job whose every committed upload is complete, its ``_SUCCESS`` not written
    and its directory there (a resume died at its ``_SUCCESS``; its claim deleted, as the
    refusal naming it says once that process is gone)."""
    state = await s3a_crashed(kind)
    dying = MemoryStore(state)
    dying.crash_at(2, op="PutObject")  # its claim, then the _SUCCESS
    _, exc = await cli(state, "resume", S3A_URI, S3A_JOB, store=dying)
    assert isinstance(exc, ProcessCrashed), exc
    assert f"{S3A_DEST}/_SUCCESS" not in state.objects(S3A_B)
    await MemoryStore(state).delete_objects(
        S3A_B, list(state.objects(S3A_B, f"{S3A_DEST}/__magic_commit/"))
    )
    return state


async def test_an_s3a_job_that_committed_is_not_aborted_under_another_spelling() -> None:
    state = await s3a_committed(S3ALayoutKind.HADOOP_34)
    _, exc = await cli(state, "abort", S3A_URI, S3A_JOB)
    assert exc is not None  # the right spelling: refused, the job committed
    _, exc = await cli(state, "abort", S3A_URI, S3A_JOB.upper())
    assert exc is not None, "an abort reported a committed S3A job aborted"
    _, exc = await cli(state, "resume", S3A_URI, S3A_JOB)
    assert exc is None, exc
    assert f"{S3A_DEST}/_SUCCESS" in state.objects(S3A_B)


async def test_an_s3a_jobs_abort_under_another_spelling_names_what_it_keeps() -> None:
    want = await want_kept(S3ALayoutKind.HADOOP_34)
    state = await s3a_crashed(S3ALayoutKind.HADOOP_34)
    printed, exc = await cli(state, "abort", S3A_URI, S3A_JOB.upper())
    told = kept(printed)
    if exc is not None or [k for k in state.objects(S3A_B) if "__magic_job" in k]:
        told |= kept((await cli(state, "abort", S3A_URI, S3A_JOB))[0])
    assert told == want


# -- the job commit's failure policy against the code it replaced ----------------------------
def before_refactor(
    on: OnFailure, fault: Fault, entry: Entry, state: State, rollback: bool
) -> Reaction:
    """What ``JobCommitRun._failed`` (ROLL_BACK) and ``_stopped_after_completes``
    (ROLL_FORWARD) did at commit 4e71a09, before jobpolicy's tables, transcribed branch by
    branch; every fault but INTERRUPT is an Exception, and LOCK_LOST, CONFLICT and
    COMMIT_ERROR are JobCommitErrors."""
    resumed = entry is Entry.RESUME
    is_exception = fault is not Fault.INTERRUPT
    commit_error = fault in (Fault.LOCK_LOST, Fault.CONFLICT, Fault.COMMIT_ERROR)
    if on is OnFailure.ROLL_FORWARD:
        if fault is Fault.BAD_RECORD:
            return Reaction(False, False, Raise.REFUSED)
        own = not is_exception or commit_error
        return Reaction(False, True, Raise.AS_IS if own else Raise.RESUME_FINISHES)
    if fault is Fault.BAD_RECORD:
        return Reaction(False, not resumed and state is not State.STARTED, Raise.REFUSED)
    roll = rollback and is_exception
    save = not roll and state is not State.STARTED and fault is not Fault.LOCK_LOST
    return Reaction(roll, save, Raise.LEFT if is_exception else Raise.AS_IS)


def test_the_failure_policy_is_the_one_the_commit_had_before_its_tables() -> None:
    """Every (work's failure kind, fault, entry, journal state, rollback option): the
    refactor changed no failure's reaction (what is rolled back, what is stored, what is
    raised), and the work each state needs fails the way it did (the completes roll back,
    the verify, the replace and the finish roll forward)."""
    for on in (OnFailure.ROLL_BACK, OnFailure.ROLL_FORWARD):
        for fault in Fault:
            for entry in (Entry.COMMIT, Entry.RESUME):
                for state in State:
                    for rollback in (True, False):
                        got = reaction(on, fault, entry, state, rollback)
                        want = before_refactor(on, fault, entry, state, rollback)
                        assert got == want, (on, fault, entry, state, rollback)
    back = {w for w, r in RULES.items() if r.on_failure is OnFailure.ROLL_BACK}
    assert back == {Work.START, Work.RESTART, Work.COMPLETE, Work.COMPLETE_REST}
    assert RULES[Work.VERIFY].on_failure is OnFailure.ROLL_FORWARD
    assert RULES[Work.REPLACE].on_failure is OnFailure.ROLL_FORWARD
    # a resume verifies a journal that claims every complete done before anything else
    for state in (State.REPLACING, State.SUCCEEDED):
        for conflict in ConflictMode:
            assert works(Entry.RESUME, state, conflict)[:2] == (Work.LOCK, Work.VERIFY)


@pytest.mark.parametrize("kind", list(S3ALayoutKind))
async def test_an_s3a_job_stored_under_an_upper_case_uuid_is_resumed_by_that_text(
    kind: S3ALayoutKind,
) -> None:
    """An S3A job whose id a user gave in upper case (``fs.s3a.committer.uuid``) is stored
    under exactly that text: the CLI keeps the typed id when such a job is there, and the
    canonical form of it names no job (nothing changed)."""
    from zerorename.testing.s3acrash import lay_out_on

    upper = "3F2A9C1E-6C0B-4D57-9A59-0123456789AB"
    state = MemoryState("bkt")
    await lay_out_on(MemoryStore(state), "s3://bkt/out", upper, kind)
    before_ = dict(state.objects("bkt"))
    _, exc = await cli(state, "resume", "s3://bkt/out", upper.lower())
    assert exc is not None  # no job of that spelling
    assert {k: v for k, v in state.objects("bkt").items() if "__magic_commit" not in k} == before_
    _, exc = await cli(state, "resume", "s3://bkt/out", upper)
    assert exc is None, exc
    assert "out/_SUCCESS" in state.objects("bkt")
    assert not [k for k in state.objects("bkt") if "__magic" in k]


async def test_open_job_refuses_an_s3a_jobs_directory() -> None:
    """The second guard behind the id spelling (attack3): a library caller (or a mis-routed
    command) that opens a Hadoop 3.4 S3A job's directory as a zerorename job is refused, and
    nothing of the S3A job is touched (the plain path would abort and delete by its own
    rules)."""
    from zerorename.committers import CommitterError, MagicCommitter
    from zerorename.testing.memstate import MemoryState
    from zerorename.testing.memstore import MemoryStore

    job = "0b7e4c1d-2f3a-4b5c-8d6e-7f8091a2b3c4"
    state = MemoryState("bkt")
    store = MemoryStore(state)
    record = f"out/__magic_job-{job}/job-{job}/00/task_00.pendingset"
    await store.put_object("bkt", record, b"{}")
    before = dict(state.objects("bkt"))
    with pytest.raises(CommitterError, match="Hadoop S3A magic job's records"):
        await MagicCommitter(store, "s3://bkt/out").open_job(job)
    assert state.objects("bkt") == before
    # a zerorename job's directory without its marker still opens (to resume or abort)
    other = "1b7e4c1d-2f3a-4b5c-8d6e-7f8091a2b3c4"
    await store.put_object("bkt", f"out/__magic_job-{other}/journal.json", b"{}")
    opened = await MagicCommitter(store, "s3://bkt/out").open_job(other)
    assert not opened.kind_recorded


@pytest.mark.parametrize("spell", [str.upper, lambda s: s.replace("-", "")])
async def test_a_stream_batch_job_is_found_by_any_spelling_of_its_id(spell: Any) -> None:
    """The second guard behind the id spelling: the stream lookup compares canonical ids,
    so a batch's job typed in another spelling is still the stream's (never the plain
    zerorename path, which would publish the batch outside its log)."""
    from zerorename.committers import MagicCommitter
    from zerorename.spark_adapter.stream.jobs import find_stream_job
    from zerorename.spark_adapter.stream.log import stream_job_id
    from zerorename.spark_adapter.stream.sink import STREAM_COMMIT, ensure_job
    from zerorename.testing.memstate import MemoryState
    from zerorename.testing.memstore import MemoryStore

    store = MemoryStore(MemoryState("bkt"))
    query = "11111111-2222-4333-8444-555555555555"
    committer = MagicCommitter(store, "s3://bkt/out", options=STREAM_COMMIT)
    job = stream_job_id(query, "token", 0)
    await ensure_job(committer, job, query, 0)
    found = await find_stream_job(store, committer.dest, spell(job))
    assert found is not None and (found.query_id, found.job_id) == (query, job)
    assert await find_stream_job(store, committer.dest, "not-a-uuid") is None
