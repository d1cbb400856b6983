"""Speculation on a real standalone cluster (master + workers on 127.0.0.1 and 127.0.0.2):
the slow first attempt of a partition loses to its speculative copy, and the job keeps
exactly one attempt's output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.spark


def test_speculative_copy_wins_and_only_its_output_is_kept(cluster: Any, zr: Any) -> None:
    driver = os.path.join(os.path.dirname(__file__), "speculation_driver.py")
    proc = subprocess.run(
        [
            sys.executable,
            driver,
            cluster.master_url,
            json.dumps(zr.options(partSize="5m")),
            zr.uri(),
            zr.uri("marks"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert proc.returncode == 0 and "DRIVER-OK" in proc.stdout, proc.stderr[-4000:]
    marks = set(zr.list_keys("marks"))
    # partition 1: attempt 0 uploaded its file and stalled; the speculative attempt 1
    # (on the other worker) committed; attempt 0 never did
    assert "p1-a0-files_closed" in marks
    assert "p1-a1-committed" in marks
    assert "p1-a0-committed" not in marks
    keys = zr.data_keys()
    assert len(keys) == 4, keys
    assert sorted(zr.read_parquet().column("id").to_pylist()) == list(range(4000))
    assert zr.pending_uploads() == []  # the loser's upload was aborted at job commit
    assert [k for k in zr.list_keys() if "__magic" in k] == []
