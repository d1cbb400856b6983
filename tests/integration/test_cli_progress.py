"""Progress on a terminal, silence when piped (issue 25 item 1): the commands run under a
pseudo-terminal (the ``pty`` module) as a user's shell runs them, and piped as cron runs
them. The display's choice and its plain line are pure: tests/unit/cli/test_cliprogress.py."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import run, run_sub, target_env, use_target
from zerorename.servers.targets import S3Target
from zerorename.units import MiB


def run_pty(s3: S3Target, *argv: str) -> tuple[int, str]:
    """``zerorename argv`` with stdout and stderr on a pseudo-terminal: (exit code, what
    the terminal showed)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "zerorename.cli", *argv],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env={**target_env(s3), "COLUMNS": "120", "TERM": "xterm"},
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=120), b"".join(chunks).decode(errors="replace")


def big_file(tmp_path: Path) -> Path:
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(11 * MiB))
    return src


def test_put_shows_progress_on_a_terminal_only(moto_s3: S3Target, tmp_path: Path) -> None:
    s3 = moto_s3
    src = big_file(tmp_path)
    uri = f"s3://{s3.bucket}/{s3.key('big.bin')}"
    code, shown = run_pty(s3, "put", str(src), uri, "--part-size", "5m")
    assert code == 0, shown
    assert "put big.bin" in shown and "MiB" in shown, shown  # the bar: its label, its bytes
    assert f"uploaded {uri}" in shown
    piped = run_sub(s3, "put", str(src), uri, "--part-size", "5m")
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == "" and piped.stdout.startswith(f"uploaded {uri}")
    code, shown = run_pty(s3, "put", str(src), uri, "--part-size", "5m", "--quiet")
    assert (code, shown) == (0, "")
    forced = run_sub(s3, "put", str(src), uri, "--part-size", "5m", "--progress")
    lines = forced.stderr.splitlines()  # piped: plain lines, nothing redrawn
    assert forced.returncode == 0 and lines and all(ln.startswith("put big.bin: ") for ln in lines)
    assert "\r" not in forced.stderr and "\x1b" not in forced.stderr


def test_many_records_and_jobs_show_progress_on_a_terminal(
    moto_s3: S3Target,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s3 = moto_s3
    src = tmp_path / "small.txt"
    src.write_bytes(b"x" * 100)
    records = []
    use_target(s3, monkeypatch)
    for i in range(3):  # the records, made in this process (their progress is not the test's)
        rec = tmp_path / f"r{i}.json"
        code, _, err = run(
            capsys, "put", str(src), f"s3://{s3.bucket}/{s3.key(f'r{i}')}", "--defer", str(rec)
        )
        assert code == 0, err
        records.append(str(rec))
    code, shown = run_pty(s3, "complete", *records[:2])
    assert code == 0 and "complete" in shown and "2/2" in shown, shown
    code, shown = run_pty(s3, "uploads", "abort", f"s3://{s3.bucket}/{s3.prefix}")
    assert code == 0 and "1 uploads aborted" in shown, shown
    assert re.search(r"uploads abort(?!ed)", shown), shown  # the bar's label
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(5):
        (tree / f"f{i}.txt").write_bytes(b"y" * i)
    dest = f"s3://{s3.bucket}/{s3.prefix}tree"
    code, shown = run_pty(s3, "put", str(tree), dest + "/")
    assert code == 0 and "put 5 files" in shown and "commit" in shown, shown
