"""Hadoop as the oracle (issue 13): every record zerorename's committers write on a real
server (``.pending``, ``.pendingset``, ``_SUCCESS``) passes Hadoop's own parsing and
``validate()``, and every record Hadoop's serializers write is read by zerorename, its
uploads (made real on the server) completed from their ETags alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from committer_helpers import (
    committer,
    data_objects,
    dest_prefix,
    dest_uri,
    engine_for,
    objects,
    uploads,
    write,
)

from s3a_oracle.oracle import Oracle, s3a_oracle  # noqa: F401 (the fixture)
from zerorename.committers.codec.hadoop import s3a_uri
from zerorename.committers.codec.pending import (
    PendingRecord,
    SuccessData,
    Unchecked,
    read_pendingset,
)
from zerorename.engine.results import PartInfo, PendingUpload
from zerorename.servers.targets import S3Target
from zerorename.units import MiB


def _save(tmp: Path, records: dict[str, bytes]) -> list[Path]:
    """Each record in its own local file (named by its position: keys are odd)."""
    tmp.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, data in enumerate(records.values()):
        p = tmp / f"r{i}"
        p.write_bytes(data)
        paths.append(p)
    return paths


def _assert_valid(oracle: Oracle, kind: str, paths: list[Path]) -> list[str]:
    verdicts = oracle.check(kind, *paths)
    bad = [v.text for v in verdicts if not v.valid]
    assert not bad, f"Hadoop refused zerorename's {kind}: {bad}"
    return [v.text for v in verdicts]


#: every kind on moto; on RGW the magic one (its records carry the ETags RGW answered; what
#: the kinds write around them is zerorename's own)
KINDS_ON = [
    *(
        pytest.param("moto", kind, id=f"moto-{kind}")
        for kind in ["magic", "staging", "partitioned"]
    ),
    pytest.param("rgw", "magic", marks=pytest.mark.rgw, id="rgw-magic"),
]


@pytest.mark.parametrize(("s3", "kind"), KINDS_ON, indirect=["s3"])
async def test_every_record_zerorename_writes_passes_hadoop(
    s3: S3Target,
    kind: str,
    tmp_path: Path,
    s3a_oracle: Oracle,  # noqa: F811
) -> None:
    uri, prefix = dest_uri(s3), dest_prefix(s3)
    pending: dict[str, bytes] = {}
    sets: dict[str, bytes] = {}
    expected: dict[str, bytes] = {}
    async with engine_for(s3) as eng:
        job = await committer(kind, eng, uri, tmp=tmp_path / "staging").setup_job()
        for t in range(2):
            ta = job.task_attempt(t, 0)
            await ta.setup()
            for f in range(2):
                rel = f"k=v {t}/fïle #{f}+%?.csv"
                data = f"task {t} file {f} ü\n".encode() * (t + 1)
                await write(ta, rel, data)
                expected[ta.final_rel(rel)] = data
            # a magic attempt's .pending records exist until its task commit
            pending.update({k: v for k, v in objects(s3, prefix).items() if k.endswith(".pending")})
            await ta.commit()
        sets = {k: v for k, v in objects(s3, prefix).items() if k.endswith(".pendingset")}
        await job.commit()
    assert data_objects(s3, prefix) == expected and uploads(s3, prefix) == []
    success = objects(s3, prefix)[prefix + "_SUCCESS"]

    assert len(sets) == 2
    lines = _assert_valid(s3a_oracle, "pendingset", _save(tmp_path / "sets", sets))
    assert all("version=3" in line and "commits=2" in line for line in lines)
    if kind == "magic":
        assert len(pending) == 4
        lines = _assert_valid(s3a_oracle, "pending", _save(tmp_path / "pending", pending))
        # Hadoop parsed the uri of keys with ' ', '#', '%', '?' and unicode
        keys = sorted(json.loads(v)["destinationKey"] for v in pending.values())
        assert keys == sorted(prefix + k for k in expected)
    else:
        assert pending == {}
    lines = _assert_valid(s3a_oracle, "success", _save(tmp_path / "success", {"s": success}))
    d = json.loads(success)
    assert sorted(d["filenames"]) == sorted("/" + prefix + k for k in expected)
    assert all(type(v) is int for v in d["metrics"].values())
    assert d["iostatistics"]["counters"]["committer_commits_completed"] == 4
    assert d["iostatistics"]["counters"]["committer_bytes_committed"] == sum(
        map(len, expected.values())
    )


def _make_real(s3: S3Target, commit: dict[str, Any], key: str, parts: list[bytes]) -> bytes:
    """Point a Hadoop-written commit at a real upload of ``parts`` under ``key``; returns
    the object's expected content."""
    c = s3.boto3_client()
    upload_id = c.create_multipart_upload(Bucket=s3.bucket, Key=key)["UploadId"]
    etags = [
        c.upload_part(Bucket=s3.bucket, Key=key, UploadId=upload_id, PartNumber=i + 1, Body=body)[
            "ETag"
        ]
        for i, body in enumerate(parts)
    ]
    commit.update(
        bucket=s3.bucket,
        destinationKey=key,
        uri=s3a_uri(s3.bucket, key),
        uploadId=upload_id,
        etags=etags,
        partCount=len(etags),
        length=sum(map(len, parts)),
    )
    return b"".join(parts)


async def test_records_hadoop_writes_are_read_and_complete_from_their_etags(
    s3: S3Target,
    tmp_path: Path,
    s3a_oracle: Oracle,  # noqa: F811
) -> None:
    files = s3a_oracle.gen(tmp_path / "gen")
    # as written: the fields Hadoop's harness set
    single = PendingRecord.from_json(files["pending"].read_bytes(), location="gen .pending")
    assert single.upload.bucket == "my-bucket" and single.upload.upload_id == "upload-0-2~AbCdEf"
    assert single.job_id == "" and single.task_id == "" and single.upload.length == 16 * MiB
    assert len(single.upload.parts) == 2 and single.unchecked == (Unchecked.PART_SIZES,)
    raw_set = files["pendingset"].read_bytes()
    header, recs = read_pendingset(raw_set, "gen .pendingset")
    assert header.job_id == "3f2a9c1e-6c0b-4d57-9a59-0123456789ab" and len(recs) == 3
    assert [r.extra for r in recs] == [{"spark.partition": str(i)} for i in range(3)]
    assert [r.upload.length for r in recs] == [16 * MiB + 1000 * i for i in range(3)]
    success = SuccessData.from_json(files["success"].read_bytes(), location="gen _SUCCESS")
    assert success.committer == "magic" and success.job_id == header.job_id
    assert success.filenames == ["/" + r.upload.key for r in recs]
    assert success.diagnostics["fs.s3a.committer.threads"] == "8"

    # the same set with real uploads on this server: read, then completed from the ETags
    d = json.loads(raw_set)
    prefix = dest_prefix(s3, "hadoop")
    want = {}
    for i, commit in enumerate(d["commits"]):
        parts = [b"a" * (5 * MiB), b"tail %d" % i] if i == 0 else [f"only part {i} ü".encode()]
        key = f"{prefix}part-{i} #%?.csv"
        want[key] = _make_real(s3, commit, key, parts)
    real = json.dumps(d, indent=2).encode()  # Hadoop 3.3's pretty layout
    (tmp_path / "real.pendingset").write_bytes(real)
    assert s3a_oracle.check("pendingset", tmp_path / "real.pendingset")[0].valid
    _, recs = read_pendingset(real, "real .pendingset")
    assert all(r.unchecked == (Unchecked.PART_SIZES,) for r in recs)
    assert data_objects(s3, prefix) == {}
    async with engine_for(s3) as eng:
        result = await eng.complete_many([r.upload for r in recs])
    assert result.ok and result.succeeded == 3
    assert data_objects(s3, prefix) == {k[len(prefix) :]: v for k, v in want.items()}
    assert uploads(s3, prefix) == []


def test_the_oracle_refuses_what_zerorename_0_1_wrote(
    tmp_path: Path,
    s3a_oracle: Oracle,  # noqa: F811
) -> None:
    """The checks above can fail: Hadoop refuses version 1 records, the old _SUCCESS
    name, and a uri with a raw space (why zerorename percent-encodes it)."""
    up = PendingUpload("bkt", "d/a b.csv", "u1", (PartInfo(1, '"e"', 5),), 5, created=1.0)
    new = json.loads(PendingRecord(up, "j", "t", 0, saved=2.0).to_json())
    old = {**new, "version": 1}
    raw_uri = {**new, "uri": "s3a://bkt/d/a b.csv"}
    old_set = {"version": 1, "jobId": "j", "commits": [new]}
    success = json.loads(SuccessData("j", "magic", timestamp=3.0).to_json())
    old_success = {**success, "name": "zerorename.committers.SuccessData/1"}
    files = _save(
        tmp_path,
        {"old": json.dumps(old).encode(), "raw": json.dumps(raw_uri).encode()},
    )
    assert [v.valid for v in s3a_oracle.check("pending", *files)] == [False, False]
    (tmp_path / "s").write_text(json.dumps(old_set))
    assert not s3a_oracle.check("pendingset", tmp_path / "s")[0].valid
    (tmp_path / "ok").write_text(json.dumps(success))
    (tmp_path / "old").write_text(json.dumps(old_success))
    verdicts = s3a_oracle.check("success", tmp_path / "ok", tmp_path / "old")
    assert [v.valid for v in verdicts] == [True, False]
