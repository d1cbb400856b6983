"""The job-commit memory benchmark at a small scale (the full 100,000-upload run is
``python -m zerorename.perf.commit_bench``): the commit runs in a fresh process whose
peak RSS stays far under 200 MiB, and progress comes at least once a second."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zerorename.perf.commit_bench import main
from zerorename.testing.targets import S3Target


def test_commit_bench_small_scale(
    moto_s3: S3Target, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", moto_s3.access_key or "")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", moto_s3.secret_key or "")
    code = main(
        [
            "--uploads",
            "1500",
            "--pendingsets",
            "30",
            "--endpoint-url",
            moto_s3.endpoint_url,
            "--bucket",
            moto_s3.bucket,
            "--dest",
            moto_s3.prefix + "bench",
            "--max-rss-mib",
            "200",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["files"] == 1500 and report["pendingsets"] == 30
    assert report["peak_rss_mib"] < 200
    assert report["max_progress_gap_seconds"] is None or report["max_progress_gap_seconds"] < 1.5
    c = moto_s3.boto3_client()
    assert c.list_multipart_uploads(Bucket=moto_s3.bucket).get("Uploads", []) == []
