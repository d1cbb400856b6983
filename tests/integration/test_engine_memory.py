"""Bounded memory: a 2 GiB generator-fed upload (8 MiB parts, 8 in flight) stays under
baseline + (concurrency + 2) x part size + 64 MiB, measured in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from zerorename.testing.targets import S3Target


def test_two_gib_stream_peak_rss_is_bounded(rgw_s3: S3Target) -> None:
    s3 = rgw_s3
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": s3.access_key or "",
        "AWS_SECRET_ACCESS_KEY": s3.secret_key or "",
    }
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "zerorename.perf.engine_bench",
            "memory",
            "--endpoint-url",
            str(s3.endpoint_url),
            "--bucket",
            s3.bucket,
            "--size-mib",
            "2048",
            "--part-mib",
            "8",
            "--concurrency",
            "8",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    sys.stderr.write(f"\n[zerorename] 2 GiB stream memory: {report}\n")
    assert report["bytes"] == 2048 * 1024 * 1024
    assert report["growth_mib"] < report["bound_growth_mib"] == 8 * 10 + 64
    assert report["within_bound"] is True
