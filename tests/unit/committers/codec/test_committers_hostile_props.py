"""Property tests of the committer record parsers (.pending, .pendingset, _SUCCESS,
journal, plan, job marker, task summary): any JSON, any near-valid record with one field
changed or dropped, and any bytes either parse to a valid record that round-trips, or
raise RecordFormatError; nothing else."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zerorename.committers.codec.pending import (
    PendingRecord,
    PendingSetHeader,
    SuccessData,
    parse_pendingset,
    pendingset_bytes,
    read_pendingset,
)
from zerorename.committers.commit.journal import CommitPlan, JobMarker, Journal, PlannedSet, State
from zerorename.committers.errors import RecordFormatError
from zerorename.committers.tasks import TaskCommitSummary
from zerorename.engine.errors import RecordError
from zerorename.engine.results import PartInfo, PendingUpload

JOB = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()  # NaN and infinities included: json.dumps writes them, no record holds them
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _upload() -> PendingUpload:
    parts = (PartInfo(1, '"a"', 5, "c1"), PartInfo(2, '"b"', 2))
    return PendingUpload(
        "bkt", "d/k ü.csv", "up-1", parts, 7, created=1700000000.123, checksum_algorithm="CRC32C"
    )


GOOD: dict[str, tuple[dict[str, Any], Callable[..., Any]]] = {
    "pending": (
        PendingRecord(
            _upload(), JOB, "00001", 2, saved=1700000001.5, text="t", extra={"a": "b"}
        ).to_dict(),
        PendingRecord.from_json,
    ),
    "success": (
        json.loads(
            SuccessData(
                JOB, "magic", "d", metrics={"files": 1, "f": 0.5}, filenames=["a"], timestamp=5.0
            ).to_json()
        ),
        SuccessData.from_json,
    ),
    "journal": (
        json.loads(
            Journal(
                JOB, State.COMPLETING, watermark=1, pendingsets_total=2, filenames=["x"]
            ).to_json()
        ),
        Journal.from_json,
    ),
    "plan": (
        json.loads(
            CommitPlan(
                JOB, (PlannedSet("k.pendingset", "t", 0), PlannedSet("j")), "listing"
            ).to_json()
        ),
        CommitPlan.from_json,
    ),
    "job": (
        json.loads(
            JobMarker(
                JOB, "staging", "s3://b/d", "fail", "partitions", created=3.0, hostname="h"
            ).to_json()
        ),
        JobMarker.from_json,
    ),
    "summary": (
        TaskCommitSummary(JOB, "00001", 0, "s3://b/k.pendingset", 1, 2, 1, "magic").to_dict(),
        lambda data, location="": TaskCommitSummary.from_json(data),
    ),
}


def _int(v: Any, lo: int = 0) -> bool:
    return type(v) is int and lo <= v < 2**63


def _time(v: Any) -> bool:
    return type(v) is float and math.isfinite(v) and 0 <= v < 253402300800


def _strs(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def valid(value: Any) -> bool:
    """What a parsed record promises its users: every field of its type, in range."""
    if isinstance(value, PendingRecord):
        u = value.upload
        return (
            all(isinstance(x, str) and x for x in (u.bucket, u.key, u.upload_id))
            and isinstance(value.job_id, str)  # empty in S3A's version 2 .pending
            and isinstance(value.task_id, str)
            and sum(p.size for p in u.parts) == u.length
            and _int(u.length)
            and _int(value.attempt)
            and _time(u.created)
            and _time(value.saved)
            and all(_int(p.number, 1) and _int(p.size) and isinstance(p.etag, str) for p in u.parts)
        )
    if isinstance(value, SuccessData):
        return (
            _time(value.timestamp)
            and _strs(value.filenames)
            and all(isinstance(x, str) for x in (value.job_id, value.committer, value.hostname))
            and all(type(m) in (int, float) and math.isfinite(m) for m in value.metrics.values())
        )
    if isinstance(value, Journal):
        counts = (value.uploads_total, value.bytes_total, value.uploads_done, value.retries)
        return (
            isinstance(value.state, State)
            and _int(value.pendingsets_total)
            and _int(value.watermark)
            and value.watermark <= value.pendingsets_total
            and _int(value.window, 1)
            and _int(value.processes, 1)
            and all(_int(c) for c in counts)
            and _time(value.started)
            and _time(value.updated)
            and (value.error is None or isinstance(value.error, str))
            and _strs(value.filenames)
        )
    if isinstance(value, CommitPlan):
        return value.source in ("summaries", "listing") and all(
            isinstance(p.key, str) and p.key and (p.attempt is None or _int(p.attempt))
            for p in value.pendingsets
        )
    if isinstance(value, JobMarker):
        return _time(value.created) and value.committer in (
            "magic",
            "staging",
            "directory",
            "partitioned",
        )
    if isinstance(value, TaskCommitSummary):
        return all(_int(x) for x in (value.attempt, value.files, value.bytes, value.uploads))
    return False


def parse_or_record_error(kind: str, data: bytes) -> Any:
    """Parse; a result must be valid and round-trip through its writer."""
    parse = GOOD[kind][1]
    try:
        value = parse(data, location="s3://bkt/r")
    except RecordFormatError:
        return None
    assert valid(value), value
    again = parse(value.to_json())
    if kind == "success":
        assert again.to_dict() == value.to_dict()
    else:
        assert again == value
    return value


@st.composite
def near_valid(draw: st.DrawFn, kind: str) -> bytes:
    """A valid record of ``kind`` with one member (top-level or one level down) replaced
    by any JSON value, or dropped, or added."""
    d = json.loads(json.dumps(GOOD[kind][0]))
    target = d
    inner = [k for k, v in d.items() if isinstance(v, dict | list) and v]
    if inner and draw(st.booleans()):
        sub = d[draw(st.sampled_from(sorted(inner)))]
        if isinstance(sub, list):
            sub = sub[draw(st.integers(0, len(sub) - 1))]
        if isinstance(sub, dict):
            target = sub
    keys = [*sorted(target), "extra member"]
    key = draw(st.sampled_from(keys))
    if draw(st.integers(0, 4)) == 0:
        target.pop(key, None)
    else:
        target[key] = draw(json_values)
    return json.dumps(d, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


KINDS = sorted(GOOD)


@SETTINGS
@given(st.sampled_from(KINDS), st.data())
def test_near_valid_records_parse_or_raise_the_record_error(kind: str, data: st.DataObject) -> None:
    parse_or_record_error(kind, data.draw(near_valid(kind)))


@SETTINGS
@given(st.sampled_from(KINDS), json_values)
def test_any_json_parses_or_raises_the_record_error(kind: str, value: Any) -> None:
    parse_or_record_error(kind, json.dumps(value).encode("utf-8", "surrogatepass"))


@SETTINGS
@given(st.sampled_from(KINDS), st.binary(max_size=64))
def test_any_bytes_parse_or_raise_the_record_error(kind: str, data: bytes) -> None:
    parse_or_record_error(kind, data)


def test_the_good_records_parse() -> None:
    for kind in KINDS:
        assert parse_or_record_error(kind, json.dumps(GOOD[kind][0]).encode()) is not None, kind


# ------------------------------------------------------------------------- pendingsets
def _pendingset_outcome(data: bytes, chunk: int) -> Any:
    """The result of both readers (in memory, line layout first; streamed in chunks):
    they agree, and either gives records + header or RecordFormatError."""
    try:
        header, records = read_pendingset(data, "s3://bkt/p", expect_job_id=JOB)
        whole: Any = (header, records)
    except RecordFormatError:
        whole = None
    chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)] or [b""]
    try:
        items = list(parse_pendingset(chunks, "s3://bkt/p", expect_job_id=JOB))
        streamed: Any = (items[-1], items[:-1])
    except RecordFormatError:
        streamed = None
    assert (whole is None) == (streamed is None)
    if whole is not None:
        assert whole == streamed
        header, records = whole
        assert _int(header.attempt) and all(valid(r) for r in records)
        again = read_pendingset(pendingset_bytes(header, records), "s3://bkt/p", expect_job_id=JOB)
        assert again == (header, records)
    return whole


@st.composite
def near_valid_pendingset(draw: st.DrawFn) -> bytes:
    header = PendingSetHeader(JOB, "00001", 0, saved=1700000000.0)
    recs = [PendingRecord(_upload(), JOB, "00001", 0, saved=2.0)] * draw(st.integers(0, 2))
    good = pendingset_bytes(header, recs)
    how = draw(st.integers(0, 3))
    if how == 0:  # one member of the header or of a commit replaced
        d = json.loads(good)
        target = d["commits"][0] if d["commits"] and draw(st.booleans()) else d
        target[draw(st.sampled_from(sorted(target)))] = draw(json_values)
        return json.dumps(d).encode("utf-8", "surrogatepass")
    if how == 1:  # cut short
        return good[: draw(st.integers(0, len(good)))]
    if how == 2:  # one byte changed
        at = draw(st.integers(0, len(good) - 1))
        return good[:at] + bytes([draw(st.integers(0, 255))]) + good[at + 1 :]
    return good


@SETTINGS
@given(near_valid_pendingset(), st.integers(1, 64))
def test_pendingsets_parse_or_raise_the_record_error_both_ways(data: bytes, chunk: int) -> None:
    _pendingset_outcome(data, chunk)


@SETTINGS
@given(st.binary(max_size=96), st.integers(1, 16))
def test_any_bytes_as_a_pendingset(data: bytes, chunk: int) -> None:
    _pendingset_outcome(data, chunk)


def test_record_error_is_not_an_engine_error() -> None:
    """The committers' parsers raise their own family (engine RecordError is mapped)."""
    bad = json.dumps({**GOOD["pending"][0], "parts": [{"number": "1"}]})
    with pytest.raises(RecordFormatError) as ei:
        PendingRecord.from_json(bad)
    assert not isinstance(ei.value, RecordError)
