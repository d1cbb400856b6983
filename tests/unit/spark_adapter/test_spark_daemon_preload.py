"""zerorename's Spark daemon (``spark.python.daemon.module``): what it loads before Spark's
workers fork from it is fork-safe (no thread, no socket, no event loop, none of the modules
that start threads when imported), botocore's S3 data is parsed once, and run as Spark runs
it, it hands over to pyspark's daemon (each probe a fresh interpreter)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

from needs import need_module
from zerorename.spark_adapter.daemon import PRELOAD

need_module("pyspark", "pip install -e '.[spark]'")

SRC = str(Path(__file__).resolve().parents[3] / "src")

#: what every zerorename task runs, loaded before the fork (the packages' names alone load
#: nothing: zerorename.engine and zerorename.committers resolve their names on first use)
TASK_MODULES = (
    "zerorename.committers.committer",
    "zerorename.committers.tasks",
    "zerorename.committers.sync",
    "zerorename.engine.core",
    "zerorename.spark_adapter.write",
    "botocore.client",
    "aiohttp",
)

PROBE = r"""
import json, os, sys, threading
from zerorename.spark_adapter import daemon
daemon.preload()
fds = []
for fd in os.listdir("/proc/self/fd"):
    try:
        fds.append(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        pass  # the listing's own descriptor
from zerorename.engine.wire.client import _LOADERS
TASK_MODULES = __TASK_MODULES__
(loader,) = _LOADERS.values()
print(json.dumps({
    "threads": len(os.listdir("/proc/self/task")),
    "python_threads": threading.active_count(),
    "sockets": [f for f in fds if f.startswith("socket:")],
    "pollers": [f for f in fds if "eventpoll" in f],  # every event loop opens one
    "loaded": [m for m in ("pyarrow", "numpy", "pandas") if m in sys.modules],
    "preloaded": [m for m in daemon.PRELOAD if m in sys.modules],
    "task_modules": [m for m in TASK_MODULES if m in sys.modules],
    "flag": daemon.PRELOADED,
    "s3_cached": loader.load_service_model("s3", "service-2")
    is loader.load_service_model("s3", "service-2"),
    "cache": len(loader._cache),
}))
""".replace("__TASK_MODULES__", repr(TASK_MODULES))


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_preload_starts_no_thread_opens_no_socket_and_no_loop() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=_env(), capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout)
    assert got["threads"] == 1 and got["python_threads"] == 1  # the OS's count and Python's
    assert got["sockets"] == []
    assert got["pollers"] == []  # no event loop (uvloop's nor asyncio's)
    assert got["loaded"] == []  # pyarrow, numpy and pandas start threads when imported
    assert got["flag"] and got["preloaded"] == list(PRELOAD)
    assert got["task_modules"] == list(TASK_MODULES)  # workers start with them loaded
    assert got["s3_cached"] and got["cache"] >= 6  # the S3 model and shared data, parsed


def _serve_and_stop(module: str) -> tuple[int, bytes]:
    """Start ``python -m module pyspark.worker`` as Spark does, read the port it answers
    with on stdout, close its stdin (Spark's "exit now"): (exit status, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "pyspark.worker"],
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None and proc.stderr is not None
        (port,) = struct.unpack("!i", proc.stdout.read(4))
        assert 0 < port < 65536
        proc.stdin.close()
        return proc.wait(timeout=60), proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_run_as_spark_runs_it_it_behaves_as_pysparks_daemon() -> None:
    ours = _serve_and_stop("zerorename.spark_adapter.daemon")
    assert ours == _serve_and_stop("pyspark.daemon")  # pyspark's exits 1 here, silently
