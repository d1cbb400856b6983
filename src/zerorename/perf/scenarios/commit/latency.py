"""``zerorename perf commit --latency-ms``: a commit's round trips, measured on the wire.

Against a remote store a small job's commit time is its chain of dependent requests times
the round trip. With ``--latency-ms`` each measured run sends its requests through the
fault proxy (:mod:`zerorename.servers.faultproxy`, a thread of the measured process) with
that latency added to every request; the proxy's timed log of the measured phase gives
the run's ``requests`` and ``sequential_requests`` (the longest chain of requests each sent
after the previous one was answered, :mod:`zerorename.servers.requestlog`). The chain's
operations, which a metric (a number) cannot carry, go to a file the notes read.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import shutil
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from zerorename.perf.model import Meter, Sample, Target
from zerorename.perf.opentarget import TargetError
from zerorename.servers.requestlog import Request, describe, sequential_requests

#: the measured phase of a run: a Meter, with or without the proxy's window around it
Measure = Callable[[], AbstractContextManager[Meter]]
_SUFFIX = ".chain.txt"


def plan_params(latency_ms: float | None, target: Target) -> dict[str, Any]:
    """What every run of the commit scenario gets for ``--latency-ms`` (nothing without
    it): the latency and a directory for the chains' descriptions, removed at exit.
    Refuses a target the proxy cannot front."""
    if latency_ms is None:
        return {}
    if not (target.endpoint_url or "").startswith("http://"):
        raise TargetError(
            f"--latency-ms runs the commit through the fault proxy, which forwards to "
            f"http:// endpoints only, not {target.endpoint_url or 'AWS'}; use an embedded "
            f"target without --tls, or an http:// URL"
        )
    chains = tempfile.mkdtemp(prefix="zr-perf-chains-")
    atexit.register(shutil.rmtree, chains, ignore_errors=True)
    return {"latency_ms": latency_ms, "chains_dir": chains}


class Wire:
    """The fault proxy in front of a run's target with ``latency_ms`` on every request
    (``with Wire(target, latency_ms) as wire``): clients use ``wire.target``, the measured
    phase runs in ``wire.measure()``, and ``wire.log`` is that phase's requests."""

    def __init__(self, target: Target, latency_ms: float) -> None:
        # here, not at import: the harness's parser (`zerorename perf ... -h`) imports this
        from zerorename.servers.faultproxy import FaultProxy, FaultRule

        self._upstream = target
        self.proxy = FaultProxy(str(target.endpoint_url))
        self.proxy.add_rule(FaultRule(fault="latency", delay=latency_ms / 1000.0))
        self.log: list[Request] = []

    def __enter__(self) -> Wire:
        self.proxy.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.proxy.stop()

    @property
    def target(self) -> Target:
        """The run's target, reached through the proxy."""
        return dataclasses.replace(self._upstream, endpoint_url=self.proxy.url)

    @contextlib.contextmanager
    def measure(self) -> Iterator[Meter]:
        """A :class:`Meter` over the block whose requests alone are logged; the proxy's
        CPU (its thread in this process) is taken out of the meter's."""
        self.proxy.reset()
        cpu = self.proxy.cpu_seconds()
        with Meter() as meter:
            yield meter
        meter.cpu -= self.proxy.cpu_seconds() - cpu
        self.log = self.proxy.log

    def metrics(self) -> dict[str, float]:
        return {
            "requests": float(len(self.log)),
            "sequential_requests": float(sequential_requests(self.log)),
        }

    def save_chain(self, params: dict[str, Any], client: str) -> None:
        """The measured phase's :func:`describe` line, for :func:`notes`."""
        name = f"{client}-{int(params['uploads'])}-{uuid.uuid4().hex[:8]}{_SUFFIX}"
        (Path(params["chains_dir"]) / name).write_text(describe(self.log), encoding="utf-8")


def measured(target: Target, params: dict[str, Any]) -> AbstractContextManager[Wire | None]:
    """A :class:`Wire` when the run has a latency, else nothing (a null context)."""
    latency = params.get("latency_ms")
    if latency is None:
        return contextlib.nullcontext()
    return Wire(target, float(latency))


def notes(samples: Iterable[Sample], order: Callable[[Iterable[str]], list[str]]) -> list[str]:
    """What ``--latency-ms`` measured and each client's chains per N (the distinct
    :func:`describe` lines of its runs), clients in ``order``."""
    samples = [s for s in samples if s.params.get("latency_ms") is not None]
    if not samples:
        return []
    ms = float(samples[0].params["latency_ms"])
    lines = [
        f"--latency-ms {ms:g}: every request went through the fault proxy (a thread of the "
        f"measured process: its CPU is taken out of the figures, its memory is in peak RSS) "
        f"with {ms:g} ms added; requests and sequential_requests count the measured phase's "
        f"requests and the longest chain of them sent one after another. Chains:"
    ]
    chains_dir = Path(str(samples[0].params["chains_dir"]))
    sizes = sorted({int(s.params["uploads"]) for s in samples})
    for n in sizes:
        for client in order({s.client for s in samples if int(s.params["uploads"]) == n}):
            seen = Counter(
                p.read_text(encoding="utf-8") for p in chains_dir.glob(f"{client}-{n}-*{_SUFFIX}")
            )
            runs = sum(seen.values())
            for line, count in seen.most_common():
                share = "" if count == runs else f" ({count} of {runs} runs)"
                lines.append(f"  {client} N={n}{share}: {line}")
    return lines


__all__ = ["Measure", "Wire", "measured", "notes", "plan_params"]
