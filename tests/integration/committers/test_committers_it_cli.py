"""The committer CLI against real servers: uploads list/abort, jobs, inspect, errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from committer_helpers import committer, dest_uri, engine_for, uploads, write

from zerorename.committers.cli import main, parse_age
from zerorename.testing.targets import S3Target


@pytest.fixture
def aws_env(s3: S3Target, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.access_key or "")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key or "")
    monkeypatch.setenv("AWS_DEFAULT_REGION", s3.region)
    return ["--endpoint-url", s3.endpoint_url, "--addressing-style", "path"]


def cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


async def acli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """The CLI runs its own event loop: call it from a thread, as a user's shell would."""
    return await asyncio.to_thread(cli, capsys, *argv)


def test_parse_age() -> None:
    assert parse_age("2h") == 7200 and parse_age("90") == 90 and parse_age("1.5d") == 129600
    with pytest.raises(Exception):  # noqa: B017
        parse_age("soon")


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
    rows = [json.loads(line) for line in out.splitlines()]
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
