"""Hostile records, no server: journal/plan/job fields checked one by one, the plan's keys,
the task-side rules on pendingset keys, the same upload twice, and JSON that Python reads
but no record may hold (NaN, 1e400, long ints, deep nesting, bad UTF-8)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zerorename.committers.codec.pending import (
    PendingRecord,
    PendingSetHeader,
    SuccessData,
    pendingset_bytes,
    read_pendingset,
)
from zerorename.committers.codec.validate import (
    Fingerprints,
    UploadSet,
    check_output_key,
    load_json,
)
from zerorename.committers.commit.journal import (
    CommitPlan,
    JobMarker,
    Journal,
    PlannedSet,
    State,
    check_plan,
)
from zerorename.committers.errors import RecordFormatError
from zerorename.committers.paths import Destination, JobLayout
from zerorename.committers.tasks import TaskCommitSummary
from zerorename.engine.results import PartInfo, PendingUpload

JOB = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"
DEST = Destination("bkt", "data/out")
LAYOUT = JobLayout(DEST, JOB)


def journal_dict(**changes: Any) -> dict[str, Any]:
    j = Journal(JOB, State.COMPLETING, watermark=1, window=4, pendingsets_total=3)
    d: dict[str, Any] = json.loads(j.to_json())
    d.update(changes)
    return d


BAD_FIELDS: list[tuple[str, Any]] = [
    ("watermark", "0"),
    ("watermark", 10**30),
    ("watermark", -1),
    ("watermark", 4),  # beyond pendingsets_total
    ("watermark", 1.0),
    ("window", 0),
    ("window", True),
    ("processes", "x"),
    ("processes", 0),
    ("state", "finished"),
    ("state", None),
    ("jobId", "not-a-uuid"),
    ("jobId", 7),
    ("uploads_total", -5),
    ("bytes_total", "10"),
    ("started", "yesterday"),
    ("updated", 10**400),
    ("error", {"x": 1}),
    ("filenames", "a.csv"),
    ("filenames", [1]),
    ("filenames", ["f"] * 101),
    ("retries", -1),
]


@pytest.mark.parametrize(("field", "value"), BAD_FIELDS)
def test_journal_field_by_field(field: str, value: Any) -> None:
    data = json.dumps(journal_dict(**{field: value})).encode()
    with pytest.raises(RecordFormatError, match=rf"s3://bkt/j: journal is malformed: {field}: "):
        Journal.from_json(data, location="s3://bkt/j")


@pytest.mark.parametrize("field", ["state", "watermark", "window", "processes", "jobId"])
def test_journal_missing_field(field: str) -> None:
    d = journal_dict()
    del d[field]
    with pytest.raises(RecordFormatError, match=f"{field}: missing"):
        Journal.from_json(json.dumps(d))


def test_journal_done_states_need_every_pendingset_done() -> None:
    with pytest.raises(RecordFormatError, match="watermark: 1 of 3"):
        Journal.from_json(json.dumps(journal_dict(state="succeeded")))
    ok = Journal.from_json(json.dumps(journal_dict(state="succeeded", watermark=3)))
    assert ok.state is State.SUCCEEDED


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("committer", "rename"),
        ("conflict", "overwrite"),
        ("scope", 3),
        ("created", float("inf")),
        ("jobId", "x"),
    ],
)
def test_job_marker_fields(field: str, value: Any) -> None:
    m = JobMarker(JOB, "magic", "s3://bkt/d", "append", "destination", created=1.0)
    d = json.loads(m.to_json())
    d[field] = value
    with pytest.raises(RecordFormatError, match=f"{field}: |no record may hold"):
        JobMarker.from_json(json.dumps(d))


def plan(*keys: str, attempt: int | None = 0) -> CommitPlan:
    return CommitPlan(JOB, tuple(PlannedSet(k, "t", attempt) for k in keys), "summaries")


def test_plan_names_only_the_jobs_own_pendingsets() -> None:
    own = LAYOUT.pendingsets_dir
    check_plan(plan(own + "00000.pendingset", own + "00001.pendingset"), LAYOUT)
    for bad in (
        own + "../../x.pendingset",
        own + "sub/00000.pendingset",
        own + "00000.pending",
        own + ".pendingset",
        own + "../pendingsets/00000.pendingset",
        "data/out/00000.pendingset",
        "data/other/__magic_job-" + JOB + "/pendingsets/00000.pendingset",
        JobLayout(DEST, "1b4e28ba-2fa1-4d2b-883f-0016d3cca427").pendingsets_dir + "0.pendingset",
    ):
        with pytest.raises(RecordFormatError, match="is not a pendingset of the job"):
            check_plan(plan(bad), LAYOUT)
    with pytest.raises(RecordFormatError, match="listed twice"):
        check_plan(plan(own + "a.pendingset", own + "a.pendingset"), LAYOUT)
    with pytest.raises(RecordFormatError, match="another job"):
        check_plan(CommitPlan("1b4e28ba-2fa1-4d2b-883f-0016d3cca427", (), "listing"), LAYOUT)


@pytest.mark.parametrize(
    "doc",
    [
        {"version": 1, "jobId": JOB, "source": "listing", "pendingsets": {}},
        {"version": 1, "jobId": JOB, "source": "magic", "pendingsets": []},
        {"version": 1, "jobId": JOB, "source": "listing", "pendingsets": [{"key": 1}]},
        {"version": 1, "jobId": JOB, "source": "listing", "pendingsets": [["k"]]},
        {
            "version": 1,
            "jobId": JOB,
            "source": "listing",
            "pendingsets": [{"key": "k", "attempt": -1}],
        },
    ],
)
def test_plan_types(doc: dict[str, Any]) -> None:
    with pytest.raises(RecordFormatError, match="malformed"):
        CommitPlan.from_json(json.dumps(doc))


def record(key: str, upload_id: str = "u1", bucket: str = "bkt") -> PendingRecord:
    up = PendingUpload(bucket, key, upload_id, (PartInfo(1, '"e"', 3),), 3)
    return PendingRecord(up, JOB, "00000", 0)


@pytest.mark.parametrize(
    "key",
    [
        f"data/out/../x-{JOB}.txt",
        f"data/out/__magic_job-{JOB}/journal.json",
        f"data/out/a/__magic/b-{JOB}.txt",
        f"data/out/y-{JOB}.pendingset",
        f"data/out/y-{JOB}.pending",
        f"data/out/a//b-{JOB}.txt",
        f"data/out/./b-{JOB}.txt",
        f"data/out/a/__base/b-{JOB}.txt",
        "data/out/_SUCCESS",
        f"data/out/dir-{JOB}/",
        f"data/outside-{JOB}.txt",
        f"other/x-{JOB}.txt",
    ],
)
def test_pendingset_keys_obey_the_task_rules(key: str) -> None:
    with pytest.raises(RecordFormatError, match=r"s3://bkt/p\.pendingset"):
        check_output_key(record(key), DEST, "s3://bkt/p.pendingset")


def test_pendingset_key_in_the_destination_is_accepted() -> None:
    assert check_output_key(record(f"data/out/a=1/f ü-{JOB}.csv"), DEST, "") == (
        f"a=1/f ü-{JOB}.csv"
    )
    with pytest.raises(RecordFormatError, match="outside the destination"):
        check_output_key(record(f"data/out/f-{JOB}.csv", bucket="bkt2"), DEST, "")


def test_the_same_upload_twice() -> None:
    seen = UploadSet()
    seen.add(record("data/out/a", "u1"), "s3://bkt/p1")
    seen.add(record("data/out/b", "u2"), "s3://bkt/p1")
    with pytest.raises(RecordFormatError, match="s3://bkt/data/out/a appears twice"):
        seen.add(record("data/out/a", "u3"), "s3://bkt/p2")
    with pytest.raises(RecordFormatError, match="upload id 'u2'"):
        seen.add(record("data/out/c", "u2"), "s3://bkt/p2")


def test_fingerprints_grow_and_find_every_repeat() -> None:
    fp = Fingerprints(capacity=4)
    assert all(fp.add(i * 0x9E3779B97F4A7C15) for i in range(5000))
    assert len(fp) == 5000
    assert not any(fp.add(i * 0x9E3779B97F4A7C15) for i in range(5000))
    zero = Fingerprints()
    assert zero.add(0) and not zero.add(0) and not zero.add(1)  # 0 is stored as 1


HOSTILE_JSON = [
    b"\xff\xfe{}",
    b'{"a": "\xc3\x28"}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"x": NaN}',
    b'{"x": Infinity}',
    b'{"x": -Infinity}',
    b'{"x": 1e400}',
    b'{"x": ' + b"9" * 5000 + b"}",
]


@pytest.mark.parametrize("data", HOSTILE_JSON, ids=lambda d: repr(d[:12]))
def test_load_json_refuses_what_no_record_holds(data: bytes) -> None:
    with pytest.raises(RecordFormatError, match="s3://bkt/r"):
        load_json(data, "record", "s3://bkt/r")


def _inject(good: bytes, value: bytes) -> bytes:
    """``good`` with its first integer value after '"saved":' replaced by ``value``."""
    at = good.index(b'"saved":') + len(b'"saved":')
    end = at
    while good[end : end + 1].isdigit():
        end += 1
    return good[:at] + value + good[end:]


VALUES = [
    b"NaN",
    b"Infinity",
    b"1e400",
    b"9" * 5000,
    b"9" * 400,
    b"-1",
    b"[" * 50_000 + b"]" * 50_000,
    b'"\xff"',
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: repr(v[:10]))
def test_every_parser_turns_hostile_values_into_the_record_error(value: bytes) -> None:
    up = PendingUpload("bkt", "data/out/k", "u", (PartInfo(1, '"e"', 3),), 3, created=1.0)
    rec = PendingRecord(up, JOB, "00000", 0, saved=2.0)
    header = PendingSetHeader(JOB, "00000", 0, saved=2.0)
    success = SuccessData(JOB, "magic", timestamp=3.0)
    docs = {
        "pending": (_inject(rec.to_json().encode(), value), PendingRecord.from_json),
        "success": (
            success.to_json().replace(b'"timestamp": 3000', b'"timestamp": ' + value),
            SuccessData.from_json,
        ),
        "journal": (
            Journal(JOB, window=8).to_json().replace(b'"window": 8', b'"window": ' + value),
            Journal.from_json,
        ),
        "job": (
            JobMarker(JOB, "magic", "s3://b/d", "append", "destination", created=1.0)
            .to_json()
            .replace(b'"created": 1.0', b'"created": ' + value),
            JobMarker.from_json,
        ),
        "plan": (
            plan("k").to_json().replace(b'"attempt": 0', b'"attempt": ' + value),
            CommitPlan.from_json,
        ),
    }
    for name, (data, parse) in docs.items():
        assert value in data, name
        with pytest.raises(RecordFormatError):
            parse(data, location="s3://bkt/r")
    with pytest.raises(RecordFormatError):
        TaskCommitSummary.from_json(
            b'{"job_id":"j","task_id":"1","attempt":'
            + value
            + b',"pendingset":"s3://b/k","files":1,"bytes":1,"uploads":1,"committer":"magic"}'
        )
    # a pendingset: in its header and in a commit, line layout and scanner alike
    good = pendingset_bytes(header, [rec])
    for data in (
        _inject(good, value),
        good.replace(rec.to_json().encode(), _inject(rec.to_json().encode(), value)),
    ):
        assert data != good
        with pytest.raises(RecordFormatError):
            read_pendingset(data, "s3://bkt/p", expect_job_id=JOB)
        with pytest.raises(RecordFormatError):
            read_pendingset(data.replace(b"\n", b" "), "s3://bkt/p", expect_job_id=JOB)


@pytest.mark.parametrize(
    "data",
    [
        b"[" * 50_000 + b"]" * 50_000,
        b'{"version": 1, "partitions": "a=1"}',
        b'{"version": 1, "partitions": ["../a=1"]}',
        b'{"version": 1, "partitions": ["a=1//b=2"]}',
        b'{"version": 1, "partitions": ["not-a-partition"]}',
        b'{"version": 1, "partitions": [1]}',
        b'{"version": 2, "partitions": ["a=1"]}',
        b'{"version": 1, "partitions": ["a=1"], "x": NaN}',
        b"\xff",
    ],
)
def test_partitions_record_refuses_anything_but_partition_directories(data: bytes) -> None:
    from zerorename.committers.commit.storage import parse_partitions_record

    with pytest.raises(RecordFormatError):
        parse_partitions_record(data, "s3://b/d/__magic_job-x/partitions.json")


def test_partitions_record_reads_partition_directories() -> None:
    from zerorename.committers.commit.storage import parse_partitions_record

    data = b'{"version": 1, "partitions": ["a=1", "a=2/b=x y"]}'
    assert parse_partitions_record(data, "loc") == ["a=1", "a=2/b=x y"]
