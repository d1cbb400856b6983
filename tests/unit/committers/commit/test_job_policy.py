"""The job commit's policy (jobpolicy.py): which work a run does from each state it may
find its journal in, and what a failure there means. Pure: no I/O, no event loop."""

from __future__ import annotations

import asyncio

import pytest

from zerorename.committers.commit.journal import Event, State, can_abort, process_event
from zerorename.committers.commit.lock import DestinationLocked, LockLost
from zerorename.committers.commit.policy import (
    RULES,
    WORK,
    Entry,
    Fault,
    OnFailure,
    Raise,
    Reaction,
    Work,
    fault_of,
    left_behind,
    next_work,
    reaction,
    works,
)
from zerorename.committers.conflict import ConflictMode
from zerorename.committers.errors import (
    ConflictError,
    JobCommitError,
    RecordFormatError,
    RecordNotFound,
)

S, W = State, Work
APPEND, REPLACE, FAIL = ConflictMode.APPEND, ConflictMode.REPLACE, ConflictMode.FAIL

#: the module docstring's rules written out: (entry, state found, conflict) -> the work
EXPECTED = {
    (Entry.COMMIT, S.STARTED, APPEND): (W.START, W.COMPLETE),
    (Entry.COMMIT, S.STARTED, FAIL): (W.START, W.COMPLETE),
    (Entry.COMMIT, S.STARTED, REPLACE): (W.START, W.COMPLETE, W.REPLACE),
    (Entry.RESUME, S.STARTED, APPEND): (W.LOCK, W.RESTART, W.COMPLETE_REST),
    (Entry.RESUME, S.STARTED, REPLACE): (W.LOCK, W.RESTART, W.COMPLETE_REST, W.REPLACE),
    (Entry.RESUME, S.COMPLETING, APPEND): (W.LOCK, W.COMPLETE_REST),
    (Entry.RESUME, S.COMPLETING, REPLACE): (W.LOCK, W.COMPLETE_REST, W.REPLACE),
    (Entry.RESUME, S.REPLACING, REPLACE): (W.LOCK, W.VERIFY, W.REPLACE),
    (Entry.RESUME, S.SUCCEEDED, APPEND): (W.LOCK, W.VERIFY),
    (Entry.RESUME, S.SUCCEEDED, REPLACE): (W.LOCK, W.VERIFY),
}


@pytest.mark.parametrize(("entry", "state", "conflict"), sorted(EXPECTED))
def test_the_work_of_each_entry_and_state(
    entry: Entry, state: State, conflict: ConflictMode
) -> None:
    assert works(entry, state, conflict) == EXPECTED[entry, state, conflict]


def test_a_run_finishes_in_succeeded_and_works_in_no_rolling_back() -> None:
    for entry in (Entry.COMMIT, Entry.RESUME):
        assert next_work(entry, S.SUCCEEDED) is None
        with pytest.raises(ValueError, match="rolling_back"):
            next_work(entry, S.ROLLING_BACK)
        with pytest.raises(ValueError):
            works(entry, S.ROLLING_BACK, APPEND)


def test_each_works_event_is_legal_in_the_state_it_is_done_in() -> None:
    for (_, state), work in WORK.items():
        event = RULES[work].event
        for picked in (Event.COMPLETED, Event.COMPLETED_REPLACING):
            if event is not None:
                process_event(state, picked if event is Event.COMPLETED else event)


def test_work_may_roll_back_exactly_where_the_journal_may_be_aborted() -> None:
    """Rule 4 against the journal's own rule 6: a failure rolls back only in a state from
    which the journal allows ``abort`` (no old file deleted, no _SUCCESS written)."""
    seen = set()
    for (entry, found, conflict), todo in EXPECTED.items():
        state = found
        for work in todo:
            if work is W.LOCK:
                continue
            on = RULES[work].on_failure
            assert (on is OnFailure.ROLL_BACK) == can_abort(state), (entry, found, work)
            seen.add(work)
            event = RULES[work].event
            if event is Event.COMPLETED and conflict is REPLACE:
                event = Event.COMPLETED_REPLACING
            state = process_event(state, event) if event is not None else state
        assert state is S.SUCCEEDED
    assert seen == set(Work) - {W.LOCK}
    assert RULES[W.LOCK].on_failure is OnFailure.RAISE


def lost() -> LockLost:
    return LockLost("fenced", job_id="j", rolled_back=False, state="started")


@pytest.mark.parametrize(
    ("exc", "fault"),
    [
        (RecordFormatError("bad"), Fault.BAD_RECORD),
        (RecordNotFound("gone"), Fault.BAD_RECORD),
        (lost(), Fault.LOCK_LOST),
        (ConflictError("there"), Fault.CONFLICT),
        (DestinationLocked("held", job_id="j", rolled_back=False, state=""), Fault.COMMIT_ERROR),
        (JobCommitError("x", job_id="j", rolled_back=False, state=""), Fault.COMMIT_ERROR),
        (OSError("reset"), Fault.ERROR),
        (asyncio.CancelledError(), Fault.INTERRUPT),
        (KeyboardInterrupt(), Fault.INTERRUPT),
    ],
)
def test_fault_of(exc: BaseException, fault: Fault) -> None:
    assert fault_of(exc) is fault


R = Reaction
BACK, FWD = OnFailure.ROLL_BACK, OnFailure.ROLL_FORWARD


@pytest.mark.parametrize(
    ("on", "fault", "entry", "state", "rollback", "expected"),
    [
        # a bad record: refused; only a fresh commit's own journal records why
        (BACK, Fault.BAD_RECORD, Entry.COMMIT, S.COMPLETING, True, R(False, True, Raise.REFUSED)),
        (BACK, Fault.BAD_RECORD, Entry.COMMIT, S.STARTED, True, R(False, False, Raise.REFUSED)),
        (BACK, Fault.BAD_RECORD, Entry.RESUME, S.COMPLETING, True, R(False, False, Raise.REFUSED)),
        (FWD, Fault.BAD_RECORD, Entry.COMMIT, S.REPLACING, True, R(False, False, Raise.REFUSED)),
        # before the first old file: roll back, or keep a stored journal
        (BACK, Fault.ERROR, Entry.COMMIT, S.COMPLETING, True, R(True, False, Raise.LEFT)),
        (BACK, Fault.CONFLICT, Entry.COMMIT, S.STARTED, True, R(True, False, Raise.LEFT)),
        (BACK, Fault.ERROR, Entry.COMMIT, S.COMPLETING, False, R(False, True, Raise.LEFT)),
        (BACK, Fault.ERROR, Entry.RESUME, S.COMPLETING, False, R(False, True, Raise.LEFT)),
        (BACK, Fault.ERROR, Entry.COMMIT, S.STARTED, False, R(False, False, Raise.LEFT)),
        (BACK, Fault.LOCK_LOST, Entry.COMMIT, S.COMPLETING, False, R(False, False, Raise.LEFT)),
        (BACK, Fault.INTERRUPT, Entry.COMMIT, S.COMPLETING, True, R(False, True, Raise.AS_IS)),
        (BACK, Fault.INTERRUPT, Entry.COMMIT, S.STARTED, True, R(False, False, Raise.AS_IS)),
        # every file complete: the journal keeps the error, resume finishes
        (FWD, Fault.ERROR, Entry.COMMIT, S.REPLACING, True, R(False, True, Raise.RESUME_FINISHES)),
        (FWD, Fault.ERROR, Entry.RESUME, S.SUCCEEDED, False, R(False, True, Raise.RESUME_FINISHES)),
        (FWD, Fault.CONFLICT, Entry.COMMIT, S.REPLACING, True, R(False, True, Raise.AS_IS)),
        (FWD, Fault.COMMIT_ERROR, Entry.RESUME, S.SUCCEEDED, True, R(False, True, Raise.AS_IS)),
        (FWD, Fault.LOCK_LOST, Entry.COMMIT, S.SUCCEEDED, True, R(False, True, Raise.AS_IS)),
        (FWD, Fault.INTERRUPT, Entry.COMMIT, S.SUCCEEDED, True, R(False, True, Raise.AS_IS)),
        # nothing to settle
        (
            OnFailure.RAISE,
            Fault.ERROR,
            Entry.RESUME,
            S.COMPLETING,
            True,
            R(False, False, Raise.AS_IS),
        ),
    ],
)
def test_reaction(
    on: OnFailure, fault: Fault, entry: Entry, state: State, rollback: bool, expected: Reaction
) -> None:
    assert reaction(on, fault, entry, state, rollback) == expected


def test_after_completes_nothing_is_ever_rolled_back() -> None:
    for fault in Fault:
        for entry in Entry:
            for state in State:
                for rollback in (True, False):
                    assert not reaction(FWD, fault, entry, state, rollback).roll_back


def test_what_a_failed_commit_left() -> None:
    assert left_behind(True, Entry.COMMIT, S.COMPLETING).startswith("rolled back")
    assert left_behind(False, Entry.COMMIT, S.STARTED).startswith("nothing of the commit")
    assert left_behind(False, Entry.RESUME, S.STARTED).startswith("left for resume/abort")
    assert left_behind(False, Entry.COMMIT, S.COMPLETING).startswith("left for resume/abort")
