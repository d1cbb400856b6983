"""Spark Connect: a ``SparkSession.builder.remote("local[2]")`` session registers the data
source, writes a batch with partitionBy and a stream, and reads the stream's log. Its own
process (tests/spark/connect_driver.py): a Connect session and the suite's classic session
do not mix in one process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from needs import need_module

need_module("grpc", "pip install -e '.[spark]' (Spark Connect needs grpcio)")
pytestmark = pytest.mark.spark

DRIVER = Path(__file__).with_name("connect_driver.py")


def test_connect_session_writes_a_batch_and_a_stream(
    zr_own: tuple[Any, dict[str, str]], tmp_path: Path
) -> None:
    zr, env = zr_own
    (tmp_path / "src").mkdir()
    args = {
        "options": zr.options(),
        "reader": zr.reader_options(),
        "batch": zr.uri("batch"),
        "stream": zr.uri("stream"),
        "src": str(tmp_path / "src"),
        "ckpt": str(tmp_path / "ckpt"),
    }
    done = subprocess.run(
        [sys.executable, str(DRIVER), json.dumps(args)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert done.returncode == 0 and lines, (done.stdout[-2000:], done.stderr[-4000:])
    got = json.loads(lines[-1].removeprefix("RESULT "))
    assert got["connect"].startswith("pyspark.sql.connect")  # a Connect session, not classic
    assert got["batch"] == {"files": 3 * 3, "rows": 300, "committer": "magic"}
    days = {k.split("/")[0] for k in zr.data_keys("batch")}
    assert days == {"day=0", "day=1", "day=2"}
    assert got["stream"] == {"batches": 2, "last": 1, "rows": 20}
    assert len(zr.data_keys("stream")) >= 2 and zr.pending_uploads() == []
