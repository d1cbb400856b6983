"""A throwaway Spark standalone cluster on loopback, from pyspark's bundled classes.

Test support, not product (``zerorename.spark_adapter.cluster`` until issue 21): the
speculation tests' ``cluster`` fixture starts it, since speculation needs two executors on
two hosts (Spark never runs a speculative copy on the host of the original attempt). One
master on 127.0.0.1 and workers on 127.0.0.1, 127.0.0.2, ... (all of 127/8 is loopback on
Linux). Each daemon runs in its own process group and is killed with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from zerorename.spark_adapter.errors import ClusterError

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> str:
    """SPARK_HOME of the installed pyspark (its bundled jars and scripts)."""
    from pyspark.find_spark_home import _find_spark_home

    return str(_find_spark_home())


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class _Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class StandaloneCluster:
    """``with StandaloneCluster(worker_hosts=("127.0.0.1", "127.0.0.2")) as c: c.master_url``."""

    worker_hosts: Sequence[str] = ("127.0.0.1", "127.0.0.2")
    cores_per_worker: int = 1
    memory_per_worker: str = "1g"
    start_timeout: float = 90.0
    master_host: str = "127.0.0.1"
    base_dir: Path | None = None
    master_url: str = ""
    webui_url: str = ""
    _daemons: list[_Daemon] = field(default_factory=list)
    _own_dir: bool = False

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _spawn(self, name: str, args: list[str], local_ip: str) -> _Daemon:
        assert self.base_dir is not None
        log = self.base_dir / f"{name}.log"
        env = dict(os.environ)
        env.update(
            SPARK_HOME=spark_home(),
            SPARK_LOCAL_IP=local_ip,
            SPARK_LOG_DIR=str(self.base_dir),
            SPARK_WORKER_DIR=str(self.base_dir / f"{name}-work"),
        )
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [os.path.join(spark_home(), "bin", "spark-class"), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # own process group: killed with its executors
            )
        daemon = _Daemon(name, proc, log)
        self._daemons.append(daemon)
        return daemon

    def _logs(self) -> str:
        out = []
        for d in self._daemons:
            try:
                tail = d.log.read_text(errors="replace")[-3000:]
            except OSError:
                tail = "(no log)"
            out.append(f"--- {d.name} (exit {d.proc.poll()}) ---\n{tail}")
        return "\n".join(out)

    def status(self) -> dict[str, object]:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(self.webui_url + "/json/", timeout=5) as resp:
            data: dict[str, object] = json.loads(resp.read())
            return data

    def start(self) -> None:
        if self.base_dir is None:
            self.base_dir = Path(tempfile.mkdtemp(prefix="zr-spark-cluster-"))
            self._own_dir = True
        port = free_port(self.master_host)
        ui_port = free_port(self.master_host)
        self.master_url = f"spark://{self.master_host}:{port}"
        self.webui_url = f"http://{self.master_host}:{ui_port}"
        self._spawn(
            "master",
            [
                MASTER_CLASS,
                "--host",
                self.master_host,
                "--port",
                str(port),
                "--webui-port",
                str(ui_port),
            ],
            self.master_host,
        )
        try:
            self._wait(lambda s: True, "master")
            for i, host in enumerate(self.worker_hosts):
                self._spawn(
                    f"worker{i}",
                    [
                        WORKER_CLASS,
                        "--host",
                        host,
                        "--port",
                        str(free_port(host)),
                        "--webui-port",
                        str(free_port(host)),
                        "--cores",
                        str(self.cores_per_worker),
                        "--memory",
                        self.memory_per_worker,
                        "--work-dir",
                        str(self.base_dir / f"worker{i}-work"),
                        self.master_url,
                    ],
                    host,
                )
            n = len(self.worker_hosts)
            self._wait(lambda s: int(str(s.get("aliveworkers", 0))) >= n, f"{n} workers")
        except BaseException:
            self.stop()
            raise

    def _wait(self, ready: object, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            for d in self._daemons:
                if d.proc.poll() is not None:
                    raise ClusterError(
                        f"spark {d.name} exited while waiting for {what}:\n" + self._logs()
                    )
            try:
                status = self.status()
                if callable(ready) and ready(status):
                    return
            except OSError as exc:
                last = exc
            time.sleep(0.3)
        raise ClusterError(f"timed out waiting for {what} ({last}):\n" + self._logs())

    def stop(self) -> None:
        """Kill every daemon's process group (workers first), wait, remove the temp dir."""
        for d in reversed(self._daemons):
            if d.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(d.proc.pid, signal.SIGTERM)
        for d in reversed(self._daemons):
            try:
                d.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(d.proc.pid, signal.SIGKILL)
                d.proc.wait(timeout=10)
        self._daemons.clear()
        if self._own_dir and self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None
