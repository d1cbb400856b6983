"""Crashed Hadoop 3.3 S3A magic jobs, found, shown, finished and rolled back by `zerorename
jobs` on moto and Ceph RGW. Hadoop 3.3 keeps every job of a destination in ONE shared
directory, ``dest/__magic/``, each job under ``job-<uuid>/`` (3.3.1-3.3.4: its records right
there; later 3.3 releases: in ``<NN>/`` attempt directories, as 3.4 does inside its own
``__magic_job-<uuid>/``). Two 3.3 jobs crashed side by side, one of each shape, and a 3.4
job next to them; the records are Hadoop's (``s3a-oracle gen``, its serializers) with real
uploads, checked again by Hadoop's classes once written. After each command the whole
bucket is compared: the job's own records, outputs and uploads changed as the command
says, nothing of anyone else's touched, and ``__magic/`` removed only with the last job in
it. Bad records, a target outside the destination or in another job's directory, and an id
in both layouts change nothing and give one line."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from committer_helpers import bucket_state, dest_prefix, dest_uri
from test_s3a_jobs import (  # the records Hadoop writes, and how the S3A tests plant them
    _commit,
    _pendingset,
    _put,
    _upload,
    cli,
    s3a_oracle,
    s3a_records,
)

from cli_helpers import check_document
from zerorename.committers.codec.hadoop import s3a_uri
from zerorename.servers.targets import S3Target

__all__ = ["s3a_oracle", "s3a_records"]  # fixtures the tests here use

FLAT_JOB = "3f2a9c1e-6c0b-4d57-9a59-0123456789ab"  # Hadoop 3.3.1-3.3.4: no <NN>/
NN_JOB = "9d7c1b2a-1111-4222-8333-444455556666"  # later 3.3: <NN>/ attempt directories
NEW_JOB = "5e6f7a8b-2222-4333-8444-555566667777"  # Hadoop 3.4, beside them
TASKS = ("task_202601010000_0000_m_000000", "task_202601010000_0000_m_000001")
OPEN = "attempt_202601010000_0000_m_000002_0"
#: on moto only (the side-by-side test and one bad record run on RGW too)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)


@dataclass
class Job:
    """One crashed S3A job on a server: its directory, outputs and uploads."""

    job: str
    root: str  # its own directory, ending in '/'
    outputs: dict[str, bytes] = field(default_factory=dict)  # key -> bytes, committed tasks'
    completed: set[str] = field(default_factory=set)  # what its dying commit completed
    uploads: set[str] = field(default_factory=set)  # upload ids its records name

    def of(self, state: tuple[dict[str, bytes], list[tuple[str, str]]]) -> Any:
        """This job's part of a bucket state: its directory, outputs and uploads."""
        objs, ups = state
        return (
            {k: v for k, v in objs.items() if k.startswith(self.root) or self.job in k},
            sorted(u for u in ups if u[1] in self.uploads),
        )


def lay_job(
    s3: S3Target, recs: dict[str, Any], job: str, shape: str, tmp: Path | None = None
) -> Job:
    """A crashed job in ``shape`` (``3.3``: flat, ``3.3-nn``: attempt dirs, ``3.4``): its
    first task's uploads completed by the commit that died, the second's pending, a third
    task attempt that never committed (its ``.pending`` and the magic stream's 0-byte
    file). ``tmp``: also have Hadoop's classes check each record written."""
    c = s3.boto3_client()
    b = s3.bucket
    dest = dest_prefix(s3)
    if shape == "3.4":
        root = f"{dest}__magic_job-{job}/"
        attempt = f"{root}job-{job}/00/"
    else:
        _put(c, b, f"{dest}__magic/", b"")  # the shared directory's marker (mkdirs)
        root = f"{dest}__magic/job-{job}/"
        attempt = root if shape == "3.3" else f"{root}00/"
    st = Job(job, root)
    _put(c, b, attempt, b"")  # setupJob's directory
    template = recs["pendingset"]["commits"][0]
    names = {
        TASKS[0]: [f"part-00000-{job}-c000.parquet", f"dätä #+%/part 00001-{job}.parquet"],
        TASKS[1]: [f"day=2/part-00002-{job}-c000.parquet"],
    }
    for i, task in enumerate(TASKS):
        commits = []
        for rel in names[task]:
            key = dest + rel
            chunks = [f"{job} {rel}".encode()]
            uid, etags = _upload(c, b, key, chunks)
            commits.append(commit33(template, b, key, uid, etags, len(chunks[0]), job))
            st.outputs[key] = chunks[0]
            st.uploads.add(uid)
            if i == 0:
                parts = [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]
                c.complete_multipart_upload(
                    Bucket=b, Key=key, UploadId=uid, MultipartUpload={"Parts": parts}
                )
                st.completed.add(key)
        text = _pendingset(recs, job, commits, pretty=i == 1)  # 3.3 wrote indented JSON
        _put(c, b, f"{attempt}{task}.pendingset", text)
        if tmp is not None:
            (tmp / f"{job}-{task}.pendingset").write_text(text)
    rel = f"part-00003-{job}-never-committed.parquet"
    uid, etags = _upload(c, b, dest + rel, [b"never committed"])
    st.uploads.add(uid)
    one = json.dumps(commit33(recs["pending"], b, dest + rel, uid, etags, 15, job))
    _put(c, b, f"{attempt}tasks/{OPEN}/__base/{rel}.pending", one)
    _put(c, b, f"{attempt}tasks/{OPEN}/__base/{rel}", b"")
    if tmp is not None:
        (tmp / f"{job}.pending").write_text(one)
    return st


def commit33(
    template: dict[str, Any], bucket: str, key: str, uid: str, etags: list[str], n: int, job: str
) -> dict[str, Any]:
    """Hadoop's record for one upload of ``job``, its ``uri`` percent-encoded as Hadoop's
    Path writes it (java.net.URI refuses a raw space or '#')."""
    rec = _commit(template, bucket, key, uid, etags, n)
    return dict(rec, uri=s3a_uri(bucket, key), jobId=job)


def magic_keys(s3: S3Target) -> list[str]:
    return sorted(k for k in bucket_state(s3)[0] if k.startswith(dest_prefix(s3) + "__magic/"))


@pytest.mark.parametrize("s3", ["moto", pytest.param("rgw", marks=pytest.mark.rgw)], indirect=True)
def test_two_33_jobs_and_a_34_job_side_by_side(
    s3: S3Target, s3a_records: dict[str, Any], aws_env: list[str], capsys: Any, tmp_path: Path
) -> None:
    flat = lay_job(s3, s3a_records, FLAT_JOB, "3.3", tmp_path)
    nn = lay_job(s3, s3a_records, NN_JOB, "3.3-nn")
    new = lay_job(s3, s3a_records, NEW_JOB, "3.4")
    oracle = s3a_records["oracle"]
    for kind, ext in (("pendingset", ".pendingset"), ("pending", ".pending")):
        for verdict in oracle.check(kind, *sorted(tmp_path.glob(f"*{ext}"))):
            assert verdict.valid, verdict.text  # the records as planted are Hadoop's
    uri = dest_uri(s3)

    # list: all three, the 3.3 ones said to be in __magic/
    code, out, err = cli(capsys, "jobs", "list", uri, "--json", *aws_env)
    assert code == 0, err
    jobs = {j["jobId"]: j for j in check_document(out)["jobs"]}
    assert set(jobs) == {FLAT_JOB, NN_JOB, NEW_JOB}
    assert {j["kind"] for j in jobs.values()} == {"s3a/magic"}
    for job in (FLAT_JOB, NN_JOB):
        assert jobs[job]["state"] == (
            "2 committed tasks, 1 open task records, in __magic/ (Hadoop 3.3)"
        )
    assert jobs[NEW_JOB]["state"] == "2 committed tasks, 1 open task records"  # as before

    # show: where it is, what is completed and pending; reads only
    before = bucket_state(s3)
    code, out, err = cli(capsys, "jobs", "show", uri, FLAT_JOB, "--json", *aws_env)
    assert code == 0, err
    doc = check_document(out)
    job = doc["job"]
    assert (doc["kind"], job["layout"], job["attempts"]) == ("s3a/magic", "hadoop-3.3", [])
    assert job["directory"] == f"s3://{s3.bucket}/{flat.root}"
    assert job["uploads"] == {"pending": 1, "completed": 2, "missing": 0}
    assert job["otherPendingUploadsUnderDestination"] == 4  # the other two jobs' 2 each
    code, out, err = cli(capsys, "jobs", "show", uri, NN_JOB, "--json", *aws_env)
    assert code == 0 and check_document(out)["job"]["attempts"] == ["00"], err
    code, out, err = cli(capsys, "jobs", "show", uri, NEW_JOB, "--json", *aws_env)
    assert code == 0 and "layout" not in check_document(out)["job"], err
    assert bucket_state(s3) == before

    # resume the flat one: exactly its output, no record of it left, the others untouched
    code, out, err = cli(capsys, "jobs", "resume", uri, FLAT_JOB, *aws_env)
    assert code == 0, err
    assert "3 files" in out and "1 completed now, 2 were already" in out
    after = bucket_state(s3)
    mine, ups = flat.of(after)
    assert {k: v for k, v in mine.items()} == flat.outputs and ups == []
    assert json.loads(after[0][dest_prefix(s3) + "_SUCCESS"])["jobId"] == FLAT_JOB
    assert nn.of(after) == nn.of(before) and new.of(after) == new.of(before)
    assert dest_prefix(s3) + "__magic/" in after[0]  # the NN job is still in it

    # abort the other 3.3 job: its uploads aborted, its completed objects kept and named
    before = bucket_state(s3)
    code, out, err = cli(capsys, "jobs", "abort", uri, NN_JOB, "--json", *aws_env)
    assert code == 0, err
    doc = check_document(out)
    assert (doc["kind"], doc["rolledBack"], doc["uploadsAborted"]) == ("s3a/magic", True, 2)
    assert sorted(doc["kept"]) == sorted(f"s3://{s3.bucket}/{k}" for k in nn.completed)
    after = bucket_state(s3)
    mine, ups = nn.of(after)
    assert mine == {k: nn.outputs[k] for k in nn.completed} and ups == []
    assert flat.of(after) == flat.of(before) and new.of(after) == new.of(before)
    assert magic_keys(s3) == []  # the last 3.3 job gone, so is __magic/

    code, out, err = cli(capsys, "jobs", "list", uri, "--json", *aws_env)
    assert [j["jobId"] for j in check_document(out)["jobs"]] == [NEW_JOB]


@MOTO
def test_aborting_one_33_job_keeps_the_other_and_the_shared_directory(
    s3: S3Target, s3a_records: dict[str, Any], aws_env: list[str], capsys: Any
) -> None:
    flat = lay_job(s3, s3a_records, FLAT_JOB, "3.3")
    nn = lay_job(s3, s3a_records, NN_JOB, "3.3-nn")
    before = bucket_state(s3)
    code, out, err = cli(capsys, "jobs", "abort", dest_uri(s3), FLAT_JOB, *aws_env)
    assert code == 0, err
    assert f"S3A job {FLAT_JOB} aborted: 2 uploads aborted" in out
    after = bucket_state(s3)
    mine, ups = flat.of(after)
    assert mine == {k: flat.outputs[k] for k in flat.completed} and ups == []
    assert nn.of(after) == nn.of(before)
    assert dest_prefix(s3) + "__magic/" in after[0]
    assert sorted(k for k in after[0] if k.startswith(nn.root)) == sorted(
        k for k in before[0] if k.startswith(nn.root)
    )


def _bad(s3: S3Target, recs: dict[str, Any], plant: str) -> str:
    """A pendingset of ``FLAT_JOB`` that must refuse the command."""
    template = recs["pendingset"]["commits"][0]
    b = s3.bucket
    if plant == "outside":  # a sibling destination that shares the prefix's letters
        key = dest_prefix(s3, "out10") + "stolen.parquet"
        return _pendingset(
            recs, FLAT_JOB, [_commit(template, b, key, "u", ['"x"'], 1)], pretty=True
        )
    if plant == "in-other-job":  # a target inside the other job's 3.3 directory
        key = f"{dest_prefix(s3)}__magic/job-{NN_JOB}/00/part-0.parquet"
        return _pendingset(
            recs, FLAT_JOB, [_commit(template, b, key, "u", ['"x"'], 1)], pretty=True
        )
    if plant == "other-job":  # the other job's record, in this job's directory
        key = dest_prefix(s3) + "theirs.parquet"
        return _pendingset(recs, NN_JOB, [_commit(template, b, key, "u", ['"x"'], 1)], pretty=True)
    return '{"version": 3, "commits": ['


BAD = [
    ("resume", "outside", "outside the destination"),
    ("abort", "outside", "outside the destination"),
    ("abort", "in-other-job", "magic directory"),
    ("resume", "other-job", "belongs to job"),
    ("abort", "other-job", "belongs to job"),
    ("abort", "garbage", "t9.pendingset"),
]


#: every bad record on moto, the first on RGW too (the same reads, judged by no server)
BAD_ON = [
    *(pytest.param("moto", *bad, id="moto-" + "-".join(bad[:2])) for bad in BAD),
    pytest.param("rgw", *BAD[0], marks=pytest.mark.rgw, id="rgw-resume-outside"),
]


@pytest.mark.parametrize(("s3", "command", "plant", "says"), BAD_ON, indirect=["s3"])
def test_a_bad_33_record_changes_nothing(
    s3: S3Target,
    s3a_records: dict[str, Any],
    aws_env: list[str],
    capsys: Any,
    command: str,
    plant: str,
    says: str,
) -> None:
    lay_job(s3, s3a_records, FLAT_JOB, "3.3")
    lay_job(s3, s3a_records, NN_JOB, "3.3-nn")
    _put(
        s3.boto3_client(),
        s3.bucket,
        f"{dest_prefix(s3)}__magic/job-{FLAT_JOB}/t9.pendingset",
        _bad(s3, s3a_records, plant),
    )
    before = bucket_state(s3)
    code, out, err = cli(capsys, "jobs", command, dest_uri(s3), FLAT_JOB, *aws_env)
    assert code == 1 and out == "", err
    assert err.startswith("zerorename: error: ") and err.count("\n") == 1 and says in err
    assert bucket_state(s3) == before


@MOTO
def test_an_id_in_both_layouts_changes_nothing(
    s3: S3Target, s3a_records: dict[str, Any], aws_env: list[str], capsys: Any
) -> None:
    """The same job id as Hadoop 3.3's ``__magic/job-<id>/`` and 3.4's
    ``__magic_job-<id>/``: which job a command means cannot be told, so none acts."""
    lay_job(s3, s3a_records, FLAT_JOB, "3.3")
    lay_job(s3, s3a_records, FLAT_JOB, "3.4")
    before = bucket_state(s3)
    for command in ("show", "resume", "abort"):
        code, out, err = cli(capsys, "jobs", command, dest_uri(s3), FLAT_JOB, "--json", *aws_env)
        assert code == 1 and out == "" and err.count("\n") == 1, (command, err)
        assert "which one is meant cannot be told" in err and "__magic/job-" in err
    assert bucket_state(s3) == before


@MOTO
def test_a_committed_33_job_is_never_rolled_back(
    s3: S3Target, s3a_records: dict[str, Any], aws_env: list[str], capsys: Any
) -> None:
    """Its commit completed everything and wrote _SUCCESS, its cleanup died (Hadoop 3.3
    deletes the whole ``__magic/`` then; here it did not get there): abort refuses and
    changes nothing; resume deletes only its own directory, the other job's stays."""
    flat = lay_job(s3, s3a_records, FLAT_JOB, "3.3")
    nn = lay_job(s3, s3a_records, NN_JOB, "3.3-nn")
    code, _, err = cli(capsys, "jobs", "resume", dest_uri(s3), FLAT_JOB, *aws_env)
    assert code == 0, err
    _put(s3.boto3_client(), s3.bucket, flat.root, b"")  # its directory, left again
    before = bucket_state(s3)
    code, out, err = cli(capsys, "jobs", "abort", dest_uri(s3), FLAT_JOB, *aws_env)
    assert code == 1 and out == "" and "committed" in err and err.count("\n") == 1
    assert bucket_state(s3) == before
    code, out, err = cli(capsys, "jobs", "resume", dest_uri(s3), FLAT_JOB, *aws_env)
    assert code == 0, err
    after = bucket_state(s3)
    assert flat.of(after)[0] == flat.outputs
    assert nn.of(after) == nn.of(before) and dest_prefix(s3) + "__magic/" in after[0]
