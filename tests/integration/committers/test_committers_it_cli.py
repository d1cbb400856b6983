"""The committer CLI against real servers: uploads list/abort, jobs, inspect, errors."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import pytest
from committer_helpers import bucket_state, committer, dest_uri, engine_for, uploads, write

from zerorename.cli.jobs import main, parse_age
from zerorename.servers.targets import S3Target

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)


def cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


async def acli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """The CLI runs its own event loop: call it from a thread, as a user's shell would."""
    return await asyncio.to_thread(cli, capsys, *argv)


def test_parse_age() -> None:
    assert parse_age("2h") == 7200 and parse_age("90") == 90 and parse_age("1.5d") == 129600
    with pytest.raises(argparse.ArgumentTypeError, match="'soon' is not an age"):
        parse_age("soon")


# HTTP only: the CLI over TLS is test_tls_cli.py's claim (a subprocess on both servers)
async def test_uploads_list_and_abort_stay_in_their_prefix(
    s3: S3Target, aws_env: list[str], capsys: Any
) -> None:
    base = f"s3://{s3.bucket}/{s3.prefix}"
    async with engine_for(s3) as eng:
        jobs = {}
        for name in ("dataset1", "dataset10"):
            job = await committer("magic", eng, base + name).setup_job()
            ta = job.task_attempt(0)
            await ta.setup()
            await write(ta, "f ü.bin", b"x")
            jobs[name] = job
    code, out, _ = await acli(capsys, "uploads", "list", base + "dataset1", "--json", *aws_env)
    assert code == 0
    rows = json.loads(out)["uploads"]
    want = f"{s3.prefix}dataset1/f ü-{jobs['dataset1'].job_id}.bin"
    assert [r["key"] for r in rows] == [want]
    code, out, _ = await acli(
        capsys, "uploads", "list", base + "dataset1", "--older-than", "1h", *aws_env
    )
    # moto reports every upload as initiated in 2010 (a fixed date): there it looks old
    assert code == 0 and (out.count("\n") == 1 if s3.name == "moto" else out == "")
    code, out, err = await acli(
        capsys, "uploads", "abort", base + "dataset1", "--dry-run", *aws_env
    )
    assert code == 0 and "would abort" in out and "1 uploads would abort" in err
    assert len(uploads(s3, s3.prefix + "dataset1/")) == 1
    code, out, err = await acli(capsys, "uploads", "abort", base + "dataset1", *aws_env)
    assert code == 0 and out.startswith("aborted s3://") and "1 uploads aborted" in err
    assert uploads(s3, s3.prefix + "dataset1/") == []
    assert len(uploads(s3, s3.prefix + "dataset10/")) == 1  # never touched


async def test_jobs_list_show_abort_and_inspect(
    s3: S3Target, aws_env: list[str], capsys: Any
) -> None:
    uri = dest_uri(s3)
    async with engine_for(s3) as eng:
        job = await committer("magic", eng, uri).setup_job()
        ta = job.task_attempt(3)
        await ta.setup()
        await write(ta, "a b.csv", b"abc")
        s = await ta.commit()
        other = await committer("staging", eng, uri).setup_job()
    code, out, _ = await acli(capsys, "jobs", "list", uri, *aws_env)
    assert code == 0 and job.job_id in out and other.job_id in out and "magic" in out
    code, out, _ = await acli(capsys, "jobs", "show", uri, job.job_id, *aws_env)
    shown = json.loads(out)
    assert shown["active"] and shown["committedTasks"] == 1 and shown["pendingUploads"] == 1
    code, out, _ = await acli(capsys, "inspect", s.pendingset, "--json", *aws_env)
    info = json.loads(out)
    assert info["kind"] == "pendingset" and info["count"] == 1 and info["bytes"] == 3
    assert info["commits"][0]["destinationKey"].endswith(f"a b-{job.job_id}.csv")
    code, out, _ = await acli(capsys, "inspect", s.pendingset, *aws_env)
    assert code == 0 and "1 uploads, 3 bytes" in out
    code, out, err = await acli(capsys, "jobs", "resume", uri, job.job_id, *aws_env)
    assert code == 1 and "never started committing" in err
    code, out, _ = await acli(capsys, "jobs", "abort", uri, job.job_id, *aws_env)
    assert code == 0 and "1 uploads aborted" in out
    code, out, err = await acli(capsys, "jobs", "show", uri, job.job_id, *aws_env)
    assert code == 1 and "no job" in err
    async with engine_for(s3) as eng:
        res = await committer("staging", eng, uri).job(other.job_id).commit([])
    assert res.files == 0
    code, out, _ = await acli(capsys, "inspect", uri + "/_SUCCESS", *aws_env)
    assert code == 0 and "success" in out and other.job_id in out
    code, out, _ = await acli(capsys, "inspect", uri + "/_SUCCESS", "--json", *aws_env)
    assert json.loads(out)["jobId"] == other.job_id


def test_cli_errors_exit_nonzero(s3: S3Target, aws_env: list[str], capsys: Any) -> None:
    uri = dest_uri(s3)
    for argv in (
        ["jobs", "show", uri],
        ["jobs", "show", uri, "not-a-uuid"],
        ["inspect", uri + "/nothing.pendingset"],
        ["inspect", uri + "/x.txt"],
        ["uploads", "list", "http://nope"],
        ["uploads", "list", f"s3://{s3.bucket}-missing/x"],
    ):
        code, _, err = cli(capsys, *argv, *aws_env)
        assert code == 1, argv
        assert err.startswith("zerorename: error: ") and "Traceback" not in err
    with pytest.raises(SystemExit) as ei:
        main(["uploads", "list", uri, "--older-than", "soon"])
    assert ei.value.code == 2


def bucket_uploads(s3: S3Target) -> list[tuple[str, str]]:
    return bucket_state(s3)[1]


def test_uploads_abort_never_widens_to_the_bucket(
    s3: S3Target, aws_env: list[str], capsys: Any
) -> None:
    c = s3.boto3_client()
    for key in ("d/f.bin", "d10/f.bin", "f.bin", "x//y.bin"):
        c.create_multipart_upload(Bucket=s3.bucket, Key=s3.prefix + key)
    c.create_multipart_upload(Bucket=s3.bucket, Key="top-level.bin")
    before = bucket_uploads(s3)
    b, p = s3.bucket, s3.prefix
    refused = {
        f"s3://{b}//": "empty path component",  # s3://b/$UNSET/
        f"s3://{b}///{p}d": "empty",
        f"s3://{b}/{p}d//": "empty",
        f"s3://{b}/{p}/d": "empty",  # $DIR/d with DIR ending in '/'
        f"s3://{b}/{p}x//": "empty",
        f"s3://{b}/{p}./d": "'.'",
        f"s3://{b}": "whole bucket",
        f"s3://{b}/": "whole bucket",  # s3://b/$UNSET
    }
    for uri, why in refused.items():
        for extra in ([], ["--dry-run"], ["--older-than", "0s"]):
            code, out, err = cli(capsys, "uploads", "abort", uri, *extra, *aws_env)
            assert code == 1 and out == "", uri
            assert err.startswith("zerorename: error: ") and err.count("\n") == 1, err
            assert why in err and "Traceback" not in err, err
    code, _, err = cli(capsys, "uploads", "abort", f"s3://{b}/{p}d", "--all-of-bucket", *aws_env)
    assert code == 1 and "--all-of-bucket given with a prefix" in err
    assert bucket_uploads(s3) == before  # nothing was aborted by any of them
    # listing a whole bucket is read-only: allowed without the flag
    code, out, _ = cli(capsys, "uploads", "list", f"s3://{b}", "--json", *aws_env)
    assert (
        code == 0
        and sorted((r["key"], r["uploadId"]) for r in json.loads(out)["uploads"]) == before
    )
    code, out, err = cli(
        capsys, "uploads", "abort", f"s3://{b}", "--all-of-bucket", "--dry-run", *aws_env
    )
    assert code == 0 and f"{len(before)} uploads would abort" in err
    assert bucket_uploads(s3) == before
    # a prefix still means that directory only
    code, _, err = cli(capsys, "uploads", "abort", f"s3://{b}/{p}d/", *aws_env)
    assert code == 0 and "1 uploads aborted" in err
    assert [k for k, _ in bucket_uploads(s3)] == sorted(
        [p + "d10/f.bin", p + "f.bin", p + "x//y.bin", "top-level.bin"]
    )
    if s3.name in ("moto", "rgw"):  # a bucket of this test's own: the flag takes it all
        code, _, err = cli(capsys, "uploads", "abort", f"s3://{b}", "--all-of-bucket", *aws_env)
        assert code == 0 and "4 uploads aborted" in err and bucket_uploads(s3) == []


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\r\nzerorename: job committed\x9b1m\u202e\u2028"


@MOTO
def test_inspect_escapes_control_characters(s3: S3Target, aws_env: list[str], capsys: Any) -> None:
    success = {
        "name": "zerorename.committers.SuccessData/1",
        "timestamp": 1700000000000,
        "date": "2023-11-14T22:13:20Z",
        "hostname": "host" + HOSTILE,
        "committer": "magic" + HOSTILE,
        "description": "",
        "jobId": HOSTILE,
        "jobIdSource": "zerorename",
        "metrics": {"files" + HOSTILE: 1},
        "diagnostics": {},
        "filenames": ["a" + HOSTILE + ".csv"],
    }
    key = f"{s3.prefix}t/_SUCCESS"
    s3.boto3_client().put_object(
        Bucket=s3.bucket, Key=key, Body=json.dumps(success, ensure_ascii=False).encode()
    )
    uri = f"s3://{s3.bucket}/{key}"
    code, out, err = cli(capsys, "inspect", uri, *aws_env)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 4  # kind, job, one metric, one file name: one line each
    for ch in ("\x1b", "\x07", "\r", "\x9b", "\u202e", "\u2028"):
        assert ch not in out
    assert "\\x1b]0;pwned\\x07" in lines[1] and "\\x0d\\x0azerorename" in lines[1]
    assert not any(line.startswith("zerorename: job committed") for line in lines)
    code, out, _ = cli(capsys, "inspect", uri, "--json", *aws_env)
    assert code == 0 and "\x1b" not in out and "\x9b" not in out
    info = json.loads(out)
    assert info["jobId"] == HOSTILE and info["filenames"] == ["a" + HOSTILE + ".csv"]
