"""Ctrl-C while a CLI command's clean-up runs: the first says, in one line on stderr, that
the clean-up is finishing and that a second Ctrl-C stops at once (it used to wait without
a word); the second does stop at once. A real subprocess gets real SIGINTs, ordered by the
fault proxy's request counter; a latency rule holds the clean-up's first request, so only
the second Ctrl-C can end the command before the deadline (a hang guard, nothing timed)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli_helpers import credentials_env
from zerorename.servers.faultproxy import FaultProxy, FaultRule
from zerorename.servers.targets import S3Target

NOTICE = "zerorename: interrupted: finishing the clean-up first"


def _wait(done: Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 120  # against a hang only: nothing is timed
    while not done():
        assert proc.poll() is None, (what, proc.returncode)
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.01)


def test_first_ctrl_c_in_a_clean_up_says_so_and_the_second_stops_at_once(
    moto_s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    """``zerorename put DIR``: Ctrl-C while a file is uploading starts the job's abort
    (nothing may be left pending); its listing of the job's uploads is held."""
    proxy: FaultProxy = fault_proxy(moto_s3.endpoint_url)
    proxy.add_rule(FaultRule(operation="UploadPart", fault="latency", delay=1.0))
    proxy.add_rule(FaultRule(operation="ListMultipartUploads", fault="latency", delay=600.0))
    src = tmp_path / "dir"
    src.mkdir()
    for i in range(3):
        (src / f"f{i}.csv").write_bytes(b"x" * 100)
    dest = f"s3://{moto_s3.bucket}/{moto_s3.key('dir')}/"
    argv = [str(src), dest, "--endpoint-url", proxy.url, "--addressing-style", "path"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "zerorename.cli", "put", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=credentials_env(moto_s3),
    )
    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        lines.extend(iter(proc.stderr.readline, ""))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        _wait(lambda: proxy.stats.requests("UploadPart") > 0, proc, "an UploadPart")
        proc.send_signal(signal.SIGINT)
        _wait(lambda: any(NOTICE in ln for ln in lines), proc, "the first Ctrl-C's line")
        # the clean-up is running, held at its listing: only a second Ctrl-C ends it now
        _wait(lambda: proxy.stats.requests("ListMultipartUploads") > 0, proc, "the abort")
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=30)
    err = "".join(lines)
    assert "Traceback" not in err, err
    said = [ln.strip() for ln in lines if ln.strip()]
    assert said[0].startswith(NOTICE) and "Ctrl-C again to stop at once" in said[0], err
    assert said[-1].startswith("zerorename: interrupted"), err
    assert len(said) == 2 and proc.returncode == 130, (proc.returncode, err)
