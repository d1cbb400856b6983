"""The ``spark`` perf scenario: each client's measure function in a harness child process
(its own local Spark session) against moto at a tiny size, and the rename baseline's output
equal in rows to the magic committer's. No wall-clock assertions.

The rename and magic runs share one child (tests/spark/perf_clients.py: one JVM start
instead of two, ~12 CPU-s): rename first, in the fresh process; magic second, after its
session stopped. The timed zerorename writer in a fresh child is the directory test's."""

from __future__ import annotations

import argparse
import io
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from needs import missing, need_module
from perf_helpers import perf_target
from zerorename.perf.model import Run, Sample, Target, run_in_child
from zerorename.perf.scenarios.spark import (
    FUNC,
    add_arguments,
    notes,
    plan,
    plot,
    rows_for,
)
from zerorename.servers.targets import S3Target

pytestmark = pytest.mark.spark
if shutil.which("java") is None:  # skipped, or failed under CI=true
    missing(
        "java is not on PATH: PySpark needs Java 17 (apt-get install -y openjdk-17-jre-headless)"
    )

SIZE_MB = 2
DAYS = 3


def _list(client: Any, bucket: str, prefix: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out.update({o["Key"][len(prefix) :]: int(o["Size"]) for o in page.get("Contents", [])})
    return out


def _rows(client: Any, bucket: str, prefix: str, keys: list[str]) -> list[tuple[Any, ...]]:
    """Every row of the Parquet files, with the Hive partition value, sorted."""
    import pyarrow.parquet as pq

    rows: list[tuple[Any, ...]] = []
    for rel in keys:
        body = client.get_object(Bucket=bucket, Key=prefix + rel)["Body"].read()
        table = pq.read_table(io.BytesIO(body))
        day = rel.split("/")[0].removeprefix("day=")
        for r in table.to_pylist():
            rows.append((r["id"], r["key"], r["value"], r["payload"], day))
    return sorted(rows)


def _params(client: str, **extra: Any) -> dict[str, Any]:
    return {
        "client": client,
        "size_mb": SIZE_MB,
        "partitions": 2,
        "partition_by": "day",
        "days": DAYS,
        **extra,
    }


def _check_metrics(client: str, metrics: dict[str, float]) -> None:
    assert set(metrics) >= {"commit_s", "write_s", "task_commit_s", "output_mb", "files"}
    assert metrics["verified"] == 1.0, (client, metrics)
    assert metrics["commit_s"] > 0 and metrics["write_s"] > metrics["commit_s"]


def test_magic_and_rename_write_the_same_rows(
    moto_s3: S3Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = perf_target(moto_s3)
    s3 = moto_s3.boto3_client()
    here = os.path.dirname(os.path.abspath(__file__))  # the child imports perf_clients
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, (here, os.environ.get("PYTHONPATH"))))
    )
    clients = ("rename", "magic")  # rename in the fresh process, magic after it
    runs = [_params(c, run_id=f"test-{c}", keep=True) for c in clients]
    both = run_in_child("perf_clients:measure_each", target, {"runs": runs}, timeout=600)
    outputs: dict[str, dict[str, int]] = {}
    for client in clients:
        metrics = {k.split(":", 1)[1]: v for k, v in both.items() if k.startswith(client + ":")}
        _check_metrics(client, metrics)
        prefix = target.key("spark", f"test-{client}") + "/"
        listing = _list(s3, target.bucket, prefix)
        assert "_SUCCESS" in listing
        data = {k: v for k, v in listing.items() if k != "_SUCCESS"}
        # nothing but the data files: no _temporary, no __magic records
        assert data and all(k.startswith("day=") and k.endswith(".snappy.parquet") for k in data)
        assert len({k.split("/")[0] for k in data}) == DAYS
        assert metrics["files"] == len(data)
        assert metrics["output_mb"] == pytest.approx(sum(data.values()) / 1e6)
        pending = s3.list_multipart_uploads(Bucket=target.bucket, Prefix=prefix)
        assert not pending.get("Uploads")
        outputs[client] = data

    # the baseline writes the same files (same router; names differ by job id only)
    def shape(data: dict[str, int]) -> list[tuple[str, int]]:
        return sorted((k.split("/")[0], v) for k, v in data.items())

    assert shape(outputs["rename"]) == shape(outputs["magic"])
    rows = {
        c: _rows(s3, target.bucket, target.key("spark", f"test-{c}") + "/", sorted(outputs[c]))
        for c in ("magic", "rename")
    }
    assert len(rows["magic"]) == rows_for(SIZE_MB)
    assert rows["rename"] == rows["magic"]


def test_directory_unpartitioned_run_deletes_its_prefix(moto_s3: S3Target) -> None:
    target = perf_target(moto_s3)
    metrics = run_in_child(FUNC, target, _params("directory", partition_by=""), timeout=400)
    _check_metrics("directory", metrics)
    assert metrics["files"] == 2  # one file per task without partitioning
    assert _list(moto_s3.boto3_client(), target.bucket, target.prefix + "/") == {}


# ---------------------------------------------------------------- plan, notes, plot (pure)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_plan_groups_runs_by_size() -> None:
    target = Target("moto", "http://127.0.0.1:1", "b")
    runs = plan(_args(), target)
    assert [(r.client, r.group) for r in runs] == [
        (c, f"{z}MB") for z in (100, 1000) for c in ("magic", "directory", "rename")
    ]
    assert all(isinstance(r, Run) and r.func == FUNC for r in runs)
    assert runs[0].params["partition_by"] == "day" and runs[0].params["partitions"] == 8
    runs = plan(_args("--sizes-mb", "5", "--clients", "rename", "--partition-by", "none"), target)
    assert [(r.client, r.params["size_mb"], r.params["partition_by"]) for r in runs] == [
        ("rename", 5, "")
    ]
    with pytest.raises(ValueError):
        plan(_args("--clients", "magic,s3a"), target)


def _samples() -> list[Sample]:
    figures = {
        ("magic", 100): 0.4,
        ("magic", 1000): 0.44,
        ("directory", 100): 0.5,
        ("directory", 1000): 0.6,
        ("rename", 100): 3.0,
        ("rename", 1000): 30.0,
    }
    return [
        Sample(
            "spark",
            c,
            {"client": c, "size_mb": z},
            {"commit_s": v * (1 + rep / 10), "write_s": 10.0 + z / 100, "verified": 1.0},
            rep,
        )
        for (c, z), v in figures.items()
        for rep in range(2)
    ]


def test_notes_report_flatness_and_speedup() -> None:
    text = "\n".join(notes(_samples(), _args()))
    assert "magic" in text and "x1.10, flat" in text
    assert "rename baseline / magic commit time: 100 MB x7.5, 1000 MB x68.2" in text
    assert "goal: magic >= 10x faster than rename at 1000 MB (x68.2: met)" in text
    assert "WARNING" not in text
    assert "flat from 100 to 1000 MB (x1.10 <= " in text
    assert notes([], _args()) == []
    one_size = [s for s in _samples() if s.params["size_mb"] == 1000]
    one = "\n".join(notes(one_size, _args()))
    assert "flat from" not in one and "flatness needs two --sizes" in one
    rgw = notes(_samples(), argparse.Namespace(**vars(_args()), target="rgw"))
    assert "--copy-threshold" in rgw[-1]


def test_plot_writes_a_png(tmp_path: Path) -> None:
    need_module("matplotlib")
    out = tmp_path / "spark.png"
    plot(_samples(), _args(), str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
