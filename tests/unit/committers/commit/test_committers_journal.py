"""Journal/plan/job records (the state machine's table: test_journal_table.py; the
completion window: test_window.py)."""

from __future__ import annotations

import json

import pytest

from zerorename.committers.commit.journal import (
    CommitPlan,
    JobMarker,
    Journal,
    PlannedSet,
    State,
)
from zerorename.committers.errors import RecordFormatError

JOB = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"


def test_journal_roundtrip() -> None:
    j = Journal(
        JOB, watermark=3, window=4, pendingsets_total=5, uploads_total=10, filenames=["a ü"]
    )
    j.state = State.COMPLETING
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
