"""``mode("overwrite")`` under Spark's partition overwrite mode, against Spark's own Parquet
writer on a local directory: the same data, the same setting, the same partitions left.

The issue's case: ``id, id % 3 AS day`` written partitioned by day, then overwritten with
the ``day = 1`` rows only. Dynamic (set on the session, or as the write's option) keeps
day=0 and day=2 byte for byte and replaces day=1, with every committer. Static (Spark's
default, or the option over a dynamic session) replaces what it replaced before: the
whole destination (magic, directory), the partitions written (partitioned).

Each destination starts from the files of one local Spark write (uploaded as they are),
so a partition both sides kept holds the same bytes on both; a partition rewritten holds
the same rows."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from zerorename.spark_adapter import read_success

pytestmark = pytest.mark.spark

SETTING = "spark.sql.sources.partitionOverwriteMode"
ROWS = 30
#: how the mode is given: (session setting, write option); what Spark does with it
SCENARIOS: dict[str, tuple[str | None, str | None]] = {
    "session-dynamic": ("dynamic", None),
    "option-dynamic": (None, "dynamic"),
    "default-static": (None, None),
    "option-static-wins": ("dynamic", "static"),
}
DYNAMIC = {"session-dynamic", "option-dynamic"}

#: a partition's content: {file name: bytes} and the ids it holds
Partition = tuple[dict[str, bytes], list[int]]


def _df(spark: Any, day: int | None = None) -> Any:
    df = spark.range(0, ROWS, 1, 3).selectExpr("id", "CAST(id % 3 AS INT) AS day")
    return df if day is None else df.where(f"day = {day}")


@contextmanager
def _session(spark: Any, value: str | None) -> Iterator[None]:
    """The shared session with ``SETTING`` set (or unset) for the block, restored after."""
    old = spark.conf.get(SETTING, None)
    try:
        if value is None:
            spark.conf.unset(SETTING)
        else:
            spark.conf.set(SETTING, value)
        yield
    finally:
        if old is None:
            spark.conf.unset(SETTING)
        else:
            spark.conf.set(SETTING, old)


def _ids(data: bytes) -> list[int]:
    import pyarrow.parquet as pq

    return [int(i) for i in pq.read_table(io.BytesIO(data)).column("id").to_pylist()]


def _partitions(files: dict[str, bytes]) -> dict[str, Partition]:
    """{relative path: bytes} of Parquet files -> {partition dir: (files, sorted ids)}."""
    out: dict[str, Partition] = {}
    for rel, data in sorted(files.items()):
        part, _, name = rel.rpartition("/")
        named, ids = out.setdefault(part, ({}, []))
        named[name] = data
        ids.extend(_ids(data))
    return {p: (named, sorted(ids)) for p, (named, ids) in out.items()}


def _local_files(root: Path) -> dict[str, bytes]:
    """The Parquet files Spark wrote under ``root`` (no _SUCCESS, no .crc)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*.parquet")
        if not any(c.startswith((".", "_")) for c in p.relative_to(root).parts)
    }


def _zr_files(zr: Any, sub: str) -> dict[str, bytes]:
    return {k: zr.get(zr.prefix(sub) + k) for k in zr.data_keys(sub) if k.endswith(".parquet")}


def _overwrite(df: Any, option: str | None) -> Any:
    w = df.write.mode("overwrite")
    return w.option("partitionOverwriteMode", option) if option else w


@pytest.fixture(scope="module")
def local(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Spark's own Parquet writer: the initial files, and what each scenario leaves."""
    root = tmp_path_factory.mktemp("local")
    first = root / "first"
    _df(spark).write.mode("overwrite").partitionBy("day").parquet(str(first))
    out: dict[str, Any] = {"first": _local_files(first)}
    for name, (session, option) in SCENARIOS.items():
        shutil.copytree(first, root / name)
        with _session(spark, session):
            _overwrite(_df(spark, 1), option).partitionBy("day").parquet(str(root / name))
        out[name] = _partitions(_local_files(root / name))
    return out


def _upload(zr: Any, sub: str, files: dict[str, bytes]) -> None:
    client = zr.client()
    for rel, data in files.items():
        client.put_object(Bucket=zr.target.bucket, Key=zr.prefix(sub) + rel, Body=data)


def _same_as_spark(got: dict[str, Partition], want: dict[str, Partition], rewritten: str) -> None:
    """The same partitions; those not rewritten byte for byte (the same files), the
    rewritten one with the same rows (written by another writer)."""
    assert sorted(got) == sorted(want)
    for part, (files, ids) in want.items():
        if part == rewritten:
            assert got[part][1] == ids
        else:
            assert got[part] == (files, ids), part


@pytest.mark.parametrize("committer", ["magic", "directory", "partitioned"])
def test_overwrite_leaves_what_spark_parquet_leaves(
    spark: Any, zr: Any, local: dict[str, Any], committer: str
) -> None:
    for name, (session, option) in SCENARIOS.items():
        sub = f"{committer}-{name}"
        _upload(zr, sub, local["first"])
        with _session(spark, session):
            w = _overwrite(_df(spark, 1), option).format("zerorename")
            w.options(**zr.options(committer=committer, partitionBy="day")).save(zr.uri(sub))
        got = _partitions(_zr_files(zr, sub))
        # static by the partitioned committer: the partitions written, as before (S3A's)
        like = "session-dynamic" if committer == "partitioned" else name
        _same_as_spark(got, local[like], "day=1")
        if name in DYNAMIC or committer == "partitioned":
            assert sorted(got) == ["day=0", "day=1", "day=2"], name
        else:
            assert sorted(got) == ["day=1"], name
        info = read_success(zr.uri(sub), **zr.reader_options())
        assert info.rows == ROWS // 3
        assert zr.pending_uploads(sub) == []
    if committer == "magic":
        # an overwrite with no rows: dynamic replaces no partition (Spark: the same)
        with _session(spark, "dynamic"):
            w = _overwrite(_df(spark).limit(0), None).format("zerorename")
            w.options(**zr.options(partitionBy="day")).save(zr.uri("magic-session-dynamic"))
        got = _partitions(_zr_files(zr, "magic-session-dynamic"))
        _same_as_spark(got, local["session-dynamic"], "day=1")


@pytest.mark.parametrize("s3", ["rgw"], indirect=True)
def test_dynamic_overwrite_on_rgw(spark: Any, zr_any: Any, local: dict[str, Any]) -> None:
    """A zerorename write, then a dynamic overwrite set on the session (magic)."""
    opts = zr_any.options(partitionBy="day")
    _df(spark).write.format("zerorename").mode("append").options(**opts).save(zr_any.uri())
    before = _partitions(_zr_files(zr_any, "out"))
    with _session(spark, "dynamic"):
        _df(spark, 1).write.format("zerorename").mode("overwrite").options(**opts).save(
            zr_any.uri()
        )
    got = _partitions(_zr_files(zr_any, "out"))
    want = local["session-dynamic"]
    assert sorted(got) == sorted(want) == ["day=0", "day=1", "day=2"]
    assert {p: ids for p, (_, ids) in got.items()} == {p: ids for p, (_, ids) in want.items()}
    assert got["day=0"] == before["day=0"] and got["day=2"] == before["day=2"]  # byte for byte
    assert not set(got["day=1"][0]) & set(before["day=1"][0])  # day=1's old files replaced
    assert zr_any.pending_uploads() == []
