"""Task workers forked by zerorename's daemon (``spark.python.daemon.module``, set on the
run's session in tests/spark/conftest.py; the spark-submit tests keep pyspark's daemon)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from zerorename.spark_adapter import read_success

pytestmark = pytest.mark.spark

DAEMON = "zerorename.spark_adapter.daemon"


def _origin_probe() -> Any:
    """A task function (nested: Spark's pickler ships it by value) that yields, from its
    worker: the command line of the process the worker was forked from, whether the
    daemon's preload ran in it, and the worker's pid."""

    def origin(rows: Iterator[Any]) -> Iterator[tuple[str, bool, int]]:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read().replace(b"\0", b" ")
        module = sys.modules.get(DAEMON)
        yield parent.decode(), bool(getattr(module, "PRELOADED", False)), os.getpid()

    return origin


def test_tasks_run_in_workers_forked_by_the_warm_daemon(spark: Any) -> None:
    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == DAEMON
    seen = spark.sparkContext.parallelize(range(4), 4).mapPartitions(_origin_probe()).collect()
    assert len(seen) == 4
    for parent, preloaded, _pid in seen:
        assert f"-m {DAEMON} pyspark.worker" in parent  # Spark ran our daemon ...
        assert preloaded  # ... and the worker inherited what it loaded before the fork


def test_write_through_warm_workers_reads_back_exactly(spark: Any, zr: Any) -> None:
    df = spark.range(0, 600, 1, 3).selectExpr(
        "id", "CAST(id % 4 AS INT) AS k", "concat('v-', CAST(id AS STRING)) AS s"
    )
    opts = zr.options(partitionBy="k")
    df.write.format("zerorename").mode("overwrite").options(**opts).save(zr.uri())
    table = zr.read_parquet()
    rows = sorted(zip(*(table.column(c).to_pylist() for c in ("id", "s")), strict=True))
    assert rows == [(i, f"v-{i}") for i in range(600)]
    assert sorted({k.split("/")[0] for k in zr.data_keys()}) == [f"k={i}" for i in range(4)]
    info = read_success(zr.uri(), **zr.reader_options())
    assert (info.rows, info.committer) == (600, "magic")
    assert zr.pending_uploads() == []
    # the write's tasks ran in the warm daemon's workers (Spark reuses them: same pids)
    seen = spark.sparkContext.parallelize(range(2), 2).mapPartitions(_origin_probe()).collect()
    assert all(DAEMON in parent and preloaded for parent, preloaded, _ in seen)
