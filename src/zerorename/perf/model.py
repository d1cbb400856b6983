"""The harness's shared vocabulary: targets, measured samples and child-process runs.

Every measured run happens in a fresh child process (``run_in_child``), so its client CPU
time and its peak RSS (VmHWM) belong to that run alone: boto3 imported by a baseline never
inflates the engine's memory figure, and a server started by the harness never counts
as client CPU (servers run in their own processes too).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zerorename.perf.errors import ChildFailed as ChildFailed  # re-exported
from zerorename.servers.targets import Target as Target  # re-exported: the one Target
from zerorename.units import parse_size

if TYPE_CHECKING:  # the engine (aiobotocore, aiohttp) is imported by the runs that use it:
    # a baseline's child never pays its ~0.5-0.8 s of imports nor carries it in its RSS
    pass

#: the bucket the harness creates on embedded targets
DEFAULT_BUCKET = "zerorename-bench"


@dataclass
class Sample:
    """One measured run of one client in one scenario."""

    scenario: str
    client: str
    params: dict[str, Any]
    metrics: dict[str, float]
    rep: int = 0
    group: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Run:
    """One planned measurement: ``func`` ("module:function", a :data:`MeasureFn`) run in a
    child with ``params``. Runs with the same ``group`` are compared with each other
    (ratios of each client's median against the others' in that group)."""

    client: str
    func: str
    params: dict[str, Any]
    group: str = ""


# --- process measurements ---------------------------------------------------------------


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """VmHWM: the peak RSS of this process image (ru_maxrss is inherited over fork+exec
    on Linux, so a child of a big parent would report the parent's peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Meter:
    """Wall and CPU time of a block, plus the peak RSS when it ends:

    ``with Meter() as m: ...`` then ``m.wall``, ``m.cpu``, ``m.peak_rss``, ``m.base_rss``."""

    def __enter__(self) -> Meter:
        self.base_rss = rss_bytes()
        self._cpu0 = cpu_seconds()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._t0
        self.cpu = cpu_seconds() - self._cpu0
        self.peak_rss = peak_rss_bytes()


# --- child runs --------------------------------------------------------------------------

#: a measured function: (target, params) -> metrics. It runs in a fresh child process.
MeasureFn = Callable[[Target, dict[str, Any]], dict[str, float]]


def run_in_child(
    func: str,
    target: Target,
    params: dict[str, Any],
    *,
    timeout: float = 3600.0,
    profile: str | None = None,
) -> dict[str, float]:
    """Run ``func`` ("package.module:function", a :data:`MeasureFn`) in a fresh Python
    process and return its metrics. The target and params go in on stdin as JSON (so
    credentials never appear in a process listing); the metrics come back as the last
    line of stdout. With ``profile`` (a file path) the child runs under pyinstrument and
    writes its profile there as text (profiling costs CPU: figures of such runs are not
    comparable)."""
    payload = {"func": func, "target": target.to_json(), "params": params, "profile": profile}
    try:
        result: dict[str, float] = run_json_module("zerorename.perf.model", payload, timeout)
    except ChildFailed as exc:
        raise ChildFailed(f"{func} {exc}") from None
    return result


def run_json_module(module: str, payload: dict[str, Any], timeout: float, *args: str) -> Any:
    """``python -m module *args`` with ``payload`` as JSON on stdin (credentials never in
    argv); returns the JSON on the last line of its stdout. The child finds this package
    even when it is not installed. Raises :class:`ChildFailed` with its stderr's tail."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    out = proc.stdout.decode(errors="replace").strip().splitlines()
    if proc.returncode != 0 or not out:
        err = proc.stderr.decode(errors="replace").strip().splitlines() or ["(no stderr)"]
        tail = "\n".join(err[-15:])
        raise ChildFailed(f"failed (exit {proc.returncode}): {err[-1]}\n--- its stderr:\n{tail}")
    return json.loads(out[-1])


def _resolve(func: str) -> MeasureFn:
    module, _, name = func.partition(":")
    fn: MeasureFn = getattr(importlib.import_module(module), name)
    return fn


def _child_main() -> int:
    request = json.loads(sys.stdin.read())
    fn = _resolve(request["func"])
    target = Target.from_json(request["target"])
    profile = request.get("profile")
    if profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005)
        profiler.start()
        try:
            metrics = fn(target, request["params"])
        finally:
            profiler.stop()
            with open(profile, "w") as f:
                f.write(profiler.output_text(unicode=True, color=False, show_all=False))
    else:
        metrics = fn(target, request["params"])
    sys.stdout.write("\n" + json.dumps(metrics) + "\n")
    sys.stdout.flush()
    return 0


def parse_list(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


# argparse types: a bad value is one line from argparse (exit 2) before anything runs


def size_arg(text: str) -> int:
    """A size >= 1 byte (``16m``, ``16MiB``, ``4096``; units are binary: 1m = 1MiB)."""
    try:
        value = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"size must be at least 1 byte, got {text!r}")
    return value


def _int_at_least(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be >= {least}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    return _int_at_least(text, 0)


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def int_list_arg(text: str) -> list[int]:
    """A comma list of integers >= 1 (``8,16,32``)."""
    items = parse_list(text)
    if not items:
        raise argparse.ArgumentTypeError(f"need a comma-separated list of integers, got {text!r}")
    return [positive_int(x) for x in items]


def size_list_arg(text: str) -> list[int]:
    """A comma list of sizes (``8MiB,16MiB``)."""
    items = parse_list(text)
    if not items:
        raise argparse.ArgumentTypeError(f"need a comma-separated list of sizes, got {text!r}")
    return [size_arg(x) for x in items]


if __name__ == "__main__":
    raise SystemExit(_child_main())
