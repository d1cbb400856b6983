"""Structured Streaming into ``format("zerorename")`` on a real local Spark and moto.

The source is a directory of JSON files read one file per micro-batch
(``maxFilesPerTrigger=1``) with ``trigger(availableNow=True)``: each run of the query
processes what is there and stops, so each run is a restart from the checkpoint and the
batches are exactly reproducible. The destination is read back with pyarrow's own S3
filesystem (a reader that knows nothing of zerorename).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

ROWS_PER_FILE = 20


@pytest.fixture(scope="module")
def faulty_stream(spark: Any) -> Any:
    import streaming_faulty as mod  # tests/spark (pytest puts this directory on sys.path)

    mod.register_faulty_stream(spark)
    return spark


def _add_file(src: Path, n: int) -> list[int]:
    """Source file number ``n``: ids n*ROWS .. n*ROWS+ROWS-1."""
    ids = list(range(n * ROWS_PER_FILE, (n + 1) * ROWS_PER_FILE))
    tmp = src / f".f{n:03d}.tmp"
    tmp.write_text("".join(json.dumps({"id": i, "s": f"row-{i}"}) + "\n" for i in ids))
    tmp.rename(src / f"f{n:03d}.json")
    return ids


def _run(
    spark: Any,
    zr: Any,
    src: Path,
    ckpt: Path,
    fmt: str = "zerorename",
    sub: str = "out",
    **opts: Any,
) -> None:
    """One availableNow run of the query (a start from the checkpoint); raises its error."""
    df = spark.readStream.schema("id LONG, s STRING").option("maxFilesPerTrigger", 1).json(str(src))
    q = (
        df.writeStream.format(fmt)
        .options(**zr.options(**opts))
        .option("checkpointLocation", str(ckpt))
        .outputMode("append")
        .trigger(availableNow=True)
        .start(zr.uri(sub))
    )
    try:
        q.awaitTermination()
    finally:
        q.stop()


def _read_ids(zr: Any, sub: str = "out") -> list[int]:
    """Every id in the destination, as pyarrow's dataset reader sees it (sorted, with
    duplicates)."""
    import pyarrow.dataset as ds

    fs = zr.arrow_fs()
    base = f"{zr.target.bucket}/{zr.prefix(sub).rstrip('/')}"
    table = ds.dataset(base, filesystem=fs, format="parquet").to_table()
    return sorted(table.column("id").to_pylist())


def _logs(zr: Any, sub: str = "out") -> dict[str, dict[str, Any]]:
    out = {}
    for k in zr.list_keys(sub):
        if k.startswith("_zerorename_streams/") and k.endswith("/log.json"):
            out[k.split("/")[1]] = json.loads(zr.get(zr.prefix(sub) + k))
    return out


def _no_leftovers(zr: Any, sub: str = "out") -> None:
    assert zr.pending_uploads() == []
    assert [k for k in zr.list_keys(sub) if k.startswith("__magic") or "/jobs/" in k] == []
    for lg in _logs(zr, sub).values():
        assert lg["pending"] is None


def test_each_batch_lands_once(spark: Any, zr_any: Any, tmp_path: Path) -> None:
    """Each run (a restart from the checkpoint) adds one batch; after each the destination
    holds exactly the committed batches (moto and Ceph RGW)."""
    zr = zr_any
    src, ckpt = tmp_path / "src", tmp_path / "ckpt"
    src.mkdir()
    expected: list[int] = []
    for n in range(3):
        expected += _add_file(src, n)
        _run(spark, zr, src, ckpt)
        assert _read_ids(zr) == sorted(expected)
        _no_leftovers(zr)
    logs = _logs(zr)
    assert len(logs) == 1
    ((query_id, lg),) = logs.items()
    assert json.loads((ckpt / "metadata").read_text())["id"] == query_id
    assert lg["last_batch"] == 2
    assert lg["totals"]["batches"] == 3 and lg["totals"]["rows"] == 3 * ROWS_PER_FILE
    assert [e["batch"] for e in lg["recent"]] == [0, 1, 2]
    assert "_SUCCESS" not in zr.list_keys()


@pytest.mark.parametrize("fault", ["commit", "commitexit"])
def test_commit_fails_after_sink_committed_no_duplicates(
    faulty_stream: Any, zr: Any, tmp_path: Path, fault: str
) -> None:
    """The sink commits batch 1, then the commit raises (or its worker dies) before Spark
    records it: Spark aborts, the query fails; the restart re-runs batch 1 and the sink
    skips it."""
    src, ckpt = tmp_path / "src", tmp_path / "ckpt"
    src.mkdir()
    expected = _add_file(src, 0) + _add_file(src, 1) + _add_file(src, 2)
    with pytest.raises(Exception) as died:
        _run(
            faulty_stream,
            zr,
            src,
            ckpt,
            fmt="zerorename_faulty_stream",
            fault=fault,
            faultbatch="1",
            faultonce=str(tmp_path / "fired"),
        )
    if fault == "commit":
        assert "injected failure" in str(died.value)
    assert _read_ids(zr) == sorted(expected[: 2 * ROWS_PER_FILE])  # batches 0 and 1 landed
    _run(faulty_stream, zr, src, ckpt)
    assert _read_ids(zr) == sorted(expected)
    _no_leftovers(zr)
    (lg,) = _logs(zr).values()
    assert [e["batch"] for e in lg["recent"]] == [0, 1, 2]


@pytest.mark.parametrize("fault", ["task", "taskexit"])
def test_task_retry_keeps_only_accepted_attempts(
    faulty_stream: Any, zr: Any, tmp_path: Path, fault: str
) -> None:
    """An attempt fails after its task commit (raises, or its worker dies with its uploads
    pending): Spark retries the task; only the accepted attempt's file lands."""
    src, ckpt = tmp_path / "src", tmp_path / "ckpt"
    src.mkdir()
    expected = _add_file(src, 0)
    _run(
        faulty_stream,
        zr,
        src,
        ckpt,
        fmt="zerorename_faulty_stream",
        fault=fault,
        faultbatch="0",
        faultonce=str(tmp_path / "fired"),
    )
    assert _read_ids(zr) == sorted(expected)
    _no_leftovers(zr)


def test_two_queries_share_a_destination(spark: Any, zr: Any, tmp_path: Path) -> None:
    """Two checkpoints (two query ids) on one destination: kept apart by query id."""
    src = tmp_path / "src"
    src.mkdir()
    ids = _add_file(src, 0) + _add_file(src, 1)
    _run(spark, zr, src, tmp_path / "ckpt-a")
    _run(spark, zr, src, tmp_path / "ckpt-b")
    _run(spark, zr, src, tmp_path / "ckpt-a")  # a restart of the first: nothing new
    assert _read_ids(zr) == sorted(ids + ids)
    logs = _logs(zr)
    assert len(logs) == 2
    assert all(lg["last_batch"] == 1 for lg in logs.values())
    _no_leftovers(zr)


@pytest.mark.parametrize("mode", ["complete", "update"])
def test_other_output_modes_are_refused(spark: Any, zr: Any, tmp_path: Path, mode: str) -> None:
    src = tmp_path / "src"
    src.mkdir()
    _add_file(src, 0)
    df = spark.readStream.schema("id LONG, s STRING").json(str(src)).groupBy("s").count()
    q = (
        df.writeStream.format("zerorename")
        .options(**zr.options())
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .outputMode(mode)
        .trigger(availableNow=True)
        .start(zr.uri())
    )
    try:
        # complete: zerorename refuses it; update: Spark does (no Python sink supports it)
        match = {"complete": r"outputMode\('append'\) only", "update": "not support Update"}
        with pytest.raises(Exception, match=match[mode]):
            q.awaitTermination()
    finally:
        q.stop()
    assert zr.list_keys() == []
