"""The bridge inside real Spark Python workers: reused across tasks, flat resources,
clean exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections import defaultdict
from typing import Any

import pytest

from zerorename.spark_adapter.options import WriteOptions

pytestmark = pytest.mark.spark

TASKS = 510


def test_reused_worker_keeps_threads_and_connections_flat(spark: Any, zr: Any) -> None:
    cfg = WriteOptions.parse({"path": zr.uri(), **zr.options()}).engine_config()
    bucket, prefix = zr.target.bucket, zr.prefix("probe")

    def task(index: int, rows: Any) -> Any:
        import threading
        import time

        import psutil

        from zerorename.spark_adapter.bridge import get_bridge

        t0 = time.perf_counter()
        bridge = get_bridge()
        engine = bridge.engine(cfg)
        bridge.run(engine.put_object(bucket, f"{prefix}{index}", b"x"))
        proc = psutil.Process()
        # psutil's socket scan reads the whole system's tables: sample it every 20th task
        # and count socket descriptors of this process (cheap) on every task.
        tcp = len(proc.net_connections(kind="tcp")) if index % 20 == 0 else -1
        sockets = sum(
            os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
            for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")
        )
        yield (
            os.getpid(),
            index,
            threading.active_count(),
            sockets,
            proc.num_fds(),
            bridge.loops_started,
            bridge.resource_count(),
            tcp,
            time.perf_counter() - t0,
        )

    sc = spark.sparkContext
    res = sc.parallelize(range(TASKS), TASKS).mapPartitionsWithIndex(task).collect()
    assert len(res) == TASKS
    mean, top = sum(r[8] for r in res) / len(res), max(r[8] for r in res)
    print(f"task seconds: mean {mean:.4f} max {top:.4f}")
    by_pid: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for r in sorted(res, key=lambda r: r[1]):
        by_pid[r[0]].append(r)
    busiest = max(by_pid.values(), key=len)
    assert len(busiest) >= TASKS // 4, {p: len(v) for p, v in by_pid.items()}  # reused
    for rows in by_pid.values():
        assert {r[5] for r in rows} == {1}  # one loop per process, ever
        assert {r[6] for r in rows} == {1}  # one engine per process and config
        if len(rows) < 60:
            continue
        warm, late = rows[10 : len(rows) // 2], rows[len(rows) // 2 :]
        assert max(r[2] for r in late) <= max(r[2] for r in warm)  # threads
        assert max(r[3] for r in late) <= max(r[3] for r in warm)  # sockets
        assert max(r[4] for r in late) <= max(r[4] for r in warm)  # file descriptors
        tcp_warm = [r[7] for r in warm if r[7] >= 0]
        tcp_late = [r[7] for r in late if r[7] >= 0]
        assert tcp_late and max(tcp_late) <= max(max(tcp_warm), cfg.pool_size)  # psutil
    assert len(zr.list_keys("probe")) == TASKS


WORKER_SCRIPT = """
import json, os, sys
from pyspark.sql import SparkSession
from zerorename.engine import EngineConfig
cfg = EngineConfig(**json.loads(sys.argv[1]))
bucket, prefix = sys.argv[2], sys.argv[3]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.python.worker.reuse", "true").getOrCreate())

def task(index, rows):
    from zerorename.spark_adapter.bridge import get_bridge
    b = get_bridge()
    b.run(b.engine(cfg).put_object(bucket, f"{prefix}{index}", b"x"))
    yield os.getpid()

pids = sorted(set(spark.sparkContext.parallelize(range(20), 20)
                  .mapPartitionsWithIndex(task).collect()))
spark.stop()
print(json.dumps(pids))
"""


def test_workers_exit_without_hanging(spark_env: dict[str, str], zr: Any) -> None:
    import psutil

    cfg = zr.target.engine_config()
    args = json.dumps(
        {
            "endpoint_url": cfg.endpoint_url,
            "region": cfg.region,
            "addressing_style": cfg.addressing_style,
            "aws_access_key_id": cfg.aws_access_key_id,
            "aws_secret_access_key": cfg.aws_secret_access_key,
        }
    )
    proc = subprocess.run(  # timeout: a hang guard only
        [
            sys.executable,
            "-c",
            textwrap.dedent(WORKER_SCRIPT),
            args,
            zr.target.bucket,
            zr.prefix("exit"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    pids = json.loads(proc.stdout.strip().splitlines()[-1])
    assert pids
    deadline = time.monotonic() + 120  # a bounded wait (it ends when they are gone)
    while time.monotonic() < deadline and any(psutil.pid_exists(p) for p in pids):
        time.sleep(0.5)
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert alive == []  # the workers (with their loop threads) ended with the session
    assert len(zr.list_keys("exit")) == 20
