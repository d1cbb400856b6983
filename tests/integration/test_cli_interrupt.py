"""Ctrl-C during `zerorename put` (issue 20, "also seen"): the message tells the truth about
the object, and no traceback reaches the user, even while the command's modules load.

A real subprocess gets a real SIGINT at deterministic points: while a given module is
being imported (an import hook sends it), and once the proxy has seen a given request
arrive (its request counter), with a latency rule holding that request open. No
wall-clock assert: the waits are for events, with a generous deadline against hangs."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import credentials_env
from zerorename.engine import EngineConfig, RetryConfig, UploadEngine
from zerorename.servers.faultproxy import FaultProxy, FaultRule
from zerorename.servers.targets import S3Target

MiB = 1024 * 1024

#: the console script's wrapper, with an import hook that sends SIGINT to the process the
#: first time MODULE is imported
_WRAPPER = textwrap.dedent(
    """
    import os, signal, sys

    class Hook:
        def find_spec(self, name, path=None, target=None):
            if name == {module!r}:
                sys.meta_path.remove(self)
                os.kill(os.getpid(), signal.SIGINT)
            return None

    sys.meta_path.insert(0, Hook())
    {run}
    """
)
#: how the wrapper starts the command: the console script, and python -m zerorename.perf
_CONSOLE = "from zerorename.cli import main; sys.exit(main({argv!r}))"
_PERF = (
    "import runpy; sys.argv = ['zerorename.perf', *{argv!r}]; "
    "runpy.run_module('zerorename.perf', run_name='__main__')"
)


def _one_line(proc: subprocess.CompletedProcess[str] | subprocess.Popen[str], err: str) -> str:
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert proc.returncode == 130, (proc.returncode, err)
    return lines[0]


#: modules ``put`` of a file loads: the committer commands' arguments (in
#: ``zerorename.committers`` before issue 21's cli/; ``put`` loads that package no more),
#: the errors, the engine, its HTTP stack
@pytest.mark.parametrize(
    "module", ["zerorename.cli.jobargs", "zerorename.errors", "zerorename.engine", "aiobotocore"]
)
def test_ctrl_c_while_the_command_loads_is_one_line(
    moto_s3: S3Target, tmp_path: Path, module: str
) -> None:
    source = tmp_path / "f"
    source.write_bytes(b"x")
    argv = ["put", str(source), f"s3://{moto_s3.bucket}/{moto_s3.key('k')}"]
    script = _WRAPPER.format(module=module, run=_CONSOLE.format(argv=argv))
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=credentials_env(moto_s3) | {"AWS_ENDPOINT_URL": moto_s3.endpoint_url},
        timeout=120,
        check=False,
    )
    assert _one_line(proc, proc.stderr) == "zerorename: interrupted"


def _interrupt_when(
    proxy: FaultProxy, operation: str, argv: list[str], env: dict[str, str]
) -> tuple[subprocess.Popen[str], str]:
    """Run ``zerorename ARGV`` and send it SIGINT once the proxy has seen ``operation``
    arrive; the process and its stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "zerorename.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120  # against a hang only: nothing is timed
        while proxy.stats.requests(operation) == 0:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"{operation} never arrived"
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc, err


@pytest.mark.parametrize(
    "module", ["zerorename.perf.harness", "zerorename.perf.scenarios.commit.latency"]
)
def test_ctrl_c_while_perf_loads_is_one_line(moto_s3: S3Target, module: str) -> None:
    argv = ["upload", "--target", "sink", "--reps", "1", "--quiet"]
    script = _WRAPPER.format(module=module, run=_PERF.format(argv=argv))
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=credentials_env(moto_s3),
        timeout=120,
        check=False,
    )
    assert _one_line(proc, proc.stderr) == "zerorename perf: interrupted"


def _put_interrupted_at(
    s3: S3Target, proxy: FaultProxy, tmp_path: Path, operation: str, key: str
) -> str:
    """``zerorename put`` of a 3-part file through ``proxy``, SIGINT once the proxy has
    seen ``operation`` arrive (held there by a latency rule); its one stderr line."""
    proxy.add_rule(FaultRule(operation=operation, fault="latency", delay=3.0))
    source = tmp_path / "big"
    source.write_bytes(os.urandom(11 * MiB))
    argv = ["put", str(source), f"s3://{s3.bucket}/{key}", "--part-size", "5m"]
    argv += ["--endpoint-url", proxy.url, "--addressing-style", "path"]
    proc, err = _interrupt_when(proxy, operation, argv, credentials_env(s3))
    return _one_line(proc, err)


def test_ctrl_c_after_the_complete_went_out_says_the_object_may_exist(
    moto_s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    proxy: FaultProxy = fault_proxy(moto_s3.endpoint_url)
    key = moto_s3.key("completing")
    line = _put_interrupted_at(moto_s3, proxy, tmp_path, "CompleteMultipartUpload", key)
    assert "may exist" in line and f"s3://{moto_s3.bucket}/{key}" in line, line
    assert "head-object" in line, line  # how to check


def test_ctrl_c_before_any_part_is_honest_and_leaves_nothing_pending(
    moto_s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    proxy: FaultProxy = fault_proxy(moto_s3.endpoint_url)
    key = moto_s3.key("creating")
    line = _put_interrupted_at(moto_s3, proxy, tmp_path, "CreateMultipartUpload", key)
    assert line.startswith("zerorename: interrupted"), line
    # the held create reaches the store whether or not the CLI still waits for it: look
    # only once the proxy has served it (else an upload it creates later goes unseen)
    log = proxy.timed_log(timeout=120)
    ops = [r.op for r in log]
    assert ops.count("CreateMultipartUpload") == 1 and proxy.stats.requests() == len(log), log
    client = moto_s3.boto3_client()
    listed = client.list_objects_v2(Bucket=moto_s3.bucket, Prefix=key).get("Contents", [])
    assert listed == []  # not written ...
    assert "exists" not in line.replace("may exist", ""), line  # ... and never claimed to be
    pending = client.list_multipart_uploads(Bucket=moto_s3.bucket, Prefix=key)
    assert pending.get("Uploads", []) == [], (line, log)  # the engine aborted what it created
    assert ops.count("AbortMultipartUpload") == 1, log


def test_ctrl_c_during_complete_says_some_may_have_completed(
    moto_s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    """``zerorename complete`` interrupted once its CompleteMultipartUpload went out."""
    key = moto_s3.key("deferred")
    record = tmp_path / "r.json"
    source = tmp_path / "big"
    source.write_bytes(os.urandom(6 * MiB))
    env = credentials_env(moto_s3) | {"AWS_ENDPOINT_URL": moto_s3.endpoint_url}
    argv = ["put", str(source), f"s3://{moto_s3.bucket}/{key}", "--part-size", "5m"]
    deferred = subprocess.run(
        [sys.executable, "-m", "zerorename.cli", *argv, "--defer", str(record)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert deferred.returncode == 0, deferred.stderr
    proxy: FaultProxy = fault_proxy(moto_s3.endpoint_url)
    proxy.add_rule(FaultRule(operation="CompleteMultipartUpload", fault="latency", delay=3.0))
    argv = ["complete", str(record), "--endpoint-url", proxy.url, "--addressing-style", "path"]
    proc, err = _interrupt_when(proxy, "CompleteMultipartUpload", argv, credentials_env(moto_s3))
    line = _one_line(proc, err)
    assert "may have been completed" in line, line


async def test_ctrl_c_during_a_create_that_then_fails_is_still_an_interrupt(
    moto_s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    """Ctrl-C as asyncio.Runner delivers it (``Task.cancel()`` of the main task) while the
    create is held; the create then fails (the proxy stops: its connection closes
    unanswered, no retry): the upload ends as cancelled, so the CLI says "interrupted",
    not the create's error. In process: no subprocess needed for the engine's part."""
    proxy: FaultProxy = fault_proxy(moto_s3.endpoint_url)
    proxy.add_rule(FaultRule(operation="CreateMultipartUpload", fault="stall", delay=600.0))
    cfg: EngineConfig = moto_s3.with_endpoint(proxy.url).engine_config(
        part_size=5 * MiB, retry=RetryConfig(max_attempts=1)
    )
    async with UploadEngine(cfg) as engine:
        task = asyncio.ensure_future(
            engine.upload(moto_s3.bucket, moto_s3.key("c"), bytes(11 * MiB))
        )
        while proxy.stats.requests("CreateMultipartUpload") == 0:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.to_thread(proxy.stop)  # after the cancel: the create fails only now
        with pytest.raises(asyncio.CancelledError):
            await task
    assert proxy.stats.requests() == proxy.stats.requests("CreateMultipartUpload") == 1
