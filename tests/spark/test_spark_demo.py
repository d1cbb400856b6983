"""`zerorename demo` at a small size: embedded moto, local Spark, verified read-back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark


def test_demo_runs_and_verifies(tmp_path: object) -> None:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    if env.get("SPARK_HOME") and env.get("SPARK_HOME") == env.get("ZR_TEST_SPARK_HOME"):
        # the demo as a user runs it: pyspark's own Spark home, its workers importing
        # pyspark from the zip Spark puts on their path (the other tests' Spark home has
        # no zip: tests/jvm_archive.py spark_home_without_zip)
        del env["SPARK_HOME"]
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        env.pop(key, None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "zerorename.cli",
            "demo",
            "--size",
            "3MB",
            "--tasks",
            "3",
            "--days",
            "4",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    summary = json.loads(proc.stdout[proc.stdout.index("{") :])
    assert summary["verified"] is True
    assert summary["rows"] == 3 * 1024 * 1024 // 100
    assert summary["checks"]["rows_read"] == summary["rows"]
    assert summary["files"] == summary["checks"]["files_read"] >= 4
    assert summary["bytes"] > 0 and summary["commit_seconds"] > 0
    assert summary["success_uri"].endswith("/_SUCCESS")
    assert summary["committer"] == "magic"
    assert "moto" in summary["write_bound"] and "not an upload speed" in summary["write_bound"]


def test_demo_text_says_what_bounds_its_write_and_points_at_perf() -> None:
    from zerorename.cli.demo import DemoSummary, write_bound

    bound = write_bound("local[2]", 8, None)
    assert "Spark generating rows" in bound and "moto" in bound and "not an upload speed" in bound
    assert "--endpoint-url" in write_bound("local[4]", 8, "https://s3.example")
    text = DemoSummary(
        "s3://b/p",
        "magic",
        10,
        2,
        20_000_000,
        4.0,
        0.5,
        6.0,
        "s3://b/p/_SUCCESS",
        True,
        "embedded moto",
        write_bound=bound,
    ).text()
    assert "MB/s" not in text  # no rate that reads as the product's upload speed
    assert bound in text and "zerorename perf" in text
