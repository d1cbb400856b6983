"""One file per partition per task, whatever the row order (issue 27), on a real local
Spark: the issue's case scaled down (20,000 rows in 2 tasks, 50 partition values in
random order, ``maxOpenFiles`` 4, so most partitions go through the local spill), for the
magic and directory committers on moto, once on RGW and in a stream batch; and with
``maxOpenFiles`` 1 (the smallest memory bound) the spill shows in ``_SUCCESS`` and the
files are right. Every test reads every row back."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from zerorename.spark_adapter import read_success

pytestmark = pytest.mark.spark

ROWS = 20_000
TASKS = 2
VALUES = 50
#: rows per Arrow batch Spark hands a task: several batches per task, so a partition comes
#: back after others (with one batch per task, any writer makes one file per partition)
BATCH_ROWS = 1_000


@pytest.fixture(autouse=True)
def small_batches(spark: Any) -> Any:
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key, None)
    spark.conf.set(key, str(BATCH_ROWS))
    yield
    if old is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, old)


def _frame(spark: Any) -> Any:
    """ROWS rows in TASKS tasks, partition column p with VALUES values in random order."""
    from pyspark.sql import functions as F

    return (
        spark.range(0, ROWS, 1, TASKS)
        .withColumn("p", (F.rand(3) * VALUES).cast("int"))
        .withColumn("s", F.concat(F.lit("row-"), F.col("id").cast("string")))
    )


def _check_layout(zr: Any, sub: str = "out") -> None:
    """At most one file per (partition, task), every partition present, every row back."""
    keys = [k for k in zr.data_keys(sub) if not k.startswith("_zerorename_streams/")]
    per_task = Counter((k.rsplit("/", 1)[0], k.rsplit("/", 1)[1].split("-")[1]) for k in keys)
    assert per_task and max(per_task.values()) == 1, per_task.most_common(3)
    assert len(keys) <= TASKS * VALUES
    assert {d for d, _ in per_task} == {f"p={v}" for v in range(VALUES)}
    table = zr.read_parquet(sub)
    assert sorted(table.column("id").to_pylist()) == list(range(ROWS))
    pairs = zip(table.column("id").to_pylist(), table.column("s").to_pylist(), strict=True)
    assert all(s == f"row-{i}" for i, s in pairs)


@pytest.mark.parametrize("committer", ["magic", "directory"])
def test_random_order_writes_one_file_per_partition_per_task(
    spark: Any, zr: Any, committer: str
) -> None:
    (
        _frame(spark)
        .write.format("zerorename")
        .mode("append")
        .options(**zr.options(committer=committer, partitionBy="p", maxOpenFiles=4))
        .save(zr.uri())
    )
    _check_layout(zr)
    info = read_success(zr.uri(), **zr.reader_options())
    assert info.rows == ROWS and info.files <= TASKS * VALUES
    assert 0 < info.metrics["spilled_rows"] < ROWS  # 4 partitions per task were not spilled


@pytest.mark.parametrize("s3", ["rgw"], indirect=True)
def test_random_order_on_rgw(spark: Any, zr_any: Any) -> None:
    (
        _frame(spark)
        .write.format("zerorename")
        .mode("append")
        .options(**zr_any.options(partitionBy="p", maxOpenFiles=4))
        .save(zr_any.uri())
    )
    _check_layout(zr_any)


def test_smallest_memory_bound_spills_and_writes_the_right_files(spark: Any, zr: Any) -> None:
    """maxOpenFiles 1 with the partitioned committer: one file open per task, all other
    partitions spilled (the _SUCCESS metric says how many rows), files still one per
    partition per task, every row back."""
    (
        _frame(spark)
        .write.format("zerorename")
        .mode("append")
        .options(**zr.options(committer="partitioned", partitionBy="p", maxOpenFiles=1))
        .save(zr.uri())
    )
    _check_layout(zr)
    info = read_success(zr.uri(), **zr.reader_options())
    assert ROWS * 0.9 < info.metrics["spilled_rows"] < ROWS  # all but 1 partition per task


def test_stream_batch_writes_one_file_per_partition_per_task(
    spark: Any, zr: Any, tmp_path: Path
) -> None:
    """One micro-batch of two source files (two tasks), rows in random partition order."""
    import random

    src = tmp_path / "src"
    src.mkdir()
    rng = random.Random(4)
    for n in range(TASKS):
        ids = range(n * ROWS // TASKS, (n + 1) * ROWS // TASKS)
        lines = (json.dumps({"id": i, "p": rng.randrange(VALUES), "s": f"row-{i}"}) for i in ids)
        (src / f"f{n}.json").write_text("\n".join(lines) + "\n")
    df = spark.readStream.schema("id LONG, p INT, s STRING").json(str(src))
    q = (
        df.writeStream.format("zerorename")
        .options(**zr.options(partitionBy="p", maxOpenFiles=4))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .outputMode("append")
        .trigger(availableNow=True)
        .start(zr.uri())
    )
    try:
        q.awaitTermination()
    finally:
        q.stop()
    _check_layout(zr)
