"""S3A interop of the records (issue 13): what S3A writes is read (``.pending`` version 2
with ETags and no part sizes, ``.pendingset`` version 3 pretty or compact with
``commits`` anywhere, S3A's and the manifest committer's ``_SUCCESS``), what zerorename
writes is S3A's format, zerorename 0.1's records stay readable, and every parser turns
any input into a record or a RecordFormatError. Hadoop itself judges the written records
in tests/integration/committers/test_s3a_oracle.py."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zerorename.committers import CommitOptions, MagicCommitter
from zerorename.committers.codec.hadoop import s3a_uri, uri_names
from zerorename.committers.codec.pending import (
    LEGACY_SUCCESS_NAME,
    PENDING_VERSION,
    PENDINGSET_VERSION,
    SUCCESS_NAME,
    PendingRecord,
    PendingSetHeader,
    SuccessData,
    Unchecked,
    parse_pendingset,
    pendingset_bytes,
    read_pendingset,
)
from zerorename.committers.codec.success import key_of_filename, success_filename
from zerorename.committers.commit.scan import unchecked_diagnostics
from zerorename.committers.errors import RecordFormatError
from zerorename.committers.paths import Destination
from zerorename.engine.results import PartInfo, PendingUpload
from zerorename.spark_adapter.success import SuccessInfo
from zerorename.testing.memstore import MemoryState, MemoryStore

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
JOB = "3f2a9c1e-6c0b-4d57-9a59-0123456789ab"
HADOOP_JOB = "job_202601010000_0000"
ETAGS = ['"9b2cf535f27731c974343645a3985328"', '"0cc175b9c0f1b6a831c399e269772661"']
STATS: dict[str, Any] = {
    "counters": {"stream_write_block_uploads": 2, "stream_write_bytes": 16778216},
    "gauges": {"stream_write_block_uploads_pending": 0},
    "minimums": {"object_put_request.min": 41},
    "maximums": {"object_put_request.max": 97},
    "meanstatistics": {"object_put_request.mean": {"samples": 2, "sum": 138}},
}


def s3a_commit(i: int, *, job_id: str = "", task_id: str = "") -> dict[str, Any]:
    """A commit as S3A's magic output stream records it (no part sizes, ids empty)."""
    key = f"tables/events/part-0000{i}-3f2a9c1e-c000.snappy.parquet"
    return {
        "version": 2,
        "filename": None,
        "uri": f"s3a://my-bucket/{key}",
        "uploadId": f"upload-{i}-2~AbCdEf",
        "bucket": "my-bucket",
        "destinationKey": key,
        "created": 1767225600000,
        "saved": 1767225600000,
        "date": "Thu Jan 01 00:00:00 UTC 2026",
        "jobId": job_id,
        "taskId": task_id,
        "text": "",
        "etags": list(ETAGS),
        "extraData": {},
        "iostatistics": STATS,
        "length": 16777216 + 1000 * i,
        "partCount": 2,
    }


def s3a_set(n: int = 3, *, job_id: str = JOB) -> dict[str, Any]:
    commits = [
        {
            **s3a_commit(i, job_id=job_id, task_id=f"attempt_202601010000_0000_m_00000{i}_0"),
            "extraData": {"spark.partition": str(i)},
            "iostatistics": {k: {} for k in STATS},
        }
        for i in range(n)
    ]
    return {"version": 3, "jobId": job_id, "commits": commits, "iostatistics": STATS}


def s3a_success(**changes: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": SUCCESS_NAME,
        "timestamp": 1767225600000,
        "date": "Thu Jan 01 00:00:00 UTC 2026",
        "hostname": "driver-host",
        "committer": "magic",
        "description": "Job committer job_202601010000_0000",
        "jobId": JOB,
        "jobIdSource": "JobID",
        "metrics": {},
        "diagnostics": {"fs.s3a.committer.threads": "8"},
        "filenames": ["/tables/events/part-00000.parquet", "/tables/events/part-00001.parquet"],
        "iostatistics": {
            **STATS,
            "counters": {"committer_commits_completed": 2, "committer_bytes_committed": 99},
        },
    }
    d.update(changes)
    return d


def as_version_1(commit: dict[str, Any]) -> dict[str, Any]:
    """The members that make an S3A commit a zerorename 0.1 one (parts with sizes)."""
    sizes = [5, commit["length"] - 5]
    parts = [
        {"number": i + 1, "etag": e, "size": n}
        for i, (e, n) in enumerate(zip(ETAGS, sizes, strict=True))
    ]
    return {"version": 1, "parts": parts}


def pretty(obj: Any) -> bytes:
    """Hadoop 3.3's layout: Jackson's pretty printer (indented, ' : ')."""
    return json.dumps(obj, indent=2, separators=(",", " : ")).encode()


def compact(obj: Any) -> bytes:
    """Hadoop 3.4's layout: one line."""
    return json.dumps(obj, separators=(",", ":")).encode()


def read_set(data: bytes, *, expect: str | None = None) -> tuple[PendingSetHeader, list[Any]]:
    """Both readers (whole and streamed in small chunks) agree; their result."""
    whole = read_pendingset(data, "s3://b/t.pendingset", expect_job_id=expect)
    chunks = [data[i : i + 7] for i in range(0, len(data), 7)]
    items = list(parse_pendingset(chunks, "s3://b/t.pendingset", expect_job_id=expect))
    assert (items[-1], items[:-1]) == whole
    return whole


# ---------------------------------------------------------------------------- reading S3A
def test_s3a_pending_completes_from_its_etags_and_says_what_was_not_checked() -> None:
    rec = PendingRecord.from_json(compact(s3a_commit(0)), location="s3://b/x.pending")
    u = rec.upload
    assert (u.bucket, u.key, u.upload_id) == (
        "my-bucket",
        "tables/events/part-00000-3f2a9c1e-c000.snappy.parquet",
        "upload-0-2~AbCdEf",
    )
    assert [(p.number, p.etag) for p in u.parts] == [(1, ETAGS[0]), (2, ETAGS[1])]
    assert u.length == 16777216 and rec.job_id == "" and rec.task_id == ""
    nulls = PendingRecord.from_dict({**s3a_commit(0), "jobId": None, "taskId": None})
    assert nulls == rec  # Java's null where S3A set no id
    assert rec.unchecked == (Unchecked.PART_SIZES,)
    # written back: S3A's etags, no invented sizes; read again, the same record
    d = rec.to_dict()
    assert "parts" not in d and d["etags"] == ETAGS and d["version"] == PENDING_VERSION
    assert PendingRecord.from_json(rec.to_json()) == rec


def test_own_pending_has_every_check() -> None:
    parts = (PartInfo(1, '"e"', 5), PartInfo(2, '"f"', 3))
    up = PendingUpload("bkt", "d/k", "u", parts, 8, created=1.5)
    rec = PendingRecord(up, JOB, "t", 0, saved=1.0)
    back = PendingRecord.from_json(rec.to_json())
    assert back.unchecked == () and back.upload == up


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"version": 3}, "version 3 is not supported"),
        ({"version": True}, "version True is not supported"),
        ({"etags": None}, "missing field 'etags'"),
        ({"etags": "x"}, "etags must be a list"),
        ({"etags": []}, "no parts"),
        ({"etags": ["", '"x"']}, "etags must be a list of non-empty strings"),
        ({"etags": [1]}, "etags must be a list of non-empty strings"),
        ({"jobId": 7}, "jobId and taskId must be strings"),
        ({"taskId": 3}, "jobId and taskId must be strings"),
        ({"length": -1}, "length must be"),
        ({"length": 1.5}, "must be integers"),
        ({"uploadId": ""}, "uploadId must be a non-empty string"),
        ({"uri": "s3a://my-bucket/other"}, "does not match bucket and key"),
        ({"uri": ""}, "does not match bucket and key"),
        ({"iostatistics": []}, "iostatistics must be a JSON object"),
        ({"iostatistics": {"counters": {"a": 1.5}}}, "counters must map names to integers"),
        ({"iostatistics": {"meanstatistics": {"m": {"samples": "1"}}}}, "samples and sum"),
        ({"parts": [{"number": 1, "etag": ETAGS[0], "size": 5}]}, "etags and parts disagree"),
        ({"partCount": 3}, "partCount 3 is not the number of parts"),
        ({"partCount": "2"}, "partCount '2' is not the number of parts"),
    ],
)
def test_s3a_pending_refusals(change: dict[str, Any], why: str) -> None:
    d = {**s3a_commit(0), **change}
    with pytest.raises(RecordFormatError, match=why) as ei:
        PendingRecord.from_json(compact(d), location="s3://b/x.pending")
    assert str(ei.value).startswith("s3://b/x.pending: ")


def test_s3a_pending_without_etags_is_refused() -> None:
    d = s3a_commit(0)
    del d["etags"]
    with pytest.raises(RecordFormatError, match="missing field 'etags'"):
        PendingRecord.from_dict(d)


def test_uri_as_hadoop_writes_it() -> None:
    key = 'd/a b/%41#x?y=1/ü€/"q"\\.csv'
    uri = s3a_uri("bkt", key)
    assert " " not in uri and "#" not in uri and "?" not in uri and '"' not in uri
    assert uri.startswith("s3a://bkt/d/a%20b/%2541%23x%3Fy=1/")
    assert uri_names(uri, "bkt", key) and uri_names(f"s3://bkt/{key}", "bkt", key)
    assert not uri_names(uri, "bkt2", key) and not uri_names(uri, "bkt", key + "x")
    assert not uri_names("s3a://bkt/d/%ff", "bkt", "d/\xff")  # not UTF-8: no key
    assert not uri_names("http://bkt/d", "bkt", "d")


@SETTINGS
@given(st.text(min_size=1, max_size=40))
def test_uri_round_trips_any_key(key: str) -> None:
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return  # not a key S3 holds
    uri = s3a_uri("bkt", key)
    assert uri.isascii() and uri_names(uri, "bkt", key)


@pytest.mark.parametrize("layout", [pretty, compact], ids=["pretty-3.3", "compact-3.4"])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_s3a_pendingset_in_any_layout_with_commits_anywhere(layout: Any, where: str) -> None:
    d = s3a_set()
    commits = d.pop("commits")
    items = list(d.items())
    at = {"first": 0, "middle": 1, "last": len(items)}[where]
    items.insert(at, ("commits", commits))
    header, recs = read_set(layout(dict(items)), expect=JOB)
    assert header.job_id == JOB and header.task_id == "" and header.attempt == 0
    assert [r.upload.key for r in recs] == [c["destinationKey"] for c in commits]
    assert all(r.unchecked == (Unchecked.PART_SIZES,) for r in recs)
    assert recs[2].extra == {"spark.partition": "2"} and recs[2].job_id == JOB


def test_s3a_magic_task_set_has_its_job_id_on_the_commits_only() -> None:
    """S3A's magic task commit sets the Hadoop job id on each commit, none on the set."""
    d = s3a_set(2, job_id=HADOOP_JOB)
    d["jobId"] = ""
    header, recs = read_set(compact(d))
    assert header.job_id == "" and {r.job_id for r in recs} == {HADOOP_JOB}
    with pytest.raises(RecordFormatError, match="not to job"):
        read_set(compact(d), expect=HADOOP_JOB)  # a set of no job is no job's to expect
    del d["jobId"]
    assert read_set(compact(d))[0].job_id == ""


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (lambda d: d["commits"].append(dict(d["commits"][0])), "more than one commit"),
        (lambda d: d["commits"][1].update(as_version_1(d["commits"][1])), "commit of version 1"),
        (lambda d: d.update(version=2), "pendingset version 2 is not supported"),
        (lambda d: d.update(version=1), "commit of version 2 in a pendingset"),
        (lambda d: d.update(iostatistics={"counters": []}), "iostatistics counters"),
        (lambda d: d.update(iostatistics=7), "wrong type"),
        (lambda d: d.pop("version"), "no version"),
        (lambda d: d.update(commits={}), "must be an array"),
    ],
)
def test_s3a_pendingset_refusals(mutate: Any, why: str) -> None:
    d = s3a_set()
    mutate(d)
    for layout in (pretty, compact):
        with pytest.raises(RecordFormatError, match=why):
            read_set(layout(d))


def test_commit_versions_checked_when_the_version_comes_last() -> None:
    d = s3a_set(1)
    version = d.pop("version")
    d["version"] = version  # after commits: each commit is judged once it is known
    assert read_set(compact(d))[0].job_id == JOB
    d["version"] = 1
    with pytest.raises(RecordFormatError, match="commit of version 2"):
        read_set(compact(d))


def test_duplicate_destination_across_buckets_and_uploads() -> None:
    d = s3a_set(2)
    d["commits"][1]["destinationKey"] = d["commits"][0]["destinationKey"]
    d["commits"][1]["uri"] = d["commits"][0]["uri"]
    with pytest.raises(RecordFormatError, match=r"commit #2\): destination .* more than one"):
        read_set(compact(d))


# ---------------------------------------------------------------------- zerorename 0.1
V1_PENDING = {
    "version": 1,
    "uri": "s3://bkt/d/a b.csv",
    "bucket": "bkt",
    "destinationKey": "d/a b.csv",
    "uploadId": "u1",
    "created": 1700000000500,
    "saved": 1700000001000,
    "date": "2023-11-14T22:13:21Z",
    "jobId": JOB,
    "taskId": "00003",
    "taskAttempt": 1,
    "text": "zerorename magic committer",
    "etags": ['"a"'],
    "length": 5,
    "checksumAlgorithm": "CRC32C",
    "parts": [{"number": 1, "etag": '"a"', "size": 5, "checksum": "c=="}],
    "extraData": {},
}


def test_version_1_records_stay_readable() -> None:
    rec = PendingRecord.from_dict(V1_PENDING)
    assert rec.unchecked == () and rec.upload.parts[0].checksum == "c=="
    for missing in ("parts", "jobId"):
        with pytest.raises(RecordFormatError, match=f"missing field '{missing}'"):
            PendingRecord.from_dict({k: v for k, v in V1_PENDING.items() if k != missing})
    with pytest.raises(RecordFormatError, match="jobId must be a non-empty string"):
        PendingRecord.from_dict({**V1_PENDING, "jobId": ""})
    v1_set = {"version": 1, "jobId": JOB, "taskId": "00003", "commits": [V1_PENDING]}
    header, recs = read_set(compact(v1_set), expect=JOB)
    assert header.task_id == "00003" and recs == [rec]
    with pytest.raises(RecordFormatError, match="no jobId"):
        read_set(compact({**v1_set, "jobId": ""}))
    # written again, it is S3A's format and the same record
    again = read_set(pendingset_bytes(header, recs), expect=JOB)
    assert again == (header, recs)
    assert json.loads(pendingset_bytes(header, recs))["version"] == PENDINGSET_VERSION


def test_version_1_success_stays_readable() -> None:
    old = {
        "name": LEGACY_SUCCESS_NAME,
        "timestamp": 1700000000000,
        "date": "2023-11-14T22:13:20Z",
        "hostname": "h",
        "committer": "magic",
        "description": "",
        "jobId": JOB,
        "jobIdSource": "zerorename",
        "metrics": {"files": 2, "bytes": 9, "duration_seconds": 1.25},
        "diagnostics": {},
        "filenames": ["a.csv", "d/b.csv"],
    }
    s = SuccessData.from_json(json.dumps(old))
    assert s.metrics["duration_seconds"] == 1.25 and s.filenames == ["a.csv", "d/b.csv"]
    info = SuccessInfo.from_record("s3://bkt/t/_SUCCESS", s, Destination("bkt", "t"))
    assert info.duration_seconds == 1.25 and info.filenames == ["a.csv", "d/b.csv"]
    assert info.files == 2 and info.bytes == 9
    for bad in ({"jobId": ""}, {"metrics": {"f": "1"}}, {"committer": None}):
        with pytest.raises(RecordFormatError):
            SuccessData.from_json(json.dumps({**old, **bad}))


# ----------------------------------------------------------------------------- _SUCCESS
def test_s3a_success_is_read() -> None:
    s = SuccessData.from_json(pretty(s3a_success()), location="s3://my-bucket/t/_SUCCESS")
    assert s.committer == "magic" and s.job_id == JOB and s.success is None
    info = SuccessInfo.from_record("u", s, Destination("my-bucket", "tables/events"))
    assert info.filenames == ["part-00000.parquet", "part-00001.parquet"]
    assert info.files == 2 and info.bytes == 99 and info.duration_seconds == 0.0
    # Java nulls where S3A set nothing; an empty job id (jobId's default in S3A)
    nulls = s3a_success(hostname=None, description=None, jobId="", metrics=None)
    s = SuccessData.from_json(compact(nulls))
    assert s.hostname == "" and s.description == "" and s.job_id == "" and s.metrics == {}


def test_manifest_committer_success_is_read() -> None:
    d = s3a_success(
        committer="org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter",
        filenames=["s3a://my-bucket/tables/events/part-00000", "abfs://c@acct/out/part-1"],
        success=True,
        state="COMMITTED",
        stage="committer_commit_job",
        metrics={"committer_files_committed": 1},
    )
    s = SuccessData.from_json(compact(d))
    assert s.success is True
    info = SuccessInfo.from_record("u", s, Destination("my-bucket", "tables/events"))
    assert info.filenames == ["part-00000", "abfs://c@acct/out/part-1"]
    for bad in ({"success": "yes"}, {"metrics": {"m": 1.5}}, {"name": "other/1"}):
        with pytest.raises(RecordFormatError):
            SuccessData.from_json(compact({**d, **bad}))


def test_success_written_as_s3a_with_counters_under_s3a_names() -> None:
    s = SuccessData(
        JOB,
        "magic",
        "zerorename magic committer",
        timestamp=1767225600.0,
        metrics={
            "files": 3,
            "uploads": 3,
            "bytes": 10,
            "pendingsets": 2,
            "duration_ms": 1500,
            "retries": 1,
            "throttles": 0,
            "ratio": 0.6,
        },
        filenames=[success_filename("t/a b.csv")],
    )
    d = json.loads(s.to_json())
    assert d["name"] == SUCCESS_NAME and d["filenames"] == ["/t/a b.csv"]
    assert all(type(v) is int for v in d["metrics"].values()) and d["metrics"]["ratio"] == 1
    stats = d["iostatistics"]
    assert stats["counters"] == {
        "committer_commits_completed": 3,
        "committer_bytes_committed": 10,
        "committer_tasks_completed": 2,
        "store_io_retry": 1,
        "store_io_throttled": 0,
        "committer_jobs_completed": 1,
        "committer_commit_job": 1,
    }
    assert stats["maximums"] == {"committer_commit_job.max": 1500}
    assert stats["meanstatistics"] == {"committer_commit_job.mean": {"samples": 1, "sum": 1500}}
    back = SuccessData.from_json(s.to_json())
    assert back.to_dict() == s.to_dict() == json.loads(back.to_json())
    assert key_of_filename(back.filenames[0], "bkt") == "t/a b.csv"


def test_filename_forms() -> None:
    assert key_of_filename("/a/b", "bkt") == "a/b"
    assert key_of_filename("s3a://bkt/a/b%20c", "bkt") == "a/b c"
    assert key_of_filename("s3a://other/a", "bkt") is None
    assert key_of_filename("a/b", "bkt") is None and key_of_filename("/", "bkt") is None


# ------------------------------------------------------------------------------- writers
def test_pendingset_written_as_s3a_version_3() -> None:
    ups = [
        PendingUpload(
            "bkt", f"d/{i}.csv", f"u{i}", (PartInfo(1, f'"e{i}"', 4 + i),), 4 + i, created=7.0
        )
        for i in range(3)
    ]
    recs = [PendingRecord(u, JOB, "00001", 2, saved=5.0) for u in ups]
    data = pendingset_bytes(PendingSetHeader(JOB, "00001", 2, saved=6.0), recs)
    d = json.loads(data)
    assert d["version"] == 3 and d["jobId"] == JOB and list(d)[-1] == "commits"
    assert d["iostatistics"]["counters"] == {
        "stream_write_block_uploads": 3,
        "stream_write_bytes": 15,
    }
    for c, u in zip(d["commits"], ups, strict=True):
        assert c["version"] == 2 and c["etags"] == [u.parts[0].etag]
        assert c["uri"] == s3a_uri("bkt", u.key) and c["parts"][0]["size"] == u.length
    assert read_set(data, expect=JOB)[1] == recs


def test_scan_diagnostics_name_what_went_unchecked() -> None:
    assert unchecked_diagnostics(Counter()) == {}
    counts = Counter({Unchecked.PART_SIZES: 3})
    assert unchecked_diagnostics(counts) == {"unchecked: part sizes add up to the length": "3"}


# ---------------------------------------------------------------------- property tests
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _mutate(draw: st.DrawFn, d: dict[str, Any]) -> None:
    """One member of ``d`` or of one object/list one level down replaced, dropped or added."""
    target: Any = d
    inner = [k for k, v in d.items() if isinstance(v, dict | list) and v]
    if inner and draw(st.booleans()):
        sub = d[draw(st.sampled_from(sorted(inner)))]
        if isinstance(sub, list):
            sub = sub[draw(st.integers(0, len(sub) - 1))]
        if isinstance(sub, dict):
            target = sub
    key = draw(st.sampled_from([*sorted(target), "extra member"]))
    if draw(st.integers(0, 4)) == 0:
        target.pop(key, None)
    else:
        target[key] = draw(json_values)


@SETTINGS
@given(st.data())
def test_s3a_pending_parses_or_raises_the_record_error(data: st.DataObject) -> None:
    d = json.loads(json.dumps(s3a_commit(0)))
    _mutate(data.draw, d)
    raw = compact(d) if data.draw(st.booleans()) else pretty(d)
    try:
        rec = PendingRecord.from_json(raw, location="s3://b/x")
    except RecordFormatError:
        return
    assert PendingRecord.from_json(rec.to_json()) == rec
    assert sum(p.size for p in rec.upload.parts) == rec.upload.length


@SETTINGS
@given(st.data(), st.integers(1, 64))
def test_s3a_pendingset_parses_or_raises_the_record_error(data: st.DataObject, chunk: int) -> None:
    d = json.loads(json.dumps(s3a_set(2)))
    _mutate(data.draw, d)
    raw = compact(d) if data.draw(st.booleans()) else pretty(d)
    try:
        whole: Any = read_pendingset(raw, "s3://b/p")
    except RecordFormatError:
        whole = None
    chunks = [raw[i : i + chunk] for i in range(0, len(raw), chunk)]
    try:
        items = list(parse_pendingset(chunks, "s3://b/p"))
        streamed: Any = (items[-1], items[:-1])
    except RecordFormatError:
        streamed = None
    assert whole == streamed
    if whole is not None:
        header, recs = whole
        assert read_pendingset(pendingset_bytes(header, recs), "s3://b/p") == whole


@SETTINGS
@given(st.data(), st.sampled_from(["s3a", "manifest"]))
def test_s3a_success_parses_or_raises_the_record_error(data: st.DataObject, kind: str) -> None:
    d = s3a_success() if kind == "s3a" else s3a_success(success=True, state="COMMITTED")
    d = json.loads(json.dumps(d))
    _mutate(data.draw, d)
    try:
        s = SuccessData.from_json(compact(d), location="s3://b/_SUCCESS")
    except RecordFormatError:
        return
    assert SuccessData.from_json(s.to_json()).to_dict() == s.to_dict()
    assert all(type(v) is int for v in s.to_dict()["metrics"].values())


# ------------------------------------------------------------------- the job-commit scan
async def test_job_commit_of_records_without_part_sizes_says_so(tmp_path: Path) -> None:
    """A pendingset whose commits carry S3A's ETags and no sizes completes, and the
    commit's _SUCCESS says how many records went without the size check."""
    store = MemoryStore(MemoryState("bkt"))
    c = MagicCommitter(store, "s3://bkt/out", options=CommitOptions(staging_dir=tmp_path))
    job = await c.setup_job()
    ta = job.task_attempt(0)
    await ta.setup()
    for i in range(2):
        async with ta.open(f"f{i}.csv") as out:
            await out.write(b"x" * (i + 3))
    summary = await ta.commit()
    dest = Destination.parse(summary.pendingset.rsplit("/__magic", 1)[0])
    key = summary.pendingset.removeprefix("s3://bkt/")
    d = json.loads(await store.get_object("bkt", key))
    for commit in d["commits"]:
        del commit["parts"]
    await store.put_object("bkt", key, json.dumps(d).encode())
    result = await job.commit([summary])
    assert result.files == 2
    success = SuccessData.from_json(await store.get_object("bkt", dest.key("_SUCCESS")))
    assert success.diagnostics["unchecked: part sizes add up to the length"] == "2"
    names = sorted(k for k in success.filenames)
    assert [len(await store.get_object("bkt", n[1:])) for n in names] == [3, 4]
