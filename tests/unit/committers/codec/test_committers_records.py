"""Records: .pending, streamed .pendingset, _SUCCESS; corrupt/truncated/versioned input."""

from __future__ import annotations

import json
import random

import pytest

from zerorename.committers.codec.hadoop import s3a_uri, uri_names
from zerorename.committers.codec.jsonstream import (
    ArrayEnd,
    ArrayStart,
    End,
    Item,
    JsonStreamError,
    Member,
    ObjectStreamScanner,
    iter_object_stream,
)
from zerorename.committers.codec.pending import (
    MAX_SUCCESS_FILENAMES,
    PENDING_VERSION,
    PENDINGSET_VERSION,
    SUCCESS_NAME,
    PendingRecord,
    PendingSetHeader,
    PendingSetParser,
    SuccessData,
    encode_pendingset,
    parse_pendingset,
    pendingset_bytes,
)
from zerorename.committers.errors import RecordFormatError
from zerorename.engine.results import PartInfo, PendingUpload

JOB = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"
ODD_KEYS = [
    "d/a b.csv",
    "d/ünï cødé/ß€.txt",
    "d/p%2F+#?&=.bin",
    'd/"quoted"\\x',
    "d/日本語/ファイル",
]


def upload(key: str, n: int = 2) -> PendingUpload:
    parts = tuple(PartInfo(i, f'"{i:032x}"', 5 + i, f"crc{i}==") for i in range(1, n + 1))
    return PendingUpload(
        "bkt",
        key,
        f"upl-{key}",
        parts,
        sum(p.size for p in parts),
        created=1700000000.5,
        checksum_algorithm="CRC32C",
    )


def rec(key: str, n: int = 2) -> PendingRecord:
    return PendingRecord(
        upload(key, n), JOB, "00003", 1, saved=1700000001.0, text="t", extra={"k": "v"}
    )


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_pending_roundtrip_with_odd_keys_and_s3a_names() -> None:
    for key in ODD_KEYS:
        r = rec(key)
        d = json.loads(r.to_json())
        for name in (
            "version",
            "uri",
            "bucket",
            "destinationKey",
            "uploadId",
            "created",
            "saved",
            "date",
            "jobId",
            "taskId",
            "text",
            "etags",
            "length",
            "extraData",
            "parts",
            "checksumAlgorithm",
        ):
            assert name in d
        assert d["version"] == PENDING_VERSION == 2
        assert d["destinationKey"] == key and d["uri"] == s3a_uri("bkt", key)
        assert uri_names(d["uri"], "bkt", key) and uri_names(f"s3://bkt/{key}", "bkt", key)
        if '"' not in key and "\\" not in key:
            assert f'"destinationKey":"{key}"' in r.to_json()  # not escaped to \\u sequences
        back = PendingRecord.from_json(r.to_json())
        assert back.upload == r.upload and back.job_id == JOB and back.attempt == 1
        assert back.extra == {"k": "v"}


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(version=99),
        lambda d: d.pop("uploadId"),
        lambda d: d.update(length=d["length"] + 1),
        lambda d: d.update(etags=["x"]),
        lambda d: d.update(parts=[]),
        lambda d: d.update(parts="nope"),
        lambda d: d.update(uri="s3://other/key"),
        lambda d: d.update(bucket=""),
        lambda d: d.update(created="yesterday"),
        lambda d: d.update(taskAttempt=-1),
    ],
)
def test_pending_rejects_bad_records(mutate) -> None:  # type: ignore[no-untyped-def]
    d = rec("k").to_dict()
    mutate(d)
    with pytest.raises(RecordFormatError) as ei:
        PendingRecord.from_dict(d, location="s3://bkt/x.pending")
    assert "s3://bkt/x.pending" in str(ei.value)


def test_pending_rejects_non_json() -> None:
    with pytest.raises(RecordFormatError, match=r"s3://b/k\.pending"):
        PendingRecord.from_json(rec("k").to_json()[:-5], location="s3://b/k.pending")


def make_set(n: int) -> bytes:
    header = PendingSetHeader(JOB, "00003", 2, saved=1700000002.0, extra={"a": "b"})
    return pendingset_bytes(header, (rec(f"d/{i} ü #{i}.csv", 1 + i % 3) for i in range(n)))


def read_all(data: bytes, size: int) -> tuple[list[PendingRecord], PendingSetHeader]:
    out: list[PendingRecord] = []
    header = None
    for item in parse_pendingset(chunked(data, size), "s3://bkt/x.pendingset", expect_job_id=JOB):
        if isinstance(item, PendingRecord):
            out.append(item)
        else:
            header = item
    assert header is not None
    return out, header


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096, 1 << 20])
def test_pendingset_is_json_and_streams_at_any_chunk_size(chunk: int) -> None:
    data = make_set(50)
    whole = json.loads(data)  # plain JSON, header first, commits last
    assert list(whole)[-1] == "commits" and len(whole["commits"]) == 50
    assert whole["jobId"] == JOB and whole["version"] == PENDINGSET_VERSION == 3
    assert all(c["version"] == PENDING_VERSION for c in whole["commits"])
    recs, header = read_all(data, chunk)
    assert [r.upload.key for r in recs] == [f"d/{i} ü #{i}.csv" for i in range(50)]
    assert header.task_id == "00003" and header.attempt == 2 and header.extra == {"a": "b"}


def test_empty_pendingset() -> None:
    recs, header = read_all(make_set(0), 3)
    assert recs == [] and header.job_id == JOB


def test_pendingset_reader_does_not_hold_the_file() -> None:
    # the scanner's buffer stays small however long the commits array is
    data = make_set(3000)
    sc = ObjectStreamScanner("commits")
    peak = 0
    items = 0
    for c in chunked(data, 8192):
        sc.feed(c)
        for ev in sc.events():
            items += isinstance(ev, Item)
        peak = max(peak, len(sc._buf))
    sc.close()
    items += sum(isinstance(ev, Item) for ev in sc.events())
    assert items == 3000
    assert len(data) > 1_000_000 and peak < 200_000


def test_truncated_pendingset_fails_at_every_cut() -> None:
    data = make_set(4)
    rng = random.Random(7)
    cuts = sorted({rng.randrange(1, len(data) - 2) for _ in range(60)} | {len(data) - 3})
    for cut in cuts:
        with pytest.raises(RecordFormatError, match=r"s3://bkt/x\.pendingset"):
            read_all(data[:cut], 64)


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda s: s.replace(b'"version":3,', b'"version":7,', 1),
        lambda s: s.replace(b'"version":2,', b'"version":1,', 1),
        lambda s: s.replace(JOB.encode(), b"11111111-2222-4333-8444-555555555555", 1),
        lambda s: s.replace(b"uploadId", b"uploadID", 1),
        lambda s: s.replace(b'"commits":[', b'"commits":{', 1),
        lambda s: s + b"garbage",
        lambda s: s.replace(b"},\n{", b"}\n{", 1),
        lambda s: b"\xff\xfe" + s,
        lambda s: s.replace(b'"taskId":"00003",', b'"taskId":"00003","taskId":"x",', 1),
        lambda s: s[: s.index(b'"commits"')] + b'"x":1}',
    ],
)
def test_corrupt_pendingset_is_refused(corrupt) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RecordFormatError) as ei:
        read_all(corrupt(make_set(3)), 16)
    assert ei.value.location.startswith("s3://bkt/x.pendingset")


def test_parser_events_and_members_after_commits() -> None:
    data = b'{"commits":[{"a":1},[2],3] , "version" : 1, "jobId":"j", "n": 12}'
    evs = list(iter_object_stream(chunked(data, 5), "commits"))
    assert evs == [
        ArrayStart("commits"),
        Item({"a": 1}),
        Item([2]),
        Item(3),
        ArrayEnd("commits", 3),
        Member("version", 1),
        Member("jobId", "j"),
        Member("n", 12),
        End(),
    ]
    p = PendingSetParser("loc")
    with pytest.raises(RecordFormatError):
        for ev in iter_object_stream([b'{"version":1,"jobId":"j","commits":[]}'], "commits"):
            p.handle(ev)
        p.handle(Item({"version": 1}))


def test_scanner_errors() -> None:
    for bad in (b"[]", b'{"a" 1}', b'{"a":1', b'{"a":tru}', b"", b'{"commits":[1,]}'):
        with pytest.raises(JsonStreamError):
            list(iter_object_stream(chunked(bad, 2) or [b""], "commits"))
    sc = ObjectStreamScanner("commits", max_value_chars=100)
    sc.feed(b'{"a":"' + b"x" * 1000)
    with pytest.raises(JsonStreamError, match="longer than"):
        list(sc.events())


def test_encode_is_incremental() -> None:
    header = PendingSetHeader(JOB, "t", 0)
    chunks = list(encode_pendingset(header, (rec(f"k{i}") for i in range(3))))
    assert len(chunks) == 5


def test_success_roundtrip_and_limits() -> None:
    s = SuccessData(
        job_id=JOB,
        committer="magic",
        description="d",
        metrics={"files": 3, "bytes": 10, "duration_ms": 1500},
        diagnostics={"conflict": "append"},
        filenames=[f"f{i} ü" for i in range(150)],
    )
    d = json.loads(s.to_json())
    for name in (
        "name",
        "timestamp",
        "date",
        "hostname",
        "committer",
        "description",
        "jobId",
        "jobIdSource",
        "metrics",
        "diagnostics",
        "filenames",
        "iostatistics",
    ):
        assert name in d
    assert d["name"] == SUCCESS_NAME == "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
    assert len(d["filenames"]) == MAX_SUCCESS_FILENAMES
    back = SuccessData.from_json(s.to_json())
    assert back.metrics == s.metrics and back.filenames[0] == "f0 ü"
    for bad in (b"", b"{}", b'{"name":"other"}', b"[1]"):
        with pytest.raises(RecordFormatError, match="s3://b/_SUCCESS"):
            SuccessData.from_json(bad, location="s3://b/_SUCCESS")
