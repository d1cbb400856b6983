"""A crashed Hadoop S3A magic job, finished or rolled back by `zerorename jobs`, on moto and
Ceph RGW. The records are Hadoop's own (``s3a-oracle gen``: its serializers), their upload
ids replaced by real uploads on the server; the job commit "crashed" after completing half
of them. Around it: another S3A job in the same destination, the same job id in a sibling
destination, an unrelated object and a pending upload no record names. After each command
the whole bucket is compared: exactly the job's output (resume) or none of it (abort),
nothing of anyone else's touched."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from committer_helpers import bucket_state, committer, dest_prefix, dest_uri, engine_for

from s3a_oracle import oracle as s3a_oracle_module
from zerorename.cli.jobs import main
from zerorename.committers.codec.success import SuccessData
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)

#: Hadoop's record classes, compiled once per session (skips only without a JDK)
s3a_oracle = s3a_oracle_module.s3a_oracle
Oracle = s3a_oracle_module.Oracle

JOB = "3f2a9c1e-6c0b-4d57-9a59-0123456789ab"  # the job id in the oracle's records
OTHER = "9d7c1b2a-1111-4222-8333-444455556666"
TASKS = ("task_202601010000_0000_m_000000", "task_202601010000_0000_m_000001")
OPEN_ATTEMPT = "attempt_202601010000_0000_m_000002_0"
#: output (relative to the destination) -> its parts; task 0's two were completed by the
#: crashed job commit, task 1's were not
OUTPUTS = {
    TASKS[0]: {
        f"part-00000-{JOB}-c000.snappy.parquet": [b"a" * (5 * MiB), b"tail of part 0"],
        "dätä/part 00001 #+%.parquet": [b"one part only"],
    },
    TASKS[1]: {
        f"part-00002-{JOB}-c000.snappy.parquet": [b"task one, file two"],
        "day=2/part-00003.parquet": [b"partitioned output"],
    },
}
OPEN_OUTPUT = "part-00004-never-committed.parquet"


@pytest.fixture(scope="module")
def s3a_records(s3a_oracle: Oracle, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The records as Hadoop's serializers write them (skipped only where Java is missing)."""
    paths = s3a_oracle.gen(tmp_path_factory.mktemp("s3a-gen"))
    return {
        "pending": json.loads(paths["pending"].read_text()),
        "pendingset": json.loads(paths["pendingset"].read_text()),
        "oracle": s3a_oracle,
    }


def cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err


@dataclass
class Crashed:
    """One crashed S3A job laid out on a server, and what everything else looked like."""

    s3: S3Target
    dest: str  # key prefix of the destination, ending in '/'
    root: str  # the job's directory
    outputs: dict[str, bytes] = field(default_factory=dict)  # key -> bytes, all committed
    completed: set[str] = field(default_factory=set)  # keys the crashed commit completed
    job_uploads: set[str] = field(default_factory=set)  # upload ids the job's records name

    def mine(self, key: str) -> bool:
        return key.startswith(self.root) or key in self.outputs or key == self.dest + "_SUCCESS"

    def others(self) -> tuple[dict[str, bytes], list[tuple[str, str]]]:
        """The bucket minus everything of this job."""
        objs, ups = bucket_state(self.s3)
        return (
            {k: v for k, v in objs.items() if not self.mine(k)},
            [u for u in ups if u[1] not in self.job_uploads],
        )


def _upload(c: Any, bucket: str, key: str, chunks: list[bytes]) -> tuple[str, list[str]]:
    uid = c.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    etags = [
        c.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=i + 1, Body=b)["ETag"]
        for i, b in enumerate(chunks)
    ]
    return uid, etags


def _commit(
    template: dict[str, Any], bucket: str, key: str, uid: str, etags: list[str], n: int
) -> dict[str, Any]:
    """Hadoop's record with the upload replaced by a real one (every other field as S3A
    wrote it: iostatistics, extraData, dates, no part sizes)."""
    rec = copy.deepcopy(template)
    if "partCount" in rec:  # Hadoop serializes its getPartCount() too
        rec["partCount"] = len(etags)
    rec.update(
        bucket=bucket,
        destinationKey=key,
        uri=f"s3a://{bucket}/{key}",
        uploadId=uid,
        etags=etags,
        length=n,
    )
    return rec


def _put(c: Any, bucket: str, key: str, body: bytes | str) -> None:
    c.put_object(Bucket=bucket, Key=key, Body=body.encode() if isinstance(body, str) else body)


def _pendingset(
    recs: dict[str, Any], job: str, commits: list[dict[str, Any]], *, pretty: bool
) -> str:
    ps = copy.deepcopy(recs["pendingset"])
    ps["jobId"] = job
    ps["commits"] = commits
    # Hadoop 3.3 wrote indented JSON, 3.4 compact: both are S3A's
    return json.dumps(ps, indent=2) if pretty else json.dumps(ps, separators=(",", ":"))


def lay_out(
    s3: S3Target, recs: dict[str, Any], *, job_records: Sequence[tuple[str, str]] = ()
) -> Crashed:
    c = s3.boto3_client()
    b = s3.bucket
    dest = dest_prefix(s3)
    root = f"{dest}__magic_job-{JOB}/"
    attempt = f"{root}job-{JOB}/00/"
    st = Crashed(s3, dest, root)
    template = recs["pendingset"]["commits"][0]
    _put(c, b, attempt, b"")  # setupJob's directory marker
    for i, task in enumerate(TASKS):
        commits = []
        for rel, chunks in OUTPUTS[task].items():
            key = dest + rel
            uid, etags = _upload(c, b, key, chunks)
            data = b"".join(chunks)
            commits.append(_commit(template, b, key, uid, etags, len(data)))
            st.outputs[key] = data
            st.job_uploads.add(uid)
            if i == 0:  # the crashed job commit got this far
                c.complete_multipart_upload(
                    Bucket=b,
                    Key=key,
                    UploadId=uid,
                    MultipartUpload={
                        "Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]
                    },
                )
                st.completed.add(key)
        _put(c, b, f"{attempt}{task}.pendingset", _pendingset(recs, JOB, commits, pretty=i == 1))
        if i == 1:  # its task commit saved the pendingset, then died before deleting the
            # attempt's directory: the same uploads again in .pending records
            stale = f"{attempt}tasks/{task.replace('task_', 'attempt_')}_0/__base/"
            for rel, commit in zip(OUTPUTS[task], commits, strict=True):
                single = dict(commit, jobId="", taskId="")
                _put(c, b, f"{stale}{rel}.pending", json.dumps(single))
    # a task attempt that never committed: its .pending, the magic stream's 0-byte file
    key = dest + OPEN_OUTPUT
    uid, etags = _upload(c, b, key, [b"never committed"])
    st.job_uploads.add(uid)
    base = f"{attempt}tasks/{OPEN_ATTEMPT}/__base/"
    _put(
        c,
        b,
        base + OPEN_OUTPUT + ".pending",
        json.dumps(_commit(recs["pending"], b, key, uid, etags, 15)),
    )
    _put(c, b, base + OPEN_OUTPUT, b"")
    for name, text in job_records:  # extra records a test plants in the job's attempt
        _put(c, b, attempt + name, text)
    # everyone else: another S3A job here, the same job id in a sibling destination, an
    # unrelated object and an upload no record names
    for other_root, other_dest in (
        (f"{dest}__magic_job-{OTHER}/job-{OTHER}/00/", dest),
        (f"{dest_prefix(s3, 'out10')}__magic_job-{JOB}/job-{JOB}/00/", dest_prefix(s3, "out10")),
    ):
        key = other_dest + "other-0.parquet"
        uid, etags = _upload(c, b, key, [b"someone else's"])
        job = OTHER if OTHER in other_root else JOB
        _put(
            c,
            b,
            other_root + TASKS[0] + ".pendingset",
            _pendingset(recs, job, [_commit(template, b, key, uid, etags, 14)], pretty=False),
        )
    _put(c, b, dest + "keep.txt", "not the job's")
    c.create_multipart_upload(Bucket=b, Key=dest + "foreign.bin")
    return st


async def test_list_shows_s3a_jobs_next_to_zerorenames(
    s3: S3Target, s3a_records: dict[str, Any], aws_env: list[str], capsys: Any
) -> None:
    lay_out(s3, s3a_records)
    async with engine_for(s3) as eng:
        zr = await committer("magic", eng, dest_uri(s3)).setup_job()
    code, out, err = await _acli(capsys, "jobs", "list", dest_uri(s3), *aws_env)
    assert code == 0, err
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert set(lines) == {JOB, OTHER, zr.job_id}  # not the sibling destination's
    assert "s3a/magic" in lines[JOB] and "2 committed tasks, 3 open task records" in lines[JOB]
    assert "s3a/magic" in lines[OTHER] and "zerorename/magic" in lines[zr.job_id]
    assert "3 jobs under" in err


async def _acli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    import asyncio

    return await asyncio.to_thread(cli, capsys, *argv)


@MOTO
def test_show_says_what_is_completed_and_what_is_pending(
    s3: S3Target, s3a_records: dict[str, Any], aws_env: list[str], capsys: Any
) -> None:
    st = lay_out(s3, s3a_records)
    before = bucket_state(s3)
    code, out, err = cli(capsys, "jobs", "show", dest_uri(s3), JOB, *aws_env)
    assert code == 0, err
    shown = json.loads(out)
    assert shown["kind"] == "s3a-magic" and shown["attempts"] == ["00"]
    assert shown["committedTasks"] == 2 and shown["openTaskRecords"] == 3
    assert shown["uploads"] == {"pending": 2, "completed": 2, "missing": 0}
    uri = f"s3://{s3.bucket}/"
    assert sorted(shown["completed"]) == sorted(uri + k for k in st.completed)
    assert sorted(shown["pending"]) == sorted(uri + k for k in set(st.outputs) - st.completed)
    assert shown["openTaskUploadsPending"] == 1 and not shown["committed"]
    assert shown["otherPendingUploadsUnderDestination"] == 2  # OTHER's and foreign.bin
    assert bucket_state(s3) == before  # show reads only


def test_resume_finishes_the_job_exactly(
    s3: S3Target, s3a_records: dict[str, Any], aws_env: list[str], capsys: Any, tmp_path: Path
) -> None:
    st = lay_out(s3, s3a_records)
    others = st.others()
    code, out, err = cli(capsys, "jobs", "resume", dest_uri(s3), JOB, *aws_env)
    assert code == 0, err
    assert "4 files" in out and "2 completed now, 2 were already" in out
    assert "1 uploads of uncommitted task attempts aborted" in out
    objs, ups = bucket_state(s3)
    mine = {k: v for k, v in objs.items() if st.mine(k)}
    success = mine.pop(st.dest + "_SUCCESS")
    assert mine == st.outputs  # exactly the full output, byte for byte; no job directory
    assert [u for u in ups if u[1] in st.job_uploads] == []  # nothing of the job pending
    assert st.others() == others  # nobody else's object or upload touched
    data = json.loads(success)
    assert data["jobId"] == JOB and data["committer"] == "magic"
    assert sorted(data["filenames"]) == sorted("/" + k for k in st.outputs)
    (tmp_path / "_SUCCESS").write_bytes(success)
    verdict = s3a_records["oracle"].check("success", tmp_path / "_SUCCESS")[0]
    assert verdict.valid, verdict.text
    # a second resume finds no job
    code, _, err = cli(capsys, "jobs", "resume", dest_uri(s3), JOB, *aws_env)
    assert code == 1 and err.startswith("zerorename: error: ") and err.count("\n") == 1


def test_abort_rolls_the_job_back(
    s3: S3Target, s3a_records: dict[str, Any], aws_env: list[str], capsys: Any
) -> None:
    st = lay_out(s3, s3a_records)
    others = st.others()
    code, out, err = cli(capsys, "jobs", "abort", dest_uri(s3), JOB, *aws_env)
    assert code == 0, err
    assert "3 uploads aborted" in out
    assert "left 2 pending uploads" in out and "S3A keys carry no job id" in out
    # the two objects the crashed commit completed are kept and named (issue 20: an
    # identical object of a re-run cannot be told from the job's)
    uri = f"s3://{s3.bucket}/"
    kept = next(line for line in out.splitlines() if line.startswith("kept 2 objects"))
    assert "this job may have completed: " in kept
    assert all(uri + k in kept for k in st.completed)
    objs, ups = bucket_state(s3)
    assert {k: v for k, v in objs.items() if st.mine(k)} == {
        k: st.outputs[k] for k in st.completed
    }  # no records, nothing pending, only what may be the job's completed files
    assert [u for u in ups if u[1] in st.job_uploads] == []
    assert st.others() == others


def test_abort_keeps_what_it_cannot_prove_is_the_jobs(
    s3: S3Target, s3a_records: dict[str, Any], aws_env: list[str], capsys: Any
) -> None:
    st = lay_out(s3, s3a_records)
    c = s3.boto3_client()
    rewritten, named = sorted(st.completed)
    c.put_object(Bucket=s3.bucket, Key=rewritten, Body=b"another writer, after the crash")
    code, out, err = cli(capsys, "jobs", "abort", dest_uri(s3), JOB, *aws_env)
    assert code == 0, err
    assert f"kept s3://{s3.bucket}/{rewritten}: " in out and "another writer" in out
    assert f"kept 1 objects this job may have completed: s3://{s3.bucket}/{named}" in out
    objs, _ = bucket_state(s3)
    assert objs[rewritten] == b"another writer, after the crash"
    assert objs[named] == st.outputs[named]
    # a job that committed the same key since: its _SUCCESS names it, so it stays
    st = lay_out(s3, s3a_records)
    theirs = SuccessData(job_id=OTHER, committer="magic", filenames=["/" + named])
    c.put_object(Bucket=s3.bucket, Key=st.dest + "_SUCCESS", Body=theirs.to_json())
    code, out, err = cli(capsys, "jobs", "abort", dest_uri(s3), JOB, *aws_env)
    assert code == 0, err
    assert f"kept s3://{s3.bucket}/{named}: named by job {OTHER}'s _SUCCESS" in out
    assert bucket_state(s3)[0][named] == st.outputs[named]


def _complete_all(s3: S3Target, st: Crashed) -> None:
    """Complete every pending upload of the job's committed tasks (its commit finished)."""
    c = s3.boto3_client()
    for u in c.list_multipart_uploads(Bucket=s3.bucket, Prefix=st.dest).get("Uploads", []):
        if u["UploadId"] not in st.job_uploads or u["Key"] not in st.outputs:
            continue
        parts = c.list_parts(Bucket=s3.bucket, Key=u["Key"], UploadId=u["UploadId"])["Parts"]
        c.complete_multipart_upload(
            Bucket=s3.bucket,
            Key=u["Key"],
            UploadId=u["UploadId"],
            MultipartUpload={
                "Parts": [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in parts]
            },
        )


def test_a_job_that_committed_before_a_newer_success_is_never_rolled_back(
    s3: S3Target, s3a_records: dict[str, Any], aws_env: list[str], capsys: Any
) -> None:
    """Issue 20 #2: X's commit completed every upload, its cleanup died (its directory
    stays) and a later job appended and wrote its own _SUCCESS. Abort refuses and changes
    nothing; resume only cleans up and keeps the later job's _SUCCESS."""
    st = lay_out(s3, s3a_records)
    _complete_all(s3, st)
    c = s3.boto3_client()
    c.put_object(Bucket=s3.bucket, Key=st.dest + "later.parquet", Body=b"a later job's")
    later = SuccessData(job_id=OTHER, committer="magic", filenames=["/later.parquet"]).to_json()
    c.put_object(Bucket=s3.bucket, Key=st.dest + "_SUCCESS", Body=later)
    code, out, err = cli(capsys, "jobs", "show", dest_uri(s3), JOB, *aws_env)
    assert code == 0 and json.loads(out)["committed"] is True, err
    before = bucket_state(s3)
    code, out, err = cli(capsys, "jobs", "abort", dest_uri(s3), JOB, *aws_env)
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "committed" in err and "every upload" in err and "jobs resume" in err
    assert bucket_state(s3) == before
    code, out, err = cli(capsys, "jobs", "resume", dest_uri(s3), JOB, *aws_env)
    assert code == 0, err
    assert "0 completed now" in out and "_SUCCESS left as it was" in out
    objs, ups = bucket_state(s3)
    assert objs[st.dest + "_SUCCESS"] == later
    assert {k: v for k, v in objs.items() if k in st.outputs} == st.outputs
    assert [k for k in objs if k.startswith(st.root)] == []
    assert [u for u in ups if u[1] in st.job_uploads] == []


def test_abort_keeps_an_identical_object_a_rerun_committed(
    s3: S3Target, s3a_records: dict[str, Any], aws_env: list[str], capsys: Any
) -> None:
    """Issue 20 #3: a re-run wrote the same bytes in the same parts at a key the crashed
    job had completed (same size and multipart ETag) and committed; abort of the crashed
    job keeps it and says so."""
    st = lay_out(s3, s3a_records)
    c = s3.boto3_client()
    key = next(k for k in sorted(st.completed) if "part-00000" in k)
    chunks = OUTPUTS[TASKS[0]][key[len(st.dest) :]]
    uid, etags = _upload(c, s3.bucket, key, chunks)
    c.complete_multipart_upload(
        Bucket=s3.bucket,
        Key=key,
        UploadId=uid,
        MultipartUpload={"Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]},
    )
    rerun = SuccessData(job_id=OTHER, committer="magic", filenames=[]).to_json()
    c.put_object(Bucket=s3.bucket, Key=st.dest + "_SUCCESS", Body=rerun)
    code, out, err = cli(capsys, "jobs", "abort", dest_uri(s3), JOB, *aws_env)
    assert code == 0, err
    assert "kept 2 objects this job may have completed: " in out
    assert f"s3://{s3.bucket}/{key}" in out
    assert bucket_state(s3)[0][key] == st.outputs[key]


BAD_RECORDS = [
    ("resume", "outside", "outside the destination"),
    ("abort", "outside", "outside the destination"),
    ("resume", "other-job", "belongs to job"),
    ("resume", "garbage", "t9.pendingset"),
]
#: every bad record on moto, the first on RGW too: the records are read (the same listing
#: and reads whatever was planted) before any is judged, and judged by no server
BAD_RECORDS_ON = [
    *(pytest.param("moto", *bad, id="moto-" + "-".join(bad[:2])) for bad in BAD_RECORDS),
    pytest.param("rgw", *BAD_RECORDS[0], marks=pytest.mark.rgw, id="rgw-resume-outside"),
]


@pytest.mark.parametrize(("s3", "command", "plant", "says"), BAD_RECORDS_ON, indirect=["s3"])
def test_a_bad_record_changes_nothing(
    s3: S3Target,
    s3a_records: dict[str, Any],
    aws_env: list[str],
    capsys: Any,
    command: str,
    plant: str,
    says: str,
) -> None:
    b = s3.bucket
    template = s3a_records["pendingset"]["commits"][0]
    if plant == "outside":
        key = dest_prefix(s3, "out10") + "stolen.parquet"
        bad = _pendingset(
            s3a_records, JOB, [_commit(template, b, key, "u", ['"x"'], 1)], pretty=False
        )
    elif plant == "other-job":
        key = dest_prefix(s3) + "theirs.parquet"
        bad = _pendingset(
            s3a_records, OTHER, [_commit(template, b, key, "u", ['"x"'], 1)], pretty=False
        )
    else:
        bad = '{"version": 3, "commits": ['
    lay_out(s3, s3a_records, job_records=[("t9.pendingset", bad)])
    before = bucket_state(s3)
    code, out, err = cli(capsys, "jobs", command, dest_uri(s3), JOB, *aws_env)
    assert code == 1 and out == ""
    assert err.startswith("zerorename: error: ") and err.count("\n") == 1 and says in err
    assert "Traceback" not in err
    assert bucket_state(s3) == before


@MOTO
def test_abort_of_a_job_whose_success_names_it_is_refused(
    s3: S3Target, s3a_records: dict[str, Any], aws_env: list[str], capsys: Any
) -> None:
    st = lay_out(s3, s3a_records)
    code, _, err = cli(capsys, "jobs", "resume", dest_uri(s3), JOB, *aws_env)
    assert code == 0, err
    # the job's directory again (its cleanup "crashed"): abort must not delete its output
    lay_out_again = s3.boto3_client()
    lay_out_again.put_object(Bucket=s3.bucket, Key=f"{st.root}job-{JOB}/00/", Body=b"")
    before = bucket_state(s3)
    code, _, err = cli(capsys, "jobs", "abort", dest_uri(s3), JOB, *aws_env)
    assert code == 1 and "committed" in err and "jobs resume" in err and err.count("\n") == 1
    assert bucket_state(s3) == before


@MOTO
def test_inspect_reads_s3a_records_from_a_file_and_from_the_store(
    s3: S3Target, s3a_records: dict[str, Any], aws_env: list[str], capsys: Any, tmp_path: Path
) -> None:
    paths = s3a_records["oracle"].gen(tmp_path / "gen")
    c = s3.boto3_client()
    for kind, path in paths.items():
        key = f"{dest_prefix(s3)}{path.name}"
        c.put_object(Bucket=s3.bucket, Key=key, Body=path.read_bytes())
        for where in (str(path), f"s3://{s3.bucket}/{key}"):
            code, out, err = cli(capsys, "inspect", where, "--json", *aws_env)
            assert code == 0, (where, err)
            info = json.loads(out)
            assert info["kind"] == kind, where
            if kind == "pendingset":
                assert info["count"] == 3 and info["jobId"] == JOB
            if kind == "success":
                assert info["jobId"] == JOB
            code, out, err = cli(capsys, "inspect", where, *aws_env)
            assert code == 0 and out.startswith(f"{kind}: "), (where, err)
    code, _, err = cli(capsys, "inspect", str(tmp_path / "nothing.pendingset"))
    assert code == 1 and err.startswith("zerorename: error: ") and err.count("\n") == 1


def test_resume_refuses_a_job_whose_upload_was_lost_and_abort_still_cleans_it(
    s3: S3Target, s3a_records: dict[str, Any], aws_env: list[str], capsys: Any
) -> None:
    st = lay_out(s3, s3a_records)
    c = s3.boto3_client()
    pending = {
        u["UploadId"]: u["Key"]
        for u in c.list_multipart_uploads(Bucket=s3.bucket, Prefix=st.dest).get("Uploads", [])
    }
    lost = next(uid for uid, key in sorted(pending.items()) if key.endswith("part-00003.parquet"))
    c.abort_multipart_upload(Bucket=s3.bucket, Key=pending[lost], UploadId=lost)
    before = bucket_state(s3)
    code, out, err = cli(capsys, "jobs", "resume", dest_uri(s3), JOB, *aws_env)
    assert code == 1 and out == "" and "neither pending nor completed" in err
    assert "jobs abort" in err and err.count("\n") == 1
    assert bucket_state(s3) == before
    others = st.others()
    code, out, err = cli(capsys, "jobs", "abort", dest_uri(s3), JOB, *aws_env)
    assert code == 0 and "2 uploads aborted" in out, err
    assert "kept 2 objects this job may have completed" in out
    objs, ups = bucket_state(s3)
    assert sorted(k for k in objs if st.mine(k)) == sorted(st.completed)
    assert [u for u in ups if u[1] in st.job_uploads] == []
    assert st.others() == others
