"""Helpers shared by the perf harness's tests: the harness's view of a test server.
(tests/ is on sys.path: pytest puts the conftest's directory there.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from zerorename.perf.model import Target
from zerorename.testing.targets import S3Target


def perf_target(s3: S3Target) -> Target:
    """The perf harness's Target for a test server (same endpoint, credentials, CA)."""
    return Target(
        name=s3.name,
        endpoint_url=s3.endpoint_url,
        bucket=s3.bucket,
        region=s3.region,
        addressing_style=s3.addressing_style,
        access_key=s3.access_key,
        secret_key=s3.secret_key,
        prefix=s3.prefix.rstrip("/"),
        ca_bundle=s3.ca_bundle,
    )


def perf(args: list[str], tmp_path: Path) -> dict[str, Any]:
    """``python -m zerorename.perf ARGS --json F --quiet`` must exit 0; its JSON document,
    with its stdout under ``_stdout``."""
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "zerorename.perf", *args, "--json", str(out), "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ},
        check=False,
    )
    assert proc.returncode == 0, f"{args}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    doc: dict[str, Any] = json.loads(out.read_text())
    doc["_stdout"] = proc.stdout
    return doc
