"""Job-commit state machine, journal/plan/job records, the watermark."""

from __future__ import annotations

import json

import pytest

from zerorename.committers.errors import JournalError, RecordFormatError
from zerorename.committers.journal import (
    CommitPlan,
    JobMarker,
    Journal,
    PlannedSet,
    State,
    Watermark,
    can_abort,
    can_move,
    resume_step,
)

JOB = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"


def test_state_machine() -> None:
    j = Journal(JOB)
    assert j.state is State.STARTED
    j.move(State.COMPLETING)
    j.move(State.COMPLETING)
    j.move(State.REPLACING)
    with pytest.raises(JournalError):
        j.move(State.ROLLING_BACK)  # old files may be gone: roll forward only
    j.move(State.SUCCEEDED)
    with pytest.raises(JournalError):
        j.move(State.COMPLETING)
    assert can_move(State.STARTED, State.ROLLING_BACK)
    assert not can_move(State.ROLLING_BACK, State.COMPLETING)
    assert [s for s in State if can_abort(s)] == [
        State.STARTED,
        State.COMPLETING,
        State.ROLLING_BACK,
    ]
    assert resume_step(State.COMPLETING) == "complete"
    assert resume_step(State.SUCCEEDED) == "cleanup"


def test_journal_roundtrip() -> None:
    j = Journal(
        JOB, watermark=3, window=4, pendingsets_total=5, uploads_total=10, filenames=["a ü"]
    )
    j.move(State.COMPLETING)
    back = Journal.from_json(j.to_json())
    assert back == j
    d = json.loads(j.to_json())
    assert d["version"] == 1 and d["jobId"] == JOB and d["state"] == "completing"
    for bad in (b"{", b'{"version":2}', b'{"version":1,"jobId":"x","state":"weird"}'):
        with pytest.raises(RecordFormatError, match="s3://b/j"):
            Journal.from_json(bad, location="s3://b/j")


def test_plan_and_marker_roundtrip() -> None:
    p = CommitPlan(JOB, (PlannedSet("a/x ü.pendingset", "00001", 0), PlannedSet("b")), "listing")
    assert CommitPlan.from_json(p.to_json()) == p
    m = JobMarker(JOB, "magic", "s3://b/d", "append", "destination", created=1.0, hostname="h")
    assert JobMarker.from_json(m.to_json()) == m
    assert "secret" not in m.to_json().decode().lower()
    with pytest.raises(RecordFormatError):
        JobMarker.from_json(b'{"version":1}')


def test_watermark_bounds_what_can_be_half_done() -> None:
    w = Watermark(0, window=4, total=10)
    assert [i for i in range(10) if w.may_start(i)] == [0, 1, 2, 3]
    w.done(1)
    w.done(2)
    assert w.low == 0 and not w.should_persist()
    w.done(0)
    assert w.low == 3 and w.should_persist()
    w.persisted_at(w.low)
    assert w.may_start(6) and not w.may_start(7)
    for i in range(3, 10):
        w.done(i)
    assert w.low == 10 and w.should_persist()
    w.persisted_at(10)
    assert not w.should_persist()
    with pytest.raises(ValueError):
        Watermark(0, 0, 1)
