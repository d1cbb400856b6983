"""Shared fixtures: S3 targets on moto, Ceph RGW and (optionally) an external endpoint.

Fixtures (names fixed by the project's test contract):
  s3         function scope, parametrized over "moto", "rgw" (+ "external" when
             ZR_TEST_ENDPOINT_URL is set): an S3Target with a fresh bucket and unique prefix
  moto_s3    the same on moto only            rgw_s3   the same on RGW only
  fault_proxy  factory: fault_proxy(upstream_url) -> running FaultProxy (stopped at teardown)
  moto_server / rgw_server  the session-scoped servers themselves

RGW policy: missing binaries skip the rgw tests with a reason, unless CI=true or
ZR_REQUIRE_RGW=1 (then the run stops with what to install). ZR_SKIP_RGW=1 skips them on purpose.
A gateway that is installed but fails to start is an error, never a skip.
External: ZR_TEST_ENDPOINT_URL, ZR_TEST_BUCKET (required with it), optional ZR_TEST_REGION
(default AWS_DEFAULT_REGION or us-east-1) and ZR_TEST_ADDRESSING (path|virtual|auto, default
path); credentials from the standard AWS chain.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from zerorename.testing.servers import RGW_PACKAGES, MotoServer, RgwServer
from zerorename.testing.targets import S3Target, purge, unique_bucket_name, unique_prefix


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def rgw_required() -> bool:
    return (_flag("CI") or _flag("ZR_REQUIRE_RGW")) and not _flag("ZR_SKIP_RGW")


def rgw_skip_reason() -> str | None:
    """Why rgw tests are skipped in this run, or None when they run."""
    if _flag("ZR_SKIP_RGW"):
        return "ZR_SKIP_RGW=1: Ceph RGW tests skipped on purpose"
    if not RgwServer.available() and not rgw_required():
        return (
            f"Ceph RGW not installed (missing {', '.join(RgwServer.missing_binaries())}); "
            f"apt-get install -y --no-install-recommends {' '.join(RGW_PACKAGES)} "
            "or run scripts/test.sh (set ZR_REQUIRE_RGW=1 to make this an error)"
        )
    return None


EXTERNAL_URL = os.environ.get("ZR_TEST_ENDPOINT_URL") or None
_TARGETS: list[Any] = ["moto", pytest.param("rgw", marks=pytest.mark.rgw)]
if EXTERNAL_URL:
    _TARGETS.append(pytest.param("external", marks=pytest.mark.external))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "external: runs against ZR_TEST_ENDPOINT_URL")


def _needs_rgw(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    callspec = getattr(item, "callspec", None)
    param = callspec.params.get("s3") if callspec is not None else None
    return "rgw_s3" in names or "rgw_server" in names or param == "rgw"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that needs RGW with `rgw` (before -m selection runs)."""
    for item in items:
        if _needs_rgw(item) and item.get_closest_marker("rgw") is None:
            item.add_marker(pytest.mark.rgw)


def pytest_collection_finish(session: pytest.Session) -> None:
    """For the selected rgw tests: skip them, or stop the run, per the RGW policy."""
    rgw_items = [item for item in session.items if _needs_rgw(item)]
    if not rgw_items:
        return
    reason = rgw_skip_reason()
    if reason is not None:
        for item in rgw_items:
            item.add_marker(pytest.mark.skip(reason=reason))
    elif not RgwServer.available():
        pytest.exit(
            "Ceph RGW is required (CI=true or ZR_REQUIRE_RGW=1) but not installed: missing "
            f"{', '.join(RgwServer.missing_binaries())}. Install with `apt-get install -y "
            f"--no-install-recommends {' '.join(RGW_PACKAGES)}` or run scripts/test.sh "
            "(ZR_SKIP_RGW=1 skips the RGW tests on purpose).",
            returncode=4,
        )


_SUMMARY: list[str] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    reason = rgw_skip_reason()
    if reason is not None:
        _SUMMARY.append(f"RGW tests skipped: {reason}")
    for line in _SUMMARY:
        terminalreporter.write_line(f"[zerorename] {line}")


# ---------------------------------------------------------------- servers (session scope)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    with MotoServer() as server:
        yield server


@pytest.fixture(scope="session")
def rgw_server(request: pytest.FixtureRequest) -> Iterator[RgwServer]:
    reason = rgw_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    server = RgwServer()
    try:
        server.start()
    except Exception as exc:
        if rgw_required():
            pytest.exit(f"Ceph RGW is required but did not start: {exc}", returncode=4)
        raise
    _SUMMARY.append(
        f"Ceph RGW (memstore) up in {server.start_seconds:.1f}s at {server.endpoint_url}, "
        f"logs in {server.log_dir}"
    )
    try:
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------- targets (function scope)


def _test_hint(request: pytest.FixtureRequest) -> str:
    return request.node.name.split("[", 1)[0].removeprefix("test_")


@contextlib.contextmanager
def _fresh_bucket_target(
    name: str, server: MotoServer | RgwServer, request: pytest.FixtureRequest
) -> Iterator[S3Target]:
    target = S3Target(
        name=name,
        endpoint_url=server.endpoint_url,
        region=server.region,
        access_key=server.access_key,
        secret_key=server.secret_key,
        bucket=unique_bucket_name(_test_hint(request)),
        prefix=unique_prefix(_test_hint(request)),
        addressing_style="path",
    )
    client = target.boto3_client()
    client.create_bucket(Bucket=target.bucket)
    try:
        yield target
    finally:
        # frees the servers' memory (both keep data in RAM); a failure here is only reported
        try:
            purge(target, delete_bucket=True, client=client)
        except Exception as exc:
            sys.stderr.write(f"\n[zerorename] cleanup of {name} bucket {target.bucket}: {exc}\n")
        client.close()


@contextlib.contextmanager
def _external_target(request: pytest.FixtureRequest) -> Iterator[S3Target]:
    bucket = os.environ.get("ZR_TEST_BUCKET")
    if not bucket:
        pytest.fail("ZR_TEST_ENDPOINT_URL is set but ZR_TEST_BUCKET is not", pytrace=False)
    style = os.environ.get("ZR_TEST_ADDRESSING", "path")
    if style not in ("path", "virtual", "auto"):
        pytest.fail(f"ZR_TEST_ADDRESSING must be path, virtual or auto, not {style!r}")
    region = os.environ.get("ZR_TEST_REGION") or os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
    target = S3Target(
        name="external",
        endpoint_url=EXTERNAL_URL,
        region=region,
        access_key=None,
        secret_key=None,
        bucket=bucket,
        prefix="zerorename-tests/" + unique_prefix(_test_hint(request)),
        addressing_style=style,  # type: ignore[arg-type]
    )
    try:
        yield target
    finally:
        try:
            purge(target, delete_bucket=False)
        except Exception as exc:
            sys.stderr.write(f"\n[zerorename] cleanup of external prefix {target.prefix}: {exc}\n")


@pytest.fixture(params=_TARGETS)
def s3(request: pytest.FixtureRequest) -> Iterator[S3Target]:
    """An S3Target on each server in turn: fresh bucket (moto/rgw), unique prefix."""
    kind = request.param
    if kind == "external":
        with _external_target(request) as target:
            yield target
        return
    server = request.getfixturevalue("moto_server" if kind == "moto" else "rgw_server")
    with _fresh_bucket_target(kind, server, request) as target:
        yield target


@pytest.fixture
def moto_s3(moto_server: MotoServer, request: pytest.FixtureRequest) -> Iterator[S3Target]:
    with _fresh_bucket_target("moto", moto_server, request) as target:
        yield target


@pytest.fixture
def rgw_s3(rgw_server: RgwServer, request: pytest.FixtureRequest) -> Iterator[S3Target]:
    with _fresh_bucket_target("rgw", rgw_server, request) as target:
        yield target


# ---------------------------------------------------------------- fault proxy


@pytest.fixture
def fault_proxy() -> Iterator[Callable[..., Any]]:
    """Factory: ``proxy = fault_proxy(upstream_url, **kwargs)`` -> a started FaultProxy."""
    from zerorename.testing.faultproxy import FaultProxy

    proxies: list[FaultProxy] = []

    def make(upstream_url: str, **kwargs: Any) -> FaultProxy:
        proxy = FaultProxy(upstream_url, **kwargs)
        proxy.start()
        proxies.append(proxy)
        return proxy

    try:
        yield make
    finally:
        for proxy in reversed(proxies):
            proxy.stop()
