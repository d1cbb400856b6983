"""Shared fixtures: S3 targets on moto, Ceph RGW and (optionally) an external endpoint.

Fixtures (names fixed by the project's test contract):
  s3         function scope, parametrized over "moto", "rgw" (+ "external" when
             ZR_TEST_ENDPOINT_URL is set): an S3Target with a fresh bucket and unique prefix
  moto_s3    the same on moto only            rgw_s3   the same on RGW only
  s3_tls     the same over HTTPS: "moto-https", "rgw-https" (target.ca_bundle verifies them)
  fault_proxy  factory: fault_proxy(upstream_url) -> running FaultProxy (stopped at teardown);
             given an HTTPS endpoint of these servers it speaks TLS to its clients
  moto_server / rgw_server  the session-scoped servers themselves
  tls_files  the session's CA and certificates (zerorename.servers.tls)

Parallel runs (pytest-xdist, ``-n N``; scripts/test.sh sets N from ZR_TEST_WORKERS): each
worker has its own moto server (and its own Spark session), while one Ceph RGW serves every
worker of a run: the first worker that needs it starts it (zerorename.servers.servers.
shared_rgw, a file lock and a state file in the run's directory $ZR_TEST_RUN_DIR, made by the
controller), and the controller stops it when the run ends (the launcher's watchdog does if
the controller dies). Every test uses a fresh bucket and prefix, so none sees another's data.

HTTPS: one CA per run, shared by all workers (zerorename.servers.tls.session_tls, in
$ZR_TEST_TLS_DIR under the run's directory). RGW serves HTTPS natively
(beast ssl_endpoint, same gateway as HTTP); moto is reached through a FaultProxy in TLS mode
with no rules. An HTTPS target's ``ca_bundle`` is also in AWS_CA_BUNDLE while its test runs
(subprocesses, CLIs and engines made without the target verify with it). Mark a test (or a
module: pytestmark) with ``also_https`` to run it over HTTP and HTTPS: its ``s3`` becomes
moto, rgw, moto-https, rgw-https; its ``moto_s3`` moto, moto-https; its ``rgw_s3`` rgw,
rgw-https. Every HTTPS instance carries the ``https`` marker (``-m "not https"`` skips them).

Which servers a test runs on (the rule; each choice says its clause where it is made): a test
runs on RGW when its claim can depend on the store -- multipart semantics, listing, ETags,
conditional writes (If-Match/If-None-Match), error codes, checksums, TLS handshakes, the
CLI end to end, a server quirk (docs, the servers' notes) -- and on moto alone when it
proves zerorename's own logic through any store: journal and state decisions, planning,
refusals before any request, retry bookkeeping, output formatting, and faults the proxy
answers itself (a forwarded request whose answer is lost, or a half body, reaches the
store: RGW too). A variant that differs only in our code (a source kind, a send mode, a
cut point of the proxy) runs on RGW once, not for each value. HTTPS (``also_https``,
``s3_tls``) where TLS is part of the claim: the tls/https files, CA bundles, each of the
engine's send paths and part bodies once, the CLI over TLS; nowhere as a mere doubling.
Moto-only tests say so with ``pytest.mark.parametrize("s3", ["moto"], indirect=True)``
(``MOTO`` in their modules) or a per-case list (``..._ON``) naming each case's server.

RGW policy: missing binaries skip the rgw tests with a reason, unless CI=true or
ZR_REQUIRE_RGW=1 (then the run stops with what to install; under xdist each rgw test fails with
that line). ZR_SKIP_RGW=1 skips them on purpose.
A gateway that is installed but fails to start is an error, never a skip.
External: ZR_TEST_ENDPOINT_URL, ZR_TEST_BUCKET (required with it), optional ZR_TEST_REGION
(default AWS_DEFAULT_REGION or us-east-1) and ZR_TEST_ADDRESSING (path|virtual|auto, default
path); credentials from the standard AWS chain.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jvm_archive
from zerorename.servers.faultproxy import FaultProxy
from zerorename.servers.servers import (
    RGW_PACKAGES,
    MotoServer,
    RgwServer,
    shared_rgw,
    shared_rgw_state,
    stop_shared_rgw,
)
from zerorename.servers.targets import S3Target, purge, unique_bucket_name, unique_prefix
from zerorename.servers.tls import TLS_DIR_ENV, TlsFiles, session_tls

TEST_JVM_OPTIONS = jvm_archive.TEST_JVM_OPTIONS
for _var in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
    os.environ.setdefault(_var, TEST_JVM_OPTIONS)

#: the run's directory (shared RGW state, the TLS set) and the pid of the process that owns it
RUN_DIR_ENV = "ZR_TEST_RUN_DIR"
RUN_OWNER_ENV = "ZR_TEST_RUN_OWNER"
#: the Spark home the run made (jvm_archive.spark_home_without_zip), when it made one
OUR_SPARK_HOME_ENV = "ZR_TEST_SPARK_HOME"


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def rgw_required() -> bool:
    return (_flag("CI") or _flag("ZR_REQUIRE_RGW")) and not _flag("ZR_SKIP_RGW")


def rgw_missing_message() -> str:
    return (
        "Ceph RGW is required (CI=true or ZR_REQUIRE_RGW=1) but not installed: missing "
        f"{', '.join(RgwServer.missing_binaries())}. Install with `apt-get install -y "
        f"--no-install-recommends {' '.join(RGW_PACKAGES)}` or run scripts/test.sh "
        "(ZR_SKIP_RGW=1 skips the RGW tests on purpose)."
    )


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
_MOTO_HTTPS = pytest.param("moto-https", marks=pytest.mark.https)
_RGW_HTTPS = pytest.param("rgw-https", marks=[pytest.mark.rgw, pytest.mark.https])
_TARGETS: list[Any] = ["moto", pytest.param("rgw", marks=pytest.mark.rgw)]
if EXTERNAL_URL:
    _TARGETS.append(pytest.param("external", marks=pytest.mark.external))
_TLS_TARGETS: list[Any] = [_MOTO_HTTPS, _RGW_HTTPS]
#: what ``also_https`` makes of each target fixture's parameters
_ALSO_HTTPS: dict[str, list[Any]] = {
    "s3": [*_TARGETS, *_TLS_TARGETS],
    "moto_s3": ["moto", _MOTO_HTTPS],
    "rgw_s3": [pytest.param("rgw", marks=pytest.mark.rgw), _RGW_HTTPS],
}
_RGW_KINDS = ("rgw", "rgw-https")


def _is_worker(config: pytest.Config) -> bool:
    """True in a pytest-xdist worker (the controller, or a serial run, owns the run)."""
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "external: runs against ZR_TEST_ENDPOINT_URL")
    config.addinivalue_line(
        "markers", "also_https: run the test over HTTP and HTTPS (its s3/moto_s3/rgw_s3 targets)"
    )
    config.addinivalue_line("markers", "https: a test instance that talks HTTPS to its store")
    if not _is_worker(config):
        # set before xdist starts its workers, which inherit the environment
        run_dir = tempfile.mkdtemp(prefix="zr-run-")
        os.environ[RUN_DIR_ENV] = run_dir
        os.environ[RUN_OWNER_ENV] = str(os.getpid())
        os.environ[TLS_DIR_ENV] = os.path.join(run_dir, "tls")
        # Spark's Python processes import pyspark from the installed package, not from
        # the zip Spark puts first on their path (jvm_archive.spark_home_without_zip); a
        # Spark home of the caller's is kept
        if "SPARK_HOME" not in os.environ:
            home = jvm_archive.spark_home_without_zip(run_dir)
            if home is not None:
                os.environ["SPARK_HOME"] = os.environ[OUR_SPARK_HOME_ENV] = home
    run_dir = os.environ.get(RUN_DIR_ENV, "")
    for var in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
        if run_dir and os.environ.get(var) == TEST_JVM_OPTIONS:  # ours, not the caller's
            os.environ[var] = jvm_archive.jvm_options(TEST_JVM_OPTIONS, run_dir)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's owner stops the shared gateway and removes the run's directory."""
    run_dir = os.environ.get(RUN_DIR_ENV)
    if _is_worker(config) or not run_dir or os.environ.get(RUN_OWNER_ENV) != str(os.getpid()):
        return
    try:
        jvm_archive.stop_archive(run_dir)
        stop_shared_rgw(run_dir)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``also_https``: parametrize the test's target fixture over the HTTPS kinds too (as a
    parametrize mark, so it takes precedence over the fixture's own params)."""
    if metafunc.definition.get_closest_marker("also_https") is None:
        return
    for name, params in _ALSO_HTTPS.items():
        if name in metafunc.fixturenames:
            metafunc.definition.add_marker(pytest.mark.parametrize(name, params, indirect=True))
            return  # one target fixture per test


def _needs_rgw(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    return (
        "rgw_s3" in names
        or "rgw_server" in names
        or any(params.get(n) in _RGW_KINDS for n in ("s3", "s3_tls"))
        or item.get_closest_marker("rgw") is not None
    )


#: Spark test modules whose tests start Spark in a child process of their own and never use
#: the run's session (the ``spark`` fixture): under xdist they run on any worker, beside the
#: one that holds the session (collection refuses a test here that asks for the session)
OWN_SPARK_MODULES = (
    "tests/spark/test_perf_spark.py",
    "tests/spark/test_spark_demo.py",
    "tests/spark/test_spark_connect.py",
    "tests/spark/test_spark_worker_python.py",
)


#: the modules whose tests share the second Spark session (the rest of tests/spark/, but
#: OWN_SPARK_MODULES, share the first): two chains of about equal length (~12 minutes each
#: on a loaded machine, 83 tests in all), the standalone cluster's users in one of them (the
#: first: test_spark_speculation.py and test_spark_streaming_more.py), so that the run starts
#: the cluster's three JVMs once (collection refuses cluster users in both)
SECOND_SPARK_SESSION = (
    "tests/spark/test_spark_write.py",
    "tests/spark/test_spark_workers.py",
    "tests/spark/test_spark_commit_options.py",
    "tests/spark/test_spark_partition_files.py",
    "tests/spark/test_spark_formats_as_spark.py",
)


def _spark_session_of(nodeid: str) -> str | None:
    """Which of the run's two Spark sessions the test uses ("spark-1", "spark-2"), or None
    (not a user of the session)."""
    if not nodeid.startswith("tests/spark/") or nodeid.startswith(OWN_SPARK_MODULES):
        return None
    return "spark-2" if nodeid.startswith(SECOND_SPARK_SESSION) else "spark-1"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that needs RGW with `rgw` (before -m selection runs)."""
    for item in items:
        if _needs_rgw(item) and item.get_closest_marker("rgw") is None:
            item.add_marker(pytest.mark.rgw)
        if item.nodeid.startswith(OWN_SPARK_MODULES) and "spark" in getattr(
            item, "fixturenames", ()
        ):
            raise pytest.UsageError(
                f"{item.nodeid} uses the run's Spark session but its module is in "
                "OWN_SPARK_MODULES (tests/conftest.py): remove the module from that list"
            )
    cluster_sessions = {
        _spark_session_of(item.nodeid)
        for item in items
        if "cluster" in getattr(item, "fixturenames", ())
    }
    if len(cluster_sessions) > 1:
        raise pytest.UsageError(
            "the standalone cluster's users (the `cluster` fixture) are in both Spark sessions' "
            "modules: list them all in SECOND_SPARK_SESSION (tests/conftest.py) or none"
        )


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under xdist, the users of the ``spark`` fixture (tests/spark/ but for
    OWN_SPARK_MODULES) run in two units, one per Spark session (SECOND_SPARK_SESSION says
    which), each in one worker and started first (the largest), beside the workers that run
    everything else one test at a time. Not one session per worker: four local Spark
    sessions starting at once on two cores starved each other past the per-test timeout
    (>300 s in register, seen with 4 workers on a loaded machine); one session made its 83
    tests the run's longest chain. A scheduler, not ``xdist_group`` marks: with pytest 9,
    xdist 3.8's loadgroup no longer groups (it renames ``item._nodeid``, which pytest 9 no
    longer reads)."""
    from xdist.scheduler import LoadScopeScheduling

    class SparkSessionsInTwoWorkers(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return _spark_session_of(nodeid) or nodeid

    return SparkSessionsInTwoWorkers(config, log)


def pytest_collection_finish(session: pytest.Session) -> None:
    """For the selected rgw tests: skip them, or stop the run, per the RGW policy."""
    rgw_items = [item for item in session.items if _needs_rgw(item)]
    if not rgw_items:
        return
    reason = rgw_skip_reason()
    if reason is not None:
        for item in rgw_items:
            item.add_marker(pytest.mark.skip(reason=reason))
    elif not RgwServer.available() and not _is_worker(session.config):
        # (an xdist worker cannot stop the run: pytest_runtest_setup fails each rgw test)
        pytest.exit(rgw_missing_message(), returncode=4)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if _needs_rgw(item) and rgw_skip_reason() is None and not RgwServer.available():
        pytest.fail(rgw_missing_message(), pytrace=False)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = []
    reason = rgw_skip_reason()
    if reason is not None:
        lines.append(f"RGW tests skipped: {reason}")
    run_dir = os.environ.get(RUN_DIR_ENV)
    state = shared_rgw_state(run_dir) if run_dir else None
    if state is not None and "error" not in state:
        server = RgwServer.from_state(state)
        lines.append(
            f"Ceph RGW (memstore) up in {server.start_seconds:.1f}s at {server.endpoint_url} "
            f"and {server.https_endpoint_url}, logs in {server.log_dir}"
        )
    for line in lines:
        terminalreporter.write_line(f"[zerorename] {line}")


# ---------------------------------------------------------------- servers (session scope)


#: HTTPS endpoint of a session server -> its plain HTTP endpoint (what fault_proxy forwards to)
_PLAIN_OF: dict[str, str] = {}


@pytest.fixture(scope="session")
def tls_files() -> TlsFiles:
    """The session's CA (``.ca_bundle``) and server certificates (valid, expired, ...)."""
    return session_tls()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    with MotoServer() as server:
        yield server


@pytest.fixture(scope="session")
def moto_https_url(moto_server: MotoServer, tls_files: TlsFiles) -> Iterator[str]:
    """moto over HTTPS: a FaultProxy without rules terminating TLS in front of it."""
    with FaultProxy(moto_server.endpoint_url, tls=tls_files.server.server_context()) as front:
        _PLAIN_OF[front.url] = moto_server.endpoint_url
        yield front.url


def _new_rgw() -> RgwServer:
    # memstore holds every byte the suite writes until RGW's garbage collection frees it
    # (30 s after a delete at best): 4 GiB filled once the HTTPS variants were added, and a
    # full OSD blocks writes (RGW then stops answering). 12 GiB is RAM only as far as used.
    owner = os.environ.get(RUN_OWNER_ENV)
    return RgwServer(
        tls=session_tls().server, osd_size="12G", owner_pid=int(owner) if owner else None
    )


@pytest.fixture(scope="session")
def rgw_server(request: pytest.FixtureRequest) -> RgwServer:
    """The run's one gateway (shared by the xdist workers; the run's owner stops it)."""
    reason = rgw_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    try:
        server = shared_rgw(os.environ[RUN_DIR_ENV], _new_rgw)
    except Exception as exc:
        if rgw_required():
            message = f"Ceph RGW is required but did not start: {exc}"
            if _is_worker(request.config):
                pytest.fail(message, pytrace=False)  # every rgw test of this worker fails
            pytest.exit(message, returncode=4)
        raise
    _PLAIN_OF[server.https_endpoint_url] = server.endpoint_url
    return server


# ---------------------------------------------------------------- targets (function scope)


def _test_hint(request: pytest.FixtureRequest) -> str:
    return request.node.name.split("[", 1)[0].removeprefix("test_")


@contextlib.contextmanager
def _fresh_bucket_target(
    name: str, server: MotoServer | RgwServer, request: pytest.FixtureRequest
) -> Iterator[S3Target]:
    """A target with a fresh bucket; ``name`` is a server kind, "-https" for its HTTPS
    endpoint (the target's name is the server kind either way)."""
    kind, https, _ = name.partition("-https")
    url = server.endpoint_url
    if https:
        url = (
            server.https_endpoint_url
            if isinstance(server, RgwServer)
            else request.getfixturevalue("moto_https_url")
        )
    target = S3Target(
        name=kind,
        endpoint_url=url,
        region=server.region,
        access_key=server.access_key,
        secret_key=server.secret_key,
        bucket=unique_bucket_name(_test_hint(request)),
        prefix=unique_prefix(_test_hint(request)),
        addressing_style="path",
        ca_bundle=str(session_tls().ca_bundle) if https else None,
    )
    if target.ca_bundle is not None:  # for subprocesses and clients made without the target
        request.getfixturevalue("monkeypatch").setenv("AWS_CA_BUNDLE", target.ca_bundle)
    client = target.boto3_client()  # shared with the test's own boto3_client() calls
    client.create_bucket(Bucket=target.bucket)
    try:
        yield target
    finally:
        # frees the servers' memory (both keep data in RAM); a failure here is only reported
        try:
            purge(target, delete_bucket=True, client=client)
        except Exception as exc:
            sys.stderr.write(f"\n[zerorename] cleanup of {name} bucket {target.bucket}: {exc}\n")


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


def _target(
    kind: str, request: pytest.FixtureRequest
) -> contextlib.AbstractContextManager[S3Target]:
    if kind == "external":
        return _external_target(request)
    server = request.getfixturevalue("rgw_server" if kind in _RGW_KINDS else "moto_server")
    return _fresh_bucket_target(kind, server, request)


@pytest.fixture(params=_TARGETS)
def s3(request: pytest.FixtureRequest) -> Iterator[S3Target]:
    """An S3Target on each server in turn: fresh bucket (moto/rgw), unique prefix."""
    with _target(request.param, request) as target:
        yield target


@pytest.fixture(params=_TLS_TARGETS)
def s3_tls(request: pytest.FixtureRequest) -> Iterator[S3Target]:
    """An S3Target over HTTPS on each server in turn (``ca_bundle`` verifies it)."""
    with _target(request.param, request) as target:
        yield target


@pytest.fixture
def moto_s3(request: pytest.FixtureRequest) -> Iterator[S3Target]:
    with _target(getattr(request, "param", "moto"), request) as target:
        yield target


@pytest.fixture
def rgw_s3(request: pytest.FixtureRequest) -> Iterator[S3Target]:
    with _target(getattr(request, "param", "rgw"), request) as target:
        yield target


# ---------------------------------------------------------------- fault proxy


@pytest.fixture
def fault_proxy() -> Iterator[Callable[..., Any]]:
    """Factory: ``proxy = fault_proxy(upstream_url, **kwargs)`` -> a started FaultProxy.

    Given the HTTPS endpoint of a session server (an ``s3_tls`` or HTTPS ``s3`` target's
    ``endpoint_url``), the proxy speaks TLS with the session certificate to its clients and
    forwards to that server's plain HTTP endpoint, so ``target.with_endpoint(proxy.url)``
    is HTTPS too."""
    proxies: list[FaultProxy] = []

    def make(upstream_url: str, **kwargs: Any) -> FaultProxy:
        plain = _PLAIN_OF.get(upstream_url)
        if plain is not None:
            kwargs.setdefault("tls", session_tls().server.server_context())
            upstream_url = plain
        proxy = FaultProxy(upstream_url, **kwargs)
        proxy.start()
        proxies.append(proxy)
        return proxy

    try:
        yield make
    finally:
        for proxy in reversed(proxies):
            proxy.stop()
