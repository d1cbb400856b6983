"""The journal's state machine as a table: every legal and illegal (state, event) pair,
and random event sequences (hypothesis). No I/O."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerorename.committers.commit.journal import (
    TRANSITIONS,
    Event,
    Journal,
    State,
    can_abort,
    completed_event,
    process_event,
)
from zerorename.committers.conflict import ConflictMode
from zerorename.committers.errors import JournalError

JOB = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"

S, E = State, Event
#: the rules of journal.py's docstring, written out independently of its table
LEGAL = {
    (S.STARTED, E.SCANNED): S.COMPLETING,
    (S.STARTED, E.ABORT): S.ROLLING_BACK,
    (S.COMPLETING, E.COMPLETED): S.SUCCEEDED,
    (S.COMPLETING, E.COMPLETED_REPLACING): S.REPLACING,
    (S.COMPLETING, E.ABORT): S.ROLLING_BACK,
    (S.REPLACING, E.REPLACED): S.SUCCEEDED,
    (S.ROLLING_BACK, E.ABORT): S.ROLLING_BACK,
}
PAIRS = [(s, e) for s in State for e in Event]


def test_the_table_is_the_rules() -> None:
    assert set(TRANSITIONS) == set(State)
    table = {(s, e): new for s, row in TRANSITIONS.items() for e, new in row.items()}
    assert table == LEGAL


@pytest.mark.parametrize(("state", "event"), [p for p in PAIRS if p in LEGAL])
def test_legal_transition(state: State, event: Event) -> None:
    assert process_event(state, event) is LEGAL[(state, event)]


@pytest.mark.parametrize(("state", "event"), [p for p in PAIRS if p not in LEGAL])
def test_illegal_transition_raises_one_line(state: State, event: Event) -> None:
    with pytest.raises(JournalError) as info:
        process_event(state, event, job_id=JOB)
    msg = str(info.value)
    assert "\n" not in msg and event.value in msg and state.value in msg and JOB in msg


def test_abort_only_before_the_point_of_no_return() -> None:
    assert [s for s in State if can_abort(s)] == [S.STARTED, S.COMPLETING, S.ROLLING_BACK]


def test_completed_event_by_mode() -> None:
    assert completed_event(ConflictMode.REPLACE) is E.COMPLETED_REPLACING
    assert completed_event(ConflictMode.APPEND) is E.COMPLETED
    assert completed_event(ConflictMode.FAIL) is E.COMPLETED


def test_journal_apply_moves_and_keeps_the_rollback_error() -> None:
    j = Journal(JOB, error="old")
    assert j.apply(E.SCANNED) is S.COMPLETING and j.error is None
    j.error = "a complete failed"
    assert j.apply(E.ABORT) is S.ROLLING_BACK and j.error == "a complete failed"
    with pytest.raises(JournalError):
        j.apply(E.SCANNED)
    assert j.state is S.ROLLING_BACK  # a refused event changes nothing


def test_the_default_window_is_commit_options_window() -> None:
    from zerorename.committers.context import DEFAULT_WINDOW, CommitOptions

    assert Journal(JOB).window == CommitOptions().window == DEFAULT_WINDOW


#: how far a state is along the commit (rolling back is a dead end of its own)
RANK = {S.STARTED: 0, S.COMPLETING: 1, S.REPLACING: 2, S.SUCCEEDED: 3, S.ROLLING_BACK: -1}


@given(st.lists(st.sampled_from(list(Event)), max_size=30))
def test_any_event_sequence(events: list[Event]) -> None:
    """Each event moves per the table or raises JournalError (state kept); a commit never
    goes back, never leaves rolling_back, and never rolls back once it passed the point
    of no return; it succeeds only through completing."""
    j = Journal(JOB)
    seen = [j.state]
    for ev in events:
        before = j.state
        try:
            after = j.apply(ev)
        except JournalError:
            assert (before, ev) not in LEGAL and j.state is before
            continue
        assert after is LEGAL[(before, ev)]
        if before is S.ROLLING_BACK:
            assert after is S.ROLLING_BACK
        elif after is S.ROLLING_BACK:
            assert before in (S.STARTED, S.COMPLETING)
        else:
            assert RANK[after] > RANK[before]
        seen.append(after)
    if S.SUCCEEDED in seen:
        assert S.COMPLETING in seen and S.ROLLING_BACK not in seen
