"""An endpoint URL holding credentials (``http://user:secret@host``), a query or a fragment
is refused before any request, in one line that never shows them (issue 20 finding 7).

Every entry point is run as a user runs it (a subprocess), with the URL given each way it
can be: ``--target URL`` or ``--endpoint-url URL``, and AWS_ENDPOINT_URL /
AWS_ENDPOINT_URL_S3 (for ``perf --target aws``, which every client honours). The URL
points at a fault proxy in front of moto, so its request log shows that nothing was sent.
The secret is searched for in stdout, stderr and the ``--json`` file."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from zerorename.servers.faultproxy import FaultProxy
from zerorename.servers.targets import S3Target

SECRET = "Zr9SecretPassw0rdXq"

#: how a secret can ride in an endpoint URL (the proxy's host:port is filled in)
URL_SHAPES = {
    "userinfo": "http://zruser:" + SECRET + "@{hostport}",
    "query": "http://{hostport}/?auth=" + SECRET,
    "fragment": "http://{hostport}/#" + SECRET,
}
ENV_NAMES = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


@pytest.fixture
def proxy(moto_s3: S3Target, fault_proxy: Callable[..., Any]) -> FaultProxy:
    p: FaultProxy = fault_proxy(moto_s3.endpoint_url)
    return p


def _url(proxy: FaultProxy, shape: str) -> str:
    return URL_SHAPES[shape].format(hostport=proxy.url.split("://", 1)[1])


def _env(s3: S3Target, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (*ENV_NAMES, "AWS_PROFILE")}
    env.update(
        AWS_ACCESS_KEY_ID=s3.access_key or "",
        AWS_SECRET_ACCESS_KEY=s3.secret_key or "",
        AWS_DEFAULT_REGION=s3.region,
        **extra,
    )
    return env


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def _refused_without_the_secret(
    out: subprocess.CompletedProcess[str], proxy: FaultProxy, *files: Path
) -> str:
    """The command failed in one line, showed the secret nowhere and sent nothing."""
    shown = out.stdout + out.stderr + "".join(f.read_text() for f in files if f.exists())
    assert SECRET not in shown, shown[-3000:]
    assert out.returncode != 0, out.stdout
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    assert proxy.log == [], f"requests were sent: {proxy.log[:3]}"
    return lines[0]


# ---------------------------------------------------------------- zerorename perf


def _perf(
    proxy: FaultProxy, s3: S3Target, tmp_path: Path, target: str, expect: str, **env: str
) -> None:
    out_json = tmp_path / "out.json"
    argv = ["zerorename.perf", "upload", "--target", target, "--bucket", s3.bucket]
    argv += ["--reps", "1", "--size", "1MiB", "--quiet", "--json", str(out_json)]
    out = _run(argv, _env(s3, **env))
    line = _refused_without_the_secret(out, proxy, out_json)
    assert line.startswith(f"zerorename perf upload: {expect}"), line
    assert not out_json.exists()


@pytest.mark.parametrize("shape", sorted(URL_SHAPES))
def test_perf_refuses_a_target_url_with_a_secret(
    moto_s3: S3Target, proxy: FaultProxy, tmp_path: Path, shape: str
) -> None:
    _perf(proxy, moto_s3, tmp_path, _url(proxy, shape), "--target: endpoint_url")


@pytest.mark.parametrize(("name", "shape"), [(ENV_NAMES[0], "userinfo"), (ENV_NAMES[1], "query")])
def test_perf_refuses_an_aws_endpoint_from_the_environment_with_a_secret(
    moto_s3: S3Target, proxy: FaultProxy, tmp_path: Path, shape: str, name: str
) -> None:
    _perf(proxy, moto_s3, tmp_path, "aws", f"{name}: endpoint_url", **{name: _url(proxy, shape)})


def test_perf_refuses_an_unknown_scheme_without_echoing_its_credentials(
    moto_s3: S3Target, proxy: FaultProxy, tmp_path: Path
) -> None:
    url = "ftp://zruser:" + SECRET + "@127.0.0.1:1"
    _perf(proxy, moto_s3, tmp_path, url, "--target: endpoint_url")


# ---------------------------------------------------------------- zerorename COMMAND


def _commands(s3: S3Target, tmp_path: Path) -> dict[str, list[str]]:
    source = tmp_path / "data"
    source.write_bytes(b"x" * 100)
    where = f"s3://{s3.bucket}/{s3.prefix}"
    return {
        "put": ["put", str(source), where + "obj"],
        "uploads": ["uploads", "list", where],
        "jobs": ["jobs", "list", where + "dest"],
        "inspect": ["inspect", where + "dest/_SUCCESS"],
    }


COMMANDS = ("put", "uploads", "jobs", "inspect")
SOURCES = ("--endpoint-url", *ENV_NAMES)


@pytest.mark.parametrize("command", COMMANDS)
def test_cli_refuses_an_endpoint_url_with_a_secret(
    moto_s3: S3Target, proxy: FaultProxy, tmp_path: Path, command: str
) -> None:
    """Each command gets each source once and each shape once (rotated per command, so
    every source meets every shape across the commands)."""
    argv = ["zerorename.cli", *_commands(moto_s3, tmp_path)[command]]
    shapes = sorted(URL_SHAPES)
    turn = COMMANDS.index(command)
    for i, where in enumerate(SOURCES):
        shape = shapes[(i + turn) % len(shapes)]
        url = _url(proxy, shape)
        if where == "--endpoint-url":
            out = _run([*argv, "--endpoint-url", url], _env(moto_s3))
        else:
            out = _run(argv, _env(moto_s3, **{where: url}))
        line = _refused_without_the_secret(out, proxy)
        assert line.startswith("zerorename: error: endpoint_url"), (shape, where, line)
        assert "unexpected" not in line, (shape, where, line)


def test_demo_refuses_an_endpoint_url_with_a_secret(
    moto_s3: S3Target, proxy: FaultProxy, tmp_path: Path
) -> None:
    """Before Spark starts: the demo printed its endpoint ('writing ... via URL')."""
    argv = ["zerorename.cli", "demo", "--endpoint-url", _url(proxy, "userinfo")]
    out = _run([*argv, "--bucket", moto_s3.bucket], _env(moto_s3))
    line = _refused_without_the_secret(out, proxy)
    assert line.startswith("zerorename: error: --endpoint-url: endpoint_url"), line
