"""A local Spark whose Python workers cannot import zerorename: ``register(spark)`` refuses
in one line naming the interpreter and what to set (a subprocess: its own Spark, with
PYSPARK_PYTHON pointing at a fresh venv that has no zerorename)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import zerorename

pytestmark = pytest.mark.spark

DRIVER = """
import sys
sys.path.insert(0, {src!r})
from pyspark.sql import SparkSession
from zerorename.errors import ConfigError
from zerorename.spark_adapter import register
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
try:
    register(spark)
except ConfigError as exc:
    print("REFUSED " + str(exc))
else:
    print("REGISTERED")
finally:
    spark.stop()
"""


def test_register_refuses_workers_that_cannot_import_zerorename(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = str(bare / "bin" / "python")
    src = str(Path(zerorename.__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"PYSPARK_PYTHON": python, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER.format(src=src)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = [ln for ln in done.stdout.splitlines() if ln.startswith(("REFUSED", "REGISTERED"))]
    assert out and out[0].startswith("REFUSED "), (done.stdout, done.stderr[-2000:])
    assert f"run {python!r}, which cannot import zerorename" in out[0]
    assert f"set PYSPARK_PYTHON={sys.executable}" in out[0] and "spark.pyspark.python" in out[0]
