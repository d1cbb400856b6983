"""The `zerorename` command refuses bad input in one line, before it acts, and never strands
an upload: `put --defer` record paths, record files, pipes, options (issue 10 items 9-11).

Each kind of refusal runs at least once as a user runs it (a subprocess: its exit code, and
everything it prints up to its exit, as a shell sees them) and a pipe on standard input is
a subprocess's; the variants of a kind run in this process (``run_here``: the same
``main``, the exit code it returns or an argparse ``SystemExit``'s, its stderr), as does a
local failure that has to be provoked inside the process (`os.fsync` failing as on a full
disk)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import target_env, use_target
from zerorename import cli
from zerorename.servers.targets import S3Target

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)


def run_cli(
    s3: S3Target, *argv: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-m", "zerorename.cli", *argv],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        env=env or target_env(s3),
        timeout=120,
        check=False,
    )
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    return out


def run_here(capsys: Any, *argv: str) -> subprocess.CompletedProcess[str]:
    """``zerorename argv`` in this process, as :func:`run_cli` reports a subprocess: the
    code ``main`` returns (or an argparse refusal's ``SystemExit`` code), its stdout and its
    stderr. (What an interpreter prints as it exits, a subprocess of each kind shows.)"""
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse: usage and error printed, exit code 2
        code = exc.code if isinstance(exc.code, int) else 1
    got = capsys.readouterr()
    assert "Traceback" not in got.err, got.err[-2000:]
    return subprocess.CompletedProcess(list(argv), code, got.out, got.err)


def one_error_line(out: subprocess.CompletedProcess[str]) -> str:
    """The command failed with exactly one line on stderr; return it."""
    assert out.returncode != 0, out.stdout
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, out.stderr
    return lines[0]


def pending(s3: S3Target, key: str) -> list[str]:
    c = s3.boto3_client()
    got = c.list_multipart_uploads(Bucket=s3.bucket, Prefix=key).get("Uploads", [])
    return [u["UploadId"] for u in got if u["Key"] == key]


@MOTO
def test_defer_to_an_unwritable_record_path_uploads_nothing(s3: S3Target, tmp_path: Path) -> None:
    src = tmp_path / "data.bin"
    src.write_bytes(b"x" * 100)
    key = s3.key("deferred.bin")
    out = run_cli(s3, "put", str(src), f"s3://{s3.bucket}/{key}", "--defer", "/nonexistent/r.json")
    assert "cannot write the record file /nonexistent/r.json" in one_error_line(out)
    assert pending(s3, key) == []


@MOTO
def test_defer_refuses_to_overwrite_an_existing_record(
    s3: S3Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    src = tmp_path / "data.bin"
    src.write_bytes(b"x" * 100)
    record = tmp_path / "r.json"
    record.write_text('{"the": "only record of another upload"}')
    key = s3.key("deferred.bin")
    use_target(s3, monkeypatch)  # the unwritable record above is this refusal in a shell
    out = run_here(capsys, "put", str(src), f"s3://{s3.bucket}/{key}", "--defer", str(record))
    assert "already exists" in one_error_line(out)
    assert record.read_text() == '{"the": "only record of another upload"}'
    assert pending(s3, key) == []


@MOTO
async def test_a_record_that_cannot_be_written_aborts_the_upload(
    s3: S3Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """The disk fills between the claim and the write: the upload is aborted, not stranded."""
    import asyncio

    src = tmp_path / "data.bin"
    src.write_bytes(os.urandom(6 * 1024 * 1024))
    record = tmp_path / "r.json"
    key = s3.key("full-disk.bin")
    for name, value in target_env(s3).items():
        monkeypatch.setenv(name, value)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cli.os, "fsync", full)
    argv = ["put", str(src), f"s3://{s3.bucket}/{key}", "--defer", str(record), "--part-size", "5m"]
    code = await asyncio.to_thread(cli.main, argv)
    err = capsys.readouterr().err
    assert code == 1 and "was aborted" in err and "No space left" in err, err
    assert not record.exists()
    assert pending(s3, key) == []


def test_put_from_a_pipe_streams(s3: S3Target) -> None:
    """`echo hi | zerorename put - s3://b/k`: standard input is a pipe, not a seekable file."""
    key = s3.key("from-pipe.txt")
    data = b"hi from a pipe\n" * 1000
    out = run_cli(s3, "put", "-", f"s3://{s3.bucket}/{key}", stdin=data)
    assert out.returncode == 0, out.stderr
    got = s3.boto3_client().get_object(Bucket=s3.bucket, Key=key)["Body"].read()
    assert got == data


@MOTO
def test_put_from_a_fifo_streams(
    s3: S3Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """The command reads a named pipe that another process's writer (here a thread) fills;
    in this process (the pipe on standard input above is the subprocess)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    key = s3.key("from-fifo.txt")
    data = os.urandom(200_000)

    def writer() -> None:
        with open(fifo, "wb") as w:  # blocks until the command opens the fifo
            w.write(data)

    feed = threading.Thread(target=writer, daemon=True)
    feed.start()
    use_target(s3, monkeypatch)
    out = run_here(capsys, "put", str(fifo), f"s3://{s3.bucket}/{key}")
    if feed.is_alive():  # the command never opened it: free the writer, then fail
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
    feed.join(timeout=60)
    assert out.returncode == 0, out.stderr
    got = s3.boto3_client().get_object(Bucket=s3.bucket, Key=key)["Body"].read()
    assert got == data


@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe{not utf-8}",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"version": 1, "bucket": "b", "key": "k", "upload_id": "u", "parts": [], '
        b'"length": 0, "created": Infinity}',
        b'{"version": 1, "bucket": "b", "key": "k", "upload_id": "u", "parts": [], '
        b'"length": 0, "created": 1e400}',
        b'{"version": 1, "bucket": "b", "key": "k", "upload_id": "u", "parts": [], '
        b'"length": 0, "created": ' + b"9" * 400 + b"}",
        b'{"version": 1, "bucket": null, "key": "", "upload_id": "u", "parts": [], '
        b'"length": 0, "created": 0}',
    ],
    ids=["not-utf8", "deep", "infinity", "1e400", "huge-int", "null-bucket-empty-key"],
)
@pytest.mark.parametrize("command", ["complete", "abort"])
def test_bad_record_files_are_one_line(
    moto_s3: S3Target,
    tmp_path: Path,
    content: bytes,
    command: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
) -> None:
    """In this process (a record that is a JSON list is this refusal in a shell, below)."""
    record = tmp_path / "r.json"
    record.write_bytes(content)
    use_target(moto_s3, monkeypatch)
    out = run_here(capsys, command, str(record))
    line = one_error_line(out)
    assert line.startswith("zerorename: error:") and str(record) in line, line
    assert "unexpected" not in line, line


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["--profile", "no-such-profile-zr"], "no-such-profile-zr"),
        (["--region", "not a region!"], "region"),
        (["--endpoint-url", "not a url"], "endpoint"),
        (["--endpoint-url", "ftp://127.0.0.1:9000"], "endpoint"),
        (["--endpoint-url", "http://127.0.0.1:99999"], "endpoint"),
    ],
    ids=["profile", "region", "not-url", "scheme", "port"],
)
def test_bad_connection_options_are_one_line(
    moto_s3: S3Target,
    argv: list[str],
    expect: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
) -> None:
    """In this process (an unknown profile in the environment is this refusal in a shell,
    below)."""
    use_target(moto_s3, monkeypatch)
    out = run_here(capsys, "uploads", "list", f"s3://{moto_s3.bucket}/x", *argv)
    line = one_error_line(out)
    assert line.startswith("zerorename: error:") and expect in line.lower(), line
    assert "unexpected" not in line, line


def test_unknown_aws_profile_in_the_environment_is_one_line(moto_s3: S3Target) -> None:
    env = target_env(moto_s3)
    env["AWS_PROFILE"] = "no-such-profile-zr"
    out = run_cli(moto_s3, "uploads", "list", f"s3://{moto_s3.bucket}/x", env=env)
    assert "no-such-profile-zr" in one_error_line(out)


@pytest.mark.parametrize(
    "argv",
    [
        ["upload", "--size", "abc"],
        ["upload", "--size=-1"],
        ["upload", "--size", "1e999"],
        ["sweep", "--pools", "8,x"],
        ["upload", "--reps", "0"],
        ["many", "--count", "0"],
        ["upload", "--json", "/nonexistent/dir/out.json"],
        ["upload", "--plot", "/nonexistent/dir/out.png"],
    ],
    ids=["size-abc", "size-neg", "size-inf", "pools", "reps-0", "count-0", "json", "plot"],
)
def test_bad_perf_options_are_one_line_before_any_run(
    moto_s3: S3Target, argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Checked before the target starts or any run is measured (an hour of runs must not
    end in 'cannot write --json'). In this process (the next test is one in a shell)."""
    use_target(moto_s3, monkeypatch)
    perf = ["perf", argv[0], "--target", "sink", "--reps", "1", "--quiet", *argv[1:]]
    _refused_before_any_run(run_here(capsys, *perf))


def test_a_bad_perf_option_is_refused_before_any_run_in_a_shell(moto_s3: S3Target) -> None:
    perf = ["perf", "upload", "--target", "sink", "--reps", "1", "--quiet"]
    _refused_before_any_run(run_cli(moto_s3, *perf, "--json", "/nonexistent/dir/out.json"))


def _refused_before_any_run(out: subprocess.CompletedProcess[str]) -> None:
    assert out.returncode == 2, out.stderr
    last = [ln for ln in out.stderr.splitlines() if ln.strip()][-1]
    assert "error" in last or "choose another path" in last, out.stderr
    assert "[perf" not in out.stderr  # no run started


def test_json_lists_are_not_records(moto_s3: S3Target, tmp_path: Path) -> None:
    """In a shell (a subprocess), as a user meets it."""
    record = tmp_path / "r.json"
    record.write_text(json.dumps([1, 2, 3]))
    out = run_cli(moto_s3, "abort", str(record))
    assert str(record) in one_error_line(out)
