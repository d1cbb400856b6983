"""End-to-end writes through the `zerorename` data source on a real local Spark."""

from __future__ import annotations

import gzip
import json
import os
import threading
from typing import Any

import pytest

from zerorename.spark_adapter import read_success

pytestmark = pytest.mark.spark


def _df(spark: Any, n: int = 1000, parts: int = 4) -> Any:
    return spark.range(0, n, 1, parts).selectExpr(
        "id", "CAST(id % 3 AS INT) AS k", "concat('row-', CAST(id AS STRING)) AS s"
    )


def _save(df: Any, zr: Any, mode: str = "append", sub: str = "out", **opts: Any) -> None:
    df.write.format("zerorename").mode(mode).options(**zr.options(**opts)).save(zr.uri(sub))


@pytest.mark.also_https
def test_write_parquet_reads_back(spark: Any, zr_any: Any) -> None:
    _save(_df(spark), zr_any)
    keys = zr_any.data_keys()
    assert len(keys) == 4
    assert all(k.startswith("part-0000") and k.endswith(".snappy.parquet") for k in keys)
    table = zr_any.read_parquet()
    rows = sorted(zip(*(table.column(c).to_pylist() for c in ("id", "k", "s")), strict=True))
    assert rows == [(i, i % 3, f"row-{i}") for i in range(1000)]
    assert zr_any.pending_uploads() == []
    assert [k for k in zr_any.list_keys() if "__magic" in k] == []
    info = read_success(zr_any.uri(), **zr_any.reader_options())
    assert (info.files, info.rows, info.committer) == (4, 1000, "magic")
    total = sum(len(zr_any.get(zr_any.prefix() + k)) for k in keys)
    assert info.bytes == total  # bytes written are reported, not 0
    assert all(info.job_id in k for k in keys)


def test_empty_partitions_write_nothing(spark: Any, zr: Any) -> None:
    df = _df(spark, n=2, parts=1).repartition(6)
    _save(df, zr)
    assert len(zr.data_keys()) <= 3  # the rows' partitions, and partition 0 as Spark writes it
    assert read_success(zr.uri(), **zr.reader_options()).rows == 2


def test_empty_dataframe_commits_an_empty_job(spark: Any, zr: Any) -> None:
    df = spark.createDataFrame([], "id long, s string")
    _save(df, zr)
    (key,) = zr.data_keys()  # Spark's schema-only file, so spark.read.parquet works
    assert key.endswith(".snappy.parquet")
    info = read_success(zr.uri(), **zr.reader_options())
    assert (info.files, info.rows) == (1, 0)
    assert zr.pending_uploads() == []


@pytest.mark.parametrize(
    ("fmt", "codec", "suffix"),
    [("csv", "gzip", ".csv.gz"), ("json", "none", ".json"), ("text", "none", ".txt")],
)
def test_other_formats(spark: Any, zr: Any, fmt: str, codec: str, suffix: str) -> None:
    df = _df(spark, 100, 2)
    if fmt == "text":
        df = df.select("s")
    _save(df, zr, format=fmt, compression=codec, header="true")
    keys = zr.data_keys()
    assert keys and all(k.endswith(suffix) for k in keys)
    lines: list[str] = []
    for k in keys:
        data = zr.get(zr.prefix() + k)
        if codec == "gzip":
            data = gzip.decompress(data)
        lines += data.decode().splitlines()
    if fmt == "csv":
        assert sorted(lines)[-1] == "id,k,s" or '"id","k","s"' in lines
        assert len(lines) == 100 + len(keys)  # one header per file
    elif fmt == "json":
        assert sorted(json.loads(x)["id"] for x in lines) == list(range(100))
    else:
        assert sorted(lines) == sorted(f"row-{i}" for i in range(100))


TRICKY = ["a b", "x/y", "k=v", "100%", "q?", "c:d", "é ü", "", None, "+plus", "*[]{}^\\"]


def test_partition_dirs_match_spark_and_read_back(spark: Any, zr: Any, tmp_path: Any) -> None:
    rows = [(i, TRICKY[i % len(TRICKY)], i % 2) for i in range(110)]
    df = spark.createDataFrame(rows, "id long, p string, q int").repartition(3)
    _save(df, zr, partitionBy="p,q")
    ours = sorted({k.rsplit("/", 1)[0] for k in zr.data_keys()})
    df.write.partitionBy("p", "q").parquet(str(tmp_path / "spark"))
    theirs = sorted(
        os.path.relpath(d, tmp_path / "spark")
        for d, _, files in os.walk(tmp_path / "spark")
        if any(f.endswith(".parquet") for f in files)
    )
    assert ours == theirs
    back = spark.read.parquet(str(tmp_path / "spark"))  # Spark's own reading of dir names
    assert back.count() == 110
    table = zr.read_parquet()
    assert sorted(table.column("id").to_pylist()) == list(range(110))
    assert "p" not in table.schema.names[:1]  # partition columns are not in the files


def test_partitioned_committer_replaces_only_touched_partitions(spark: Any, zr_any: Any) -> None:
    first = spark.createDataFrame([(i, f"d{i % 3}") for i in range(30)], "id long, day string")
    _save(first, zr_any, committer="partitioned", partitionBy="day")
    second = spark.createDataFrame([(100 + i, "d1") for i in range(5)], "id long, day string")
    _save(second, zr_any, mode="overwrite", committer="partitioned", partitionBy="day")
    table = zr_any.read_parquet()
    got = sorted(zip(table.column("day").to_pylist(), table.column("id").to_pylist(), strict=True))
    want = sorted(
        [(f"d{i % 3}", i) for i in range(30) if i % 3 != 1] + [("d1", 100 + i) for i in range(5)]
    )
    assert got == want
    assert zr_any.pending_uploads() == []


@pytest.mark.parametrize("committer", ["magic", "directory"])
def test_overwrite_replaces_destination(spark: Any, zr: Any, committer: str) -> None:
    _save(_df(spark, 100, 2), zr, committer=committer)
    old = set(zr.data_keys())
    _save(_df(spark, 50, 3), zr, mode="overwrite", committer=committer)
    new = set(zr.data_keys())
    assert len(new) == 3 and not (old & new)
    assert sorted(zr.read_parquet().column("id").to_pylist()) == list(range(50))
    info = read_success(zr.uri(), **zr.reader_options())
    assert info.rows == 50 and info.committer in ("magic", "staging")


def test_append_adds_files(spark: Any, zr: Any) -> None:
    _save(_df(spark, 100, 2), zr)
    _save(_df(spark, 100, 2), zr)
    assert len(zr.data_keys()) == 4
    assert len(zr.read_parquet()) == 200


def test_conflict_fail_refuses_non_empty_destination(spark: Any, zr: Any) -> None:
    _save(_df(spark, 10, 1), zr)
    before = zr.list_keys()
    with pytest.raises(Exception, match=r"(?i)conflict|already|exist"):
        _save(_df(spark, 10, 2), zr, conflict="fail")
    assert zr.list_keys() == before
    assert zr.pending_uploads() == []


def test_credentials_as_options_are_refused(spark: Any, zr: Any) -> None:
    with pytest.raises(Exception, match="credential") as info:
        _save(_df(spark, 10, 1), zr, secretKey="SHOULD-NOT-APPEAR")
    assert "SHOULD-NOT-APPEAR" not in str(info.value)
    assert zr.list_keys() == []


def test_two_jobs_same_destination_concurrently(spark: Any, zr_any: Any) -> None:
    errors: list[BaseException] = []

    from zerorename.spark_adapter import activate

    def job(offset: int) -> None:
        try:
            activate(spark)  # the JVM looks Python data sources up per thread
            df = spark.range(offset, offset + 500, 1, 3).selectExpr("id")
            _save(df, zr_any)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(i * 1000,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    keys = zr_any.data_keys()
    assert len(keys) == 6 and len({k.split("-", 2)[2][:36] for k in keys}) == 2
    ids = sorted(zr_any.read_parquet().column("id").to_pylist())
    assert ids == list(range(500)) + list(range(1000, 1500))
    assert zr_any.pending_uploads() == []
    assert [k for k in zr_any.list_keys() if "__magic" in k] == []


def test_rdd_api(spark: Any, zr: Any) -> None:
    from zerorename.spark_adapter import write_partitions

    def write(index: int, rows: Any, out: Any) -> None:
        with out.open(f"logs/{out.part_name('.txt')}") as f:
            for r in rows:
                f.write(f"{r}\n".encode())

    rdd = spark.sparkContext.parallelize(range(100), 4)
    outcome = write_partitions(rdd, zr.uri(), write, **zr.options())
    keys = zr.data_keys()
    assert len(keys) == 4 and all(k.startswith("logs/part-") for k in keys)
    assert all(outcome.job_id in k for k in keys)
    lines = [x for k in keys for x in zr.get(zr.prefix() + k).decode().split()]
    assert sorted(map(int, lines)) == list(range(100))
    assert outcome.files == 4 and outcome.bytes == sum(len(x) + 1 for x in lines)
    assert zr.pending_uploads() == []


def test_rdd_api_failure_aborts(spark: Any, zr: Any) -> None:
    from zerorename.spark_adapter import write_partitions

    def write(index: int, rows: Any, out: Any) -> None:
        f = out.open(f"{out.part_name('.bin')}")
        f.write(b"x" * 1000)
        f.close()
        if index == 1:
            raise ValueError("boom")

    rdd = spark.sparkContext.parallelize(range(10), 2)
    with pytest.raises(Exception, match="boom"):
        write_partitions(rdd, zr.uri(), write, **zr.options())
    assert zr.list_keys() == []
    assert zr.pending_uploads() == []
