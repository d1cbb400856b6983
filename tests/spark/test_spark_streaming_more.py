"""More of Structured Streaming into ``format("zerorename")`` on a real local Spark: the
directory and partitioned committers and partitionBy per batch (moto, one case on Ceph
RGW), a reader in another process polling the destination while a stream commits batches
of several files (``committed_files`` never shows part of a batch), and speculation inside
a batch on a standalone cluster (only the accepted attempts' files).

Batches as in ``test_spark_streaming``: a directory of JSON files read one file per
micro-batch, so batch ``n`` holds exactly file ``n``'s ids.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from test_spark_streaming import ROWS_PER_FILE, _add_file, _logs, _no_leftovers

from zerorename.committers.paths import job_id_of_key

pytestmark = pytest.mark.spark

#: runs of each per-batch query (each a restart from the checkpoint adding one batch)
RUNS = 2


def _start(
    spark: Any, zr: Any, src: Path, ckpt: Path, tasks: int, sub: str = "out", **opts: Any
) -> Any:
    """Start the query (``tasks`` tasks per batch, a partition column ``p`` = id % 3)."""
    df = (
        spark.readStream.schema("id LONG, s STRING")
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
        .selectExpr("id", "s", "CAST(id % 3 AS STRING) AS p")
        .repartition(tasks)
    )
    return (
        df.writeStream.format("zerorename")
        .options(**zr.options(**opts))
        .option("checkpointLocation", str(ckpt))
        .outputMode("append")
        .trigger(availableNow=True)
        .start(zr.uri(sub))
    )


def _run(spark: Any, zr: Any, src: Path, ckpt: Path, tasks: int, **opts: Any) -> None:
    q = _start(spark, zr, src, ckpt, tasks, **opts)
    try:
        q.awaitTermination()
    finally:
        q.stop()


def _batch_ids(b: int) -> list[int]:
    return list(range(b * ROWS_PER_FILE, (b + 1) * ROWS_PER_FILE))


def _check_batches(zr: Any, batches: int, partitioned: bool, sub: str = "out") -> str:
    """The destination holds exactly the log's batches 0..batches-1, each batch's files
    (by the job id in their names) holding exactly its source file's rows, in the right
    partition directory; nothing pending, no record left. Returns the query id."""
    import pyarrow.parquet as pq

    ((query, lg),) = _logs(zr, sub).items()
    entries = lg["recent"]
    assert [e["batch"] for e in entries] == list(range(batches))
    by_job: dict[str | None, list[str]] = defaultdict(list)
    for k in zr.data_keys(sub):
        if not k.startswith("_zerorename_streams/"):
            by_job[job_id_of_key(k)].append(k)
    assert set(by_job) == {e["job_id"] for e in entries}, "a file of no committed batch"
    for e in entries:
        keys = by_job[e["job_id"]]
        assert len(keys) == e["files"] > 1
        ids = []
        for k in keys:
            table = pq.read_table(io.BytesIO(zr.get(zr.prefix(sub) + k)))
            got = table.column("id").to_pylist()
            if partitioned:
                part = k.split("/")[0]
                assert part.startswith("p=") and "p" not in table.column_names
                assert {i % 3 for i in got} == {int(part[2:])}
            ids += got
        assert sorted(ids) == _batch_ids(e["batch"]), e
        assert e["rows"] == ROWS_PER_FILE
    _no_leftovers(zr, sub)
    return str(query)


def _per_batch(spark: Any, zr: Any, tmp_path: Path, committer: str, part_by: str) -> None:
    src, ckpt = tmp_path / "src", tmp_path / "ckpt"
    src.mkdir()
    opts = {"committer": committer} | ({"partitionBy": part_by} if part_by else {})
    for n in range(RUNS):
        _add_file(src, n)
        _run(spark, zr, src, ckpt, 3, **opts)
        query = _check_batches(zr, n + 1, bool(part_by))
    from zerorename.spark_adapter import committed_files

    snap = committed_files(zr.uri(), **zr.reader_options())
    assert snap.batches == {query: tuple(range(RUNS))} and snap.older == ()
    assert sorted(f.key for f in snap.files) == sorted(
        zr.prefix() + k for k in zr.data_keys() if not k.startswith("_")
    )
    _check_is_not_vacuous(zr, bool(part_by))


def _check_is_not_vacuous(zr: Any, partitioned: bool) -> None:
    """The per-batch check fails on a stray file of no batch, on a batch short of a file
    and (partitioned) on a file in another partition's directory."""
    client, bucket = zr.client(), zr.target.bucket
    rel = next(k for k in zr.data_keys() if not k.startswith("_"))
    first, body = zr.prefix() + rel, zr.get(zr.prefix() + rel)
    job = job_id_of_key(first)
    assert job is not None
    stray = first.replace(job, "0" * 8 + job[8:])
    moved = zr.prefix() + "p=9/" + rel.split("/")[-1]

    def fails() -> None:
        with pytest.raises(AssertionError):
            _check_batches(zr, RUNS, partitioned)

    client.put_object(Bucket=bucket, Key=stray, Body=body)
    fails()
    client.delete_object(Bucket=bucket, Key=stray)
    client.delete_object(Bucket=bucket, Key=first)
    fails()
    if partitioned:
        client.put_object(Bucket=bucket, Key=moved, Body=body)
        fails()
        client.delete_object(Bucket=bucket, Key=moved)
    client.put_object(Bucket=bucket, Key=first, Body=body)
    _check_batches(zr, RUNS, partitioned)


@pytest.mark.parametrize(
    ("committer", "part_by"),
    [("magic", "p"), ("directory", ""), ("directory", "p")],
    ids=["magic-partitionBy", "directory", "directory-partitionBy"],
)
def test_committers_per_batch(
    spark: Any, zr: Any, tmp_path: Path, committer: str, part_by: str
) -> None:
    """Each run adds a batch of several files; after each the destination holds exactly
    the committed batches, each batch's files exactly its rows (moto)."""
    _per_batch(spark, zr, tmp_path, committer, part_by)


def test_partitioned_committer_per_batch(spark: Any, zr_any: Any, tmp_path: Path) -> None:
    """The partitioned committer (partitionBy p, conflicts judged per partition, append):
    the same per batch, on moto and Ceph RGW."""
    _per_batch(spark, zr_any, tmp_path, "partitioned", "p")


def test_a_reader_in_another_process_sees_whole_batches(
    spark: Any, zr: Any, tmp_path: Path
) -> None:
    """A reader process polls the destination (``committed_files`` and a plain listing)
    while a stream commits 6 batches of 8 files: every snapshot is a union of whole
    committed batches (0..k), the last one all 6. How often the plain listing saw part of a
    batch is printed, not asserted (it depends on timing)."""
    src, ckpt = tmp_path / "src", tmp_path / "ckpt"
    src.mkdir()
    batches, tasks = 6, 8
    for n in range(batches):  # Spark takes the oldest file first: batch n is file n
        _add_file(src, n)
        os.utime(src / f"f{n:03d}.json", (1e9 + n, 1e9 + n))
    out, stop = tmp_path / "polls.jsonl", tmp_path / "stop"
    reader = subprocess.Popen(
        [
            sys.executable,
            os.path.join(os.path.dirname(__file__), "stream_reader.py"),
            zr.uri(),
            json.dumps(zr.options()),
            str(out),
            str(stop),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        deadline = time.monotonic() + 60
        while not (out.exists() and out.read_text().count("\n") >= 1):
            assert reader.poll() is None, reader.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the reader made no first poll"
            time.sleep(0.1)
        _run(spark, zr, src, ckpt, tasks)
        stop.touch()
        stdout, stderr = reader.communicate(timeout=120)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.communicate()
    assert reader.returncode == 0 and "READER-OK" in stdout, stderr[-3000:]
    query = _check_batches(zr, batches, False)
    ((_, lg),) = _logs(zr).items()
    files = {e["job_id"]: e["files"] for e in lg["recent"]}
    batch_of = {e["job_id"]: e["batch"] for e in lg["recent"]}
    polls = [json.loads(line) for line in out.read_text().splitlines()]
    seen_batches, partial_plain, skipped, retried = [], 0, 0, 0
    for p in polls:
        per_job: dict[str, int] = defaultdict(int)
        for k in p["snap"]:
            per_job[job_id_of_key(k) or ""] += 1
        assert all(files.get(j) == n for j, n in per_job.items()), (p, files)
        got = sorted(batch_of[j] for j in per_job)
        assert got == list(range(len(got))), got  # batches 0..k, in order
        assert p["batches"].get(query, []) == got
        seen_batches.append(len(got))
        plain: dict[str, int] = defaultdict(int)
        for k in p["plain"]:
            plain[job_id_of_key(k) or ""] += 1
        partial_plain += any(0 < n < files.get(j, 0) for j, n in plain.items())
        skipped += bool(p["skipped"])
        retried += p["attempts"] > 1
    assert seen_batches[-1] == batches
    print(
        f"\nreader: {len(polls)} polls, snapshots by batches held "
        f"{sorted(Counter(seen_batches).items())}; "
        f"plain listing saw part of a batch in {partial_plain} polls; "
        f"snapshots that left out a commit under way: {skipped}; taken again: {retried}"
    )
    # the last snapshot, straight into pyarrow: every row once
    import pyarrow.dataset as ds

    from zerorename.spark_adapter import committed_files

    fs = zr.arrow_fs()
    snap = committed_files(zr.uri(), **zr.reader_options())
    table = ds.dataset(snap.paths, filesystem=fs, format="parquet").to_table()
    assert sorted(table.column("id").to_pylist()) == list(range(batches * ROWS_PER_FILE))


def test_speculation_inside_a_batch_keeps_only_the_accepted_attempt(
    cluster: Any, zr: Any, tmp_path: Path
) -> None:
    """Batch 0's partition 1: attempt 0 commits its task (its rows relabelled to
    ``p=loser``) and stalls; the speculative attempt 1 on the other worker commits and is
    accepted. Only attempt 1's files land; batch 1 follows; nothing pending, no record."""
    src, ckpt = tmp_path / "src", tmp_path / "ckpt"
    src.mkdir()
    for n in range(2):
        _add_file(src, n)
        os.utime(src / f"f{n:03d}.json", (1e9 + n, 1e9 + n))
    driver = os.path.join(os.path.dirname(__file__), "stream_speculation_driver.py")
    args = [cluster.master_url, json.dumps(zr.options()), zr.uri(), zr.uri("marks")]
    proc = subprocess.run(
        [sys.executable, driver, *args, str(src), str(ckpt)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert proc.returncode == 0 and "DRIVER-OK" in proc.stdout, proc.stderr[-4000:]
    marks = set(zr.list_keys("marks"))
    # both attempts of partition 1 committed their tasks; Spark accepted one
    if not {"b0-p1-a0-committed", "b0-p1-a1-committed"} <= marks:
        # the scenario needs Spark to have launched the speculative copy; on a loaded
        # machine it sometimes does not (seen once at load 7 with 4 xdist workers)
        pytest.skip(f"speculation did not run both attempts of partition 1: {sorted(marks)}")
    assert [k for k in zr.data_keys() if k.startswith("p=loser/")] == []
    _check_batches(zr, 2, True)
