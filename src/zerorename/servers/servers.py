"""Local S3 servers for the benchmarks, the demo and the tests: moto (in this process, or
in a child process of its own: :func:`moto_process`) and a throwaway Ceph RADOS Gateway.

Both bind 127.0.0.1 on free ports, so several test runs can share a machine. Both accept
:data:`TEST_ACCESS_KEY` / :data:`TEST_SECRET_KEY` (moto accepts any credentials; the RGW
launcher creates a user with exactly these).

A test run with several processes (pytest-xdist workers) shares one gateway:
:func:`shared_rgw` starts it in the first process that asks, under a file lock in the run's
directory, and records it there; the others attach to it; :func:`stop_shared_rgw`, called by
the run's owner when the run ends, stops it (its watchdog does, should the owner die first).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.resources
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

from zerorename.servers.errors import RgwNotInstalled, ServerStartError
from zerorename.servers.service import Service
from zerorename.servers.tls import CertPair

#: one credential pair that both servers accept (20 / 40 characters, like AWS keys).
TEST_ACCESS_KEY = "ZRTESTACCESSKEY00001"
TEST_SECRET_KEY = "zrtestsecretkey0000000000000000000000001"
TEST_REGION = "us-east-1"

#: Debian packages that provide the RGW binaries (Ceph 16 pacific on Debian 12).
RGW_PACKAGES = ("ceph-mon", "ceph-osd", "radosgw", "ceph-common")
RGW_BINARIES = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "ceph", "monmaptool")

_HOST = "127.0.0.1"
_apt_updated = False
_apt_lock = threading.Lock()


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 right now (held open together while
    picking, so they differ; another process may still take one before it is used)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((_HOST, 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def rgw_script() -> Path:
    """Path of the packaged launcher script ``rgw.sh`` (see its header for usage)."""
    res = importlib.resources.files("zerorename.servers").joinpath("rgw.sh")
    path = Path(str(res))
    if not path.is_file():  # pragma: no cover - only for zipped installs
        raise ServerStartError(f"launcher script not found at {path}")
    return path


class _S3Dispatch:
    """moto's WSGI dispatcher with its answer for SigV4-signed S3 requests kept.

    moto's ``DomainDispatcherApplication`` works out the service of every request anew: it
    lists moto's package directory (a stat per service) and tries each service's URL
    patterns, about as much CPU as moto's S3 handling of a small request. For a request
    signed for S3 (``Credential=.../<region>/s3/aws4_request``) that is not one of the paths
    it routes elsewhere, the answer depends on that credential scope only: it is asked once
    per region and kept. Every other request goes through the dispatcher as before."""

    _OTHER_PATHS = ("/moto-api", "/favicon.ico", "/latest/", "/v20180820/")

    def __init__(self, dispatcher: Any) -> None:
        self._dispatcher = dispatcher
        self._apps: dict[str, Any] = {}

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        auth = environ.get("HTTP_AUTHORIZATION") or ""
        # "AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/s3/aws4_request, ..."
        parts = auth.split(",", 1)[0].partition("Credential=")[2].split("/", 2)
        scope = parts[2] if len(parts) == 3 else ""
        if (
            not scope.endswith("/s3/aws4_request")
            or str(environ.get("PATH_INFO", "")).startswith(self._OTHER_PATHS)
            or "s3-control" in str(environ.get("HTTP_HOST", ""))
        ):
            return self._dispatcher(environ, start_response)
        app = self._apps.get(scope)
        if app is None:
            app = self._apps[scope] = self._dispatcher.get_application(environ)
        return app(environ, start_response)


class MotoServer(Service):
    """moto's S3 in-process, on 127.0.0.1 with a free port, served by
    :class:`~zerorename.servers.wsgiserver.WsgiServer` (keep-alive connections, a thread per
    connection) rather than moto's werkzeug server (a connection and a thread per request).

    ``with MotoServer() as m: m.endpoint_url``. moto keeps all data in RAM (keep payloads
    under ~100 MiB) and its state is process-global: use unique bucket names.
    """

    def __init__(self, *, port: int = 0) -> None:
        self._port = port
        self._server: Any = None
        self._endpoint_url: str | None = None

    @property
    def endpoint_url(self) -> str:
        if self._endpoint_url is None:
            raise ServerStartError("MotoServer is not running; call start() first")
        return self._endpoint_url

    access_key = TEST_ACCESS_KEY
    secret_key = TEST_SECRET_KEY
    region = TEST_REGION

    def start(self) -> Self:
        if self._server is not None:
            return self
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        from zerorename.servers.wsgiserver import WsgiServer

        server = WsgiServer(
            _S3Dispatch(DomainDispatcherApplication(create_backend_app)), _HOST, self._port
        )
        try:
            server.start()
        except OSError as exc:
            raise ServerStartError(f"moto server could not start on {_HOST}: {exc}") from exc
        self._server = server
        self._endpoint_url = f"http://{_HOST}:{server.port}"
        return self

    @property
    def connections(self) -> int:
        """TCP connections the server accepted so far (each serves many requests)."""
        return 0 if self._server is None else self._server.connections

    def stop(self) -> None:
        server, self._server = self._server, None
        self._endpoint_url = None
        if server is not None:
            server.stop()

    def __repr__(self) -> str:
        return f"MotoServer(endpoint_url={self._endpoint_url!r})"


@contextlib.contextmanager
def moto_process(*, timeout: float = 60.0) -> Iterator[str]:
    """A :class:`MotoServer` in a child process of its own on a free loopback port (so its
    CPU never counts as this process's: the perf harness's moto); yields its endpoint URL
    once it accepts connections, and stops it on exit. Raises ServerStartError (with the
    child's stderr) when it does not start within ``timeout`` seconds."""
    port = free_ports(1)[0]
    code = (
        "import sys\n"
        "from zerorename.servers.servers import MotoServer\n"
        f"s = MotoServer(port={port}).start()\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection((_HOST, port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                    raise ServerStartError(
                        f"moto server did not start (is moto[server] installed?): "
                        f"{err.strip()[-500:]}"
                    ) from None
                time.sleep(0.05)
        yield f"http://{_HOST}:{port}"
    finally:
        if proc.stdin:
            proc.stdin.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class RgwServer(Service):
    """A single-node Ceph RGW (1 mon, 1 OSD on memstore, no mgr) run by ``rgw.sh``.

    ``with RgwServer() as r: r.endpoint_url``. Picks free ports and a fresh base directory
    (under ``parent_dir`` or the system temp dir); stops the daemons and deletes the
    directory on exit (``keep=True`` keeps it for inspection). Startup takes ~3-5 s.
    With ``tls`` (a certificate and key, e.g. ``session_tls().server``) the same gateway
    also serves HTTPS natively (beast ``ssl_endpoint``) at :attr:`https_endpoint_url`.
    """

    def __init__(
        self,
        *,
        parent_dir: str | os.PathLike[str] | None = None,
        store: str = "memstore",
        osd_size: str | None = None,
        start_timeout: float = 60.0,
        attempts: int = 3,
        keep: bool = False,
        tls: CertPair | None = None,
        owner_pid: int | None = None,
    ) -> None:
        self._parent_dir = parent_dir
        #: the launcher's watchdog stops the daemons once this process is gone [this process]
        self.owner_pid = owner_pid
        self.tls = tls
        self.https_port: int | None = None
        self.store = store
        self.osd_size = osd_size
        self.start_timeout = start_timeout
        self.attempts = attempts
        self.keep = keep
        self.base_dir: Path | None = None
        self.port: int | None = None
        self.start_seconds: float | None = None
        self.start_output = ""

    access_key = TEST_ACCESS_KEY
    secret_key = TEST_SECRET_KEY
    region = TEST_REGION

    @staticmethod
    def available() -> bool:
        """True when every Ceph binary the launcher needs is on PATH."""
        return all(shutil.which(b) for b in RGW_BINARIES)

    @staticmethod
    def missing_binaries() -> list[str]:
        return [b for b in RGW_BINARIES if not shutil.which(b)]

    @property
    def endpoint_url(self) -> str:
        if self.port is None:
            raise ServerStartError("RgwServer is not running; call start() first")
        return f"http://{_HOST}:{self.port}"

    @property
    def https_endpoint_url(self) -> str:
        """The gateway's HTTPS endpoint (only when started with ``tls``)."""
        if self.https_port is None:
            what = "not running" if self.port is None else "started without tls"
            raise ServerStartError(f"RgwServer has no HTTPS endpoint: {what}")
        return f"https://{_HOST}:{self.https_port}"

    @property
    def log_dir(self) -> Path | None:
        return None if self.base_dir is None else self.base_dir / "log"

    def _env(self, base: Path, ports: list[int] | None) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            BASE=str(base),
            STORE=self.store,
            AK=self.access_key,
            SK=self.secret_key,
            START_TIMEOUT=str(int(self.start_timeout)),
        )
        if self.osd_size:
            env["OSD_SIZE"] = self.osd_size
        if ports is not None:
            # the launcher's watchdog stops the daemons if this process dies without stop()
            env["OWNER_PID"] = str(self.owner_pid or os.getpid())
            env.update(RGW_PORT=str(ports[0]), MON_PORT=str(ports[1]), MON2_PORT=str(ports[2]))
            if self.tls is not None:
                env.update(
                    RGW_SSL_PORT=str(ports[3]),
                    RGW_SSL_CERT=str(self.tls.cert),
                    RGW_SSL_KEY=str(self.tls.key),
                )
        return env

    def start(self) -> Self:
        """Start the gateway; retries with new ports when one was taken meanwhile."""
        if self.port is not None:
            return self
        missing = self.missing_binaries()
        if missing:
            raise RgwNotInstalled(
                f"Ceph RGW binaries missing: {', '.join(missing)}; install them with "
                f"`apt-get install -y --no-install-recommends {' '.join(RGW_PACKAGES)}` "
                "(or call zerorename.servers.servers.ensure_rgw_installed() as root)"
            )
        script = rgw_script()
        last = ""
        for attempt in range(1, self.attempts + 1):
            base = Path(tempfile.mkdtemp(prefix="zr-rgw-", dir=self._parent_dir))
            ports = free_ports(4 if self.tls is not None else 3)
            t0 = time.monotonic()
            try:
                proc = subprocess.run(
                    ["bash", str(script), "start"],
                    env=self._env(base, ports),
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    # each launcher step has its own timeout; this only guards a hang
                    timeout=self.start_timeout * 4 + 30,
                )
                rc, out = proc.returncode, proc.stdout + proc.stderr
            except subprocess.TimeoutExpired as exc:
                rc, out = -1, f"launcher timed out after {exc.timeout:.0f}s"
            except BaseException:  # interrupted (Ctrl-C, a run timeout): leave no daemon behind
                self._run_stop(base)
                shutil.rmtree(base, ignore_errors=True)
                raise
            if rc == 0:
                self.base_dir, self.port = base, ports[0]
                self.https_port = ports[3] if self.tls is not None else None
                self.start_seconds = time.monotonic() - t0
                self.start_output = out
                return self
            self._run_stop(base)
            last = out
            port_taken = "already in use" in out
            if not port_taken or attempt == self.attempts:
                # the base directory (small: logs, no data) is kept so the message's path exists
                raise ServerStartError(
                    f"Ceph RGW did not start (attempt {attempt}, rc={rc}); logs in {base}/log; "
                    f"launcher output (tail):\n{_tail(last, 60)}"
                )
            shutil.rmtree(base, ignore_errors=True)
        raise ServerStartError(f"Ceph RGW did not start:\n{_tail(last, 60)}")  # pragma: no cover

    def _run_stop(self, base: Path) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            subprocess.run(
                ["bash", str(rgw_script()), "stop"],
                env=self._env(base, None),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=60,
            )

    def stop(self) -> None:
        """Stop the daemons (by their pids) and delete the base directory unless ``keep``."""
        base, self.base_dir, self.port = self.base_dir, None, None
        self.https_port = None
        if base is None:
            return
        self._run_stop(base)
        if not self.keep:
            shutil.rmtree(base, ignore_errors=True)

    def state(self) -> dict[str, Any]:
        """What another process needs to use (:meth:`from_state`) and stop this gateway."""
        return {
            "base_dir": None if self.base_dir is None else str(self.base_dir),
            "port": self.port,
            "https_port": self.https_port,
            "start_seconds": self.start_seconds,
            "tls": None if self.tls is None else [str(self.tls.cert), str(self.tls.key)],
            "store": self.store,
            "osd_size": self.osd_size,
            "keep": self.keep,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RgwServer:
        """A running gateway another process started (see :meth:`state`)."""
        tls = state.get("tls")
        server = cls(
            store=state["store"],
            osd_size=state.get("osd_size"),
            keep=bool(state.get("keep")),
            tls=None if tls is None else CertPair(Path(tls[0]), Path(tls[1])),
        )
        server.base_dir = Path(state["base_dir"])
        server.port = state["port"]
        server.https_port = state.get("https_port")
        server.start_seconds = state.get("start_seconds")
        return server

    def __repr__(self) -> str:
        url = None if self.port is None else self.endpoint_url
        return f"RgwServer(endpoint_url={url!r}, base_dir={self.base_dir!s})"


# ---------------------------------------------------------------- one gateway per test run

_SHARED_STATE = "rgw.json"


class _RunLock:
    """An exclusive lock on ``<run_dir>/rgw.lock`` (flock: released if its holder dies)."""

    def __init__(self, run_dir: Path, timeout: float | None = None) -> None:
        self._path = run_dir / "rgw.lock"
        self._timeout = timeout
        self._file: Any = None

    def __enter__(self) -> bool:
        """True when locked; False when ``timeout`` passed first."""
        self._file = self._path.open("a")
        if self._timeout is None:
            fcntl.flock(self._file, fcntl.LOCK_EX)
            return True
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        self._file.close()  # closing releases the lock


def shared_rgw_state(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The run's recorded gateway ({"error": ...} when its start failed), or None."""
    path = Path(run_dir) / _SHARED_STATE
    if not path.exists():
        return None
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def shared_rgw(run_dir: str | os.PathLike[str], make: Callable[[], RgwServer]) -> RgwServer:
    """The run's one gateway: started with ``make()`` by the first process that asks, the
    others wait on the lock and attach. A failed start is recorded, and every process then
    raises the same :class:`ServerStartError` (the start is not tried again)."""
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    with _RunLock(run):
        state = shared_rgw_state(run)
        if state is None:
            server = make()
            try:
                server.start()
            except ServerStartError as exc:
                state = {"error": str(exc)}
            else:
                state = server.state()
            tmp = run / (_SHARED_STATE + ".tmp")
            tmp.write_text(json.dumps(state))
            tmp.replace(run / _SHARED_STATE)
    if "error" in state:
        raise ServerStartError(state["error"])
    return RgwServer.from_state(state)


def stop_shared_rgw(run_dir: str | os.PathLike[str], *, wait: float = 120.0) -> bool:
    """Stop the run's gateway if one was started (waits up to ``wait`` seconds for a start
    under way to finish); True when one was stopped."""
    run = Path(run_dir)
    if not run.is_dir():
        return False
    with _RunLock(run, timeout=wait) as locked:
        if not locked:  # a start still under way: the launcher's watchdog stops that gateway
            return False
        state = shared_rgw_state(run)
        if state is None or "error" in state:
            return False
        RgwServer.from_state(state).stop()
        (run / _SHARED_STATE).unlink(missing_ok=True)
        return True


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def ensure_rgw_installed(*, quiet: bool = False) -> None:
    """Install the Ceph RGW Debian packages when the binaries are missing.

    Needs root and apt-get (``apt-get update`` runs once per process). Raises
    :class:`RgwNotInstalled` with the command to run when it cannot install.
    """
    global _apt_updated
    if RgwServer.available():
        return
    cmd = f"apt-get install -y --no-install-recommends {' '.join(RGW_PACKAGES)}"
    if shutil.which("apt-get") is None:
        raise RgwNotInstalled(
            f"Ceph RGW binaries missing ({', '.join(RgwServer.missing_binaries())}) and no "
            f"apt-get here; install Ceph's mon, osd, radosgw and CLI (Debian: `{cmd}`)"
        )
    if os.geteuid() != 0:
        raise RgwNotInstalled(
            f"Ceph RGW binaries missing ({', '.join(RgwServer.missing_binaries())}); "
            f"run as root: `apt-get update && {cmd}`"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    out = subprocess.DEVNULL if quiet else None
    with _apt_lock:
        if not _apt_updated:
            subprocess.run(["apt-get", "update"], env=env, check=True, stdout=out)
            _apt_updated = True
        proc = subprocess.run(
            ["apt-get", "install", "-y", "--no-install-recommends", *RGW_PACKAGES],
            env=env,
            stdout=out,
        )
    if proc.returncode != 0 or not RgwServer.available():
        raise RgwNotInstalled(
            f"`{cmd}` failed (rc={proc.returncode}); still missing: "
            f"{', '.join(RgwServer.missing_binaries())}"
        )
