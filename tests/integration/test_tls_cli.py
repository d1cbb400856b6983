"""The `zerorename` command over HTTPS, as a user runs it: a subprocess that finds the
endpoint's CA through AWS_CA_BUNDLE (moto behind the TLS proxy, RGW's native TLS)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine_helpers import get, object_keys, pending_keys
from zerorename.servers.targets import S3Target


def _env(s3: S3Target, *, ca: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("AWS_PROFILE", None)
    env.pop("AWS_CA_BUNDLE", None)
    env.update(
        AWS_ACCESS_KEY_ID=s3.access_key or "",
        AWS_SECRET_ACCESS_KEY=s3.secret_key or "",
        AWS_DEFAULT_REGION=s3.region,
    )
    target_env = s3.env()
    if not ca:
        target_env.pop("AWS_CA_BUNDLE")
    env.update(target_env)
    return env


def _run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-m", "zerorename.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    return out


def test_put_list_and_complete_over_https(s3_tls: S3Target, tmp_path: Path) -> None:
    assert s3_tls.env()["AWS_CA_BUNDLE"] == s3_tls.ca_bundle
    assert s3_tls.env()["AWS_ENDPOINT_URL"].startswith("https://")
    env = _env(s3_tls)
    data = os.urandom(7 * 1024 * 1024 + 3)
    src = tmp_path / "data.bin"
    src.write_bytes(data)
    record = tmp_path / "r.json"
    key = s3_tls.key("cli over tls.bin")
    uri = f"s3://{s3_tls.bucket}/{key}"
    out = _run(env, "put", str(src), uri, "--defer", str(record), "--part-size", "5m")
    assert out.returncode == 0, out.stderr
    assert object_keys(s3_tls) == [] and pending_keys(s3_tls) == [key]
    out = _run(env, "uploads", "list", f"s3://{s3_tls.bucket}/{s3_tls.prefix}", "--json")
    assert out.returncode == 0, out.stderr
    assert [u["key"] for u in json.loads(out.stdout)["uploads"]] == [key]
    out = _run(env, "complete", str(record))
    assert out.returncode == 0, out.stderr
    assert get(s3_tls, key) == data and pending_keys(s3_tls) == []


def test_without_the_ca_bundle_the_cli_fails_in_one_line(s3_tls: S3Target, tmp_path: Path) -> None:
    src = tmp_path / "data.bin"
    src.write_bytes(b"x" * 100)
    key = s3_tls.key("refused.bin")
    out = _run(_env(s3_tls, ca=False), "put", str(src), f"s3://{s3_tls.bucket}/{key}")
    assert out.returncode != 0
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, out.stderr
    assert str(s3_tls.endpoint_url) in lines[0] and "AWS_CA_BUNDLE" in lines[0], lines[0]
    assert object_keys(s3_tls) == [] and pending_keys(s3_tls) == []
