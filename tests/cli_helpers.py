"""Helpers of the CLI's tests: run ``zerorename`` in-process or as a subprocess against a
target, and check a ``--json`` document against the README's ``json cli-schema`` block."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from zerorename import cli
from zerorename.servers.targets import S3Target

README = Path(__file__).resolve().parents[1] / "README.md"


def credentials_env(s3: S3Target) -> dict[str, str]:
    """The environment with ``s3``'s credentials and region, and no profile or endpoint
    (the command names its endpoint with ``--endpoint-url``)."""
    env = dict(os.environ)
    env.update(
        AWS_ACCESS_KEY_ID=s3.access_key or "",
        AWS_SECRET_ACCESS_KEY=s3.secret_key or "",
        AWS_DEFAULT_REGION=s3.region,
    )
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        env.pop(name, None)
    return env


def target_env(s3: S3Target) -> dict[str, str]:
    """The environment a user has: credentials and endpoint of ``s3``."""
    env = dict(os.environ)
    env.update(
        AWS_ACCESS_KEY_ID=s3.access_key or "",
        AWS_SECRET_ACCESS_KEY=s3.secret_key or "",
        AWS_DEFAULT_REGION=s3.region,
        AWS_ENDPOINT_URL=str(s3.endpoint_url),
    )
    env.pop("AWS_PROFILE", None)
    return env


def use_target(s3: S3Target, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in target_env(s3).items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``zerorename argv`` in this process (the target from :func:`use_target`)."""
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def run_sub(s3: S3Target, *argv: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-m", "zerorename.cli", *argv],
        capture_output=True,
        text=True,
        env=target_env(s3),
        timeout=300,
        check=False,
        **kw,
    )
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    return out


def schema() -> dict[str, Any]:
    text = README.read_text()
    m = re.search(r"^```json cli-schema\n(.*?)^```", text, re.S | re.M)
    assert m, "README has no json cli-schema block"
    parsed: dict[str, Any] = json.loads(m.group(1))
    return parsed


_TYPES: dict[str, Any] = {
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "null": type(None),
    "object": dict,
}


def _check(value: Any, spec: Any, where: str) -> None:
    if isinstance(spec, str):
        kinds = [_TYPES[t] for t in spec.split("|")]
        ok = any(isinstance(value, k) and not (k is int and isinstance(value, bool)) for k in kinds)
        assert ok, f"{where}: {value!r} is not {spec}"
    elif isinstance(spec, list):
        assert isinstance(value, list), f"{where}: {value!r} is not a list"
        for i, item in enumerate(value):
            _check(item, spec[0], f"{where}[{i}]")
    else:
        assert isinstance(value, dict), f"{where}: {value!r} is not an object"
        seen = set()
        for name, sub in spec.items():
            alternatives = name.rstrip("?").split("|")
            present = [a for a in alternatives if a in value]
            assert len(present) <= 1, f"{where}: more than one of {alternatives}"
            if not present:
                assert name.endswith("?"), f"{where}: {name} missing from {sorted(value)}"
                continue
            seen.add(present[0])
            _check(value[present[0]], sub, f"{where}.{present[0]}")
        extra = set(value) - seen
        assert not extra, f"{where}: fields not in the README's schema: {sorted(extra)}"


def check_document(text: str) -> dict[str, Any]:
    """``text`` is exactly one JSON document matching its command's schema; returns it."""
    assert text.endswith("\n") and text.count("\n") == 1, text
    doc: dict[str, Any] = json.loads(text)
    assert doc.get("version") == 1, doc
    name = doc["command"]
    if name == "put":
        name = f"put {doc['result']}"
    elif name == "jobs show":  # by kind: zerorename/<committer>, stream or s3a/magic
        assert "kind" in doc, f"jobs show: no kind in {sorted(doc)}"
        name = "jobs show " + (
            "zerorename" if doc["kind"].startswith("zerorename/") else doc["kind"]
        )
    _check(doc, schema()[name], name)
    return doc
