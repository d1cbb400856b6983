"""``--latency-ms`` for ``perf upload`` and ``perf sweep``: a run's client through the proxy.

Against a remote store an upload's throughput is bounded by the bytes in flight over the
round trip; on loopback every store answers at once. With ``--latency-ms`` each measured run
starts the fault proxy (:class:`~zerorename.perf.scenarios.commit.latency.Wire`, a thread of the
measured child) with that latency added to every request and runs its client against it.
The proxy's CPU over the run is taken out of the run's CPU figure; its memory is in peak RSS.
"""

from __future__ import annotations

import importlib
from typing import Any

from zerorename.perf.model import MeasureFn, Target
from zerorename.perf.opentarget import TargetError
from zerorename.perf.scenarios.commit.latency import Wire
from zerorename.units import GiB

#: the measured function that runs another one (params["inner"]) behind the proxy
FUNC = "zerorename.perf.scenarios.upload_latency:through_proxy"


def check_target(latency_ms: float | None, target: Target) -> None:
    """Refuse ``--latency-ms`` for a target the proxy cannot front (one line)."""
    if latency_ms is not None and not (target.endpoint_url or "").startswith("http://"):
        raise TargetError(
            f"--latency-ms sends every request through the fault proxy, which forwards to "
            f"http:// endpoints only, not {target.endpoint_url or 'AWS'}; use an embedded "
            f"target without --tls, or an http:// URL"
        )


def wrap(func: str, params: dict[str, Any], latency_ms: float | None) -> tuple[str, dict[str, Any]]:
    """The (func, params) a run gets: unchanged without a latency, else the proxy's."""
    if latency_ms is None:
        return func, params
    return FUNC, {**params, "latency_ms": latency_ms, "inner": func}


def through_proxy(target: Target, params: dict[str, Any]) -> dict[str, float]:
    """Run ``params["inner"]`` against ``target`` behind the proxy with the latency."""
    module, _, name = str(params["inner"]).partition(":")
    inner: MeasureFn = getattr(importlib.import_module(module), name)
    with Wire(target, float(params["latency_ms"])) as wire:
        cpu0 = wire.proxy.cpu_seconds()
        metrics = dict(inner(wire.target, params))
        proxy_cpu = wire.proxy.cpu_seconds() - cpu0
        requests = len(wire.proxy.log)
    if "cpu_s_per_gib" in metrics and "size" in params:
        gib = int(params["size"]) / GiB
        metrics["cpu_s_per_gib"] = max(0.0, metrics["cpu_s_per_gib"] - proxy_cpu / gib)
    metrics["requests"] = float(requests)
    return metrics


def note(latency_ms: float | None) -> list[str]:
    """The report's line on what ``--latency-ms`` did (nothing without it)."""
    if latency_ms is None:
        return []
    return [
        f"--latency-ms {latency_ms:g}: every request went through the fault proxy (a thread "
        f"of the measured process: its CPU is taken out of cpu_s_per_gib, its memory is in "
        f"peak RSS) with {latency_ms:g} ms added before it was forwarded."
    ]


__all__ = ["FUNC", "check_target", "note", "through_proxy", "wrap"]
