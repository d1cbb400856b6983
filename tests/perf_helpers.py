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
from zerorename.servers.targets import S3Target


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


#: runs ``python -m zerorename.perf.model`` as the harness does (the same request on stdin)
#: and, at its exit, writes the product's heavy modules it loaded to stderr
_OBSERVED = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print('LOADED', sorted(m for m in sys.modules if m in "
    "('zerorename.engine', 'zerorename.committers', 'aiobotocore', 'boto3', 'obstore')), "
    "file=sys.stderr))\n"
    "runpy.run_module('zerorename.perf.model', run_name='__main__')\n"
)


def run_observed(func: str, target: Target, params: dict[str, Any]) -> tuple[Any, list[str]]:
    """A measured run in a child, as ``model.run_in_child`` runs it: its metrics, and the
    modules among the engine, the committers and the clients that the child loaded."""
    payload = {"func": func, "target": target.to_json(), "params": params, "profile": None}
    proc = subprocess.run(
        [sys.executable, "-c", _OBSERVED],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = [ln for ln in proc.stderr.splitlines() if ln.startswith("LOADED ")]
    metrics = json.loads(proc.stdout.strip().splitlines()[-1])
    return metrics, json.loads(loaded[-1].removeprefix("LOADED ").replace("'", '"'))


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
