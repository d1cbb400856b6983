"""``tune``: measure the endpoint, propose a setting from the model, confirm it on a grid.

Planning probes the endpoint in a child process (the round trip of small requests, one
part sent on one connection, the client's CPU per GiB; through the fault proxy with
``--latency-ms``), proposes concurrency and part size (:mod:`zerorename.perf.tunemodel`)
and plans the small grid around the proposal; the harness runs it with interleaved
repetitions. The notes pick the cheapest setting indistinguishable from the best, say how
sure and why, and give the answer in each user's terms; ``--advice FILE`` writes it as
JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time
import uuid
from collections import defaultdict
from typing import Any

from zerorename.perf import upload_latency, upload_scenario
from zerorename.perf.commit_latency import Wire
from zerorename.perf.model import (
    Meter,
    Run,
    Sample,
    Target,
    positive_int,
    run_in_child,
    size_arg,
)
from zerorename.perf.tunemodel import Advice, Pick, Probe, Setting, grid, pick, propose
from zerorename.units import GiB, MiB, format_size, parse_size

NAME = "tune"
HELP = (
    "measure the endpoint (RTT, one connection's rate, client CPU), propose concurrency and "
    "part size from the model, confirm on a small grid; settings for Python and PySpark"
)
OURS: tuple[str, ...] = ()
_FUNC = "zerorename.perf.clients:upload_zerorename"
_PROBE = "zerorename.perf.tune_scenario:measure_probe"
#: small requests timed for the round trip; single-part uploads timed for one connection
RTT_REQUESTS, PART_REQUESTS = 9, 3
PROBE_PART = 8 * MiB


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--size",
        type=size_arg,
        default="256MiB",
        help="bytes per upload, in the probe's CPU measurement and the grid (default: 256MiB)",
    )
    upload_scenario.add_latency_argument(p)
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.05,
        help="medians within this fraction of the best are indistinguishable from it, "
        "whatever the spreads (default: 0.05)",
    )
    p.add_argument(
        "--executor-cores",
        type=positive_int,
        default=4,
        help="cores per Spark executor, for what the Spark options mean per executor (default: 4)",
    )
    p.add_argument(
        "--advice",
        metavar="FILE",
        help="write the recommendation (probe, proposal, spreads, pick, settings) as JSON "
        "(default: none)",
    )


# --- the probe (a child process) --------------------------------------------------------


def measure_probe(target: Target, params: dict[str, Any]) -> dict[str, float]:
    """The endpoint's probe: median RTT of HeadObject, median time of one PUT of
    ``part_bytes`` on one connection, CPU s/GiB of a multipart upload of ``size``."""
    latency = params.get("latency_ms")
    wire = Wire(target, float(latency)) if latency is not None else None
    with wire if wire is not None else contextlib.nullcontext():
        on = wire.target if wire is not None else target
        return _probe(on, params, wire)


def _probe(target: Target, params: dict[str, Any], wire: Wire | None) -> dict[str, float]:
    from zerorename.engine import UploadEngine
    from zerorename.engine.runner import run
    from zerorename.perf.clients import make_data

    part = int(params["part_bytes"])
    size = int(params["size"])
    base = target.key(NAME, uuid.uuid4().hex)

    async def main() -> dict[str, float]:
        one = target.engine_config(max_concurrency=1, max_pool_connections=1)
        async with UploadEngine(one) as engine:
            small = f"{base}/small"
            await engine.upload(target.bucket, small, b"x")
            rtts = []
            for _ in range(RTT_REQUESTS):
                t0 = time.perf_counter()
                await engine.head_object(target.bucket, small)
                rtts.append(time.perf_counter() - t0)
            body = make_data(part)
            parts = []
            for i in range(PART_REQUESTS):
                t0 = time.perf_counter()
                await engine.upload(target.bucket, f"{base}/part-{i}", body)
                parts.append(time.perf_counter() - t0)
            keys = [small, *(f"{base}/part-{i}" for i in range(PART_REQUESTS))]
            await engine.delete_objects(target.bucket, keys)
        many = target.engine_config(part_size=PROBE_PART, max_concurrency=4)
        async with UploadEngine(many) as engine:
            path = upload_scenario.data_file(size)
            proxy0 = wire.proxy.cpu_seconds() if wire is not None else 0.0
            with Meter() as m:
                await engine.upload(target.bucket, f"{base}/cpu", path)
            proxy_cpu = (wire.proxy.cpu_seconds() - proxy0) if wire is not None else 0.0
            await engine.delete_object(target.bucket, f"{base}/cpu")
        return {
            "rtt_s": statistics.median(rtts),
            "part_s": statistics.median(parts),
            "part_bytes": float(part),
            "cpu_s_per_gib": max(m.cpu - proxy_cpu, 1e-6) / (size / GiB),
            "proxy_cpu_s_per_gib": proxy_cpu / (size / GiB),
        }

    return run(main())


# --- plan and notes ---------------------------------------------------------------------


def plan(args: argparse.Namespace, target: Target) -> list[Run]:
    """Probe the endpoint now, then one run per setting of the grid around the proposal."""
    size = parse_size(args.size)
    upload_latency.check_target(args.latency_ms, target)
    if not 0 <= args.tolerance < 1:
        raise SystemExit(f"--tolerance must be in [0, 1), got {args.tolerance}; e.g. 0.05")
    if args.advice and not os.access(os.path.dirname(os.path.abspath(args.advice)), os.W_OK):
        raise SystemExit(f"--advice: cannot write {args.advice}; choose another path")
    params: dict[str, Any] = {"part_bytes": PROBE_PART, "size": size}
    if args.latency_ms is not None:
        params["latency_ms"] = args.latency_ms
    got = run_in_child(_PROBE, target, params, timeout=float(args.run_timeout))
    probe = _probe_of(got)
    proposal = propose(probe, size)
    path = upload_scenario.data_file(size)
    runs = []
    for s in grid(proposal, size):
        run_params = {
            "size": size,
            "part_size": s.part_size,
            "concurrency": s.concurrency,
            "pool": s.concurrency,
            "source": "file",
            "path": path,
            "checksum": "CRC32C",
            "probe": got,
            "proposed": [proposal.setting.concurrency, proposal.setting.part_size],
        }
        func, run_params = upload_latency.wrap(_FUNC, run_params, args.latency_ms)
        group = f"conc={s.concurrency} part={format_size(s.part_size)}"
        runs.append(Run("zerorename", func, run_params, group))
    return runs


def _probe_of(got: dict[str, float]) -> Probe:
    """The model's probe. With --latency-ms the proxy is a thread of every measured
    process, sharing its interpreter: its CPU counts against the ceiling of the runs."""
    cpu = got["cpu_s_per_gib"] + got.get("proxy_cpu_s_per_gib", 0.0)
    return Probe(got["rtt_s"], int(got["part_bytes"]), got["part_s"], cpu)


def _measured(samples: list[Sample]) -> dict[Setting, list[float]]:
    by: dict[Setting, list[float]] = defaultdict(list)
    for s in samples:
        key = Setting(int(s.params["concurrency"]), int(s.params["part_size"]))
        by[key].append(float(s.metrics["mb_s"]))
    return dict(by)


def result(samples: list[Sample], args: argparse.Namespace) -> tuple[dict[str, Any], Pick]:
    """The recommendation as JSON-ready data, and the pick it came from."""
    got = samples[0].params["probe"]
    probe = _probe_of(got)
    proposal = propose(probe, parse_size(args.size))
    chosen = pick(_measured(samples), args.tolerance)
    advice = Advice(chosen.setting, proposal.commit_completes, args.executor_cores)
    doc = {
        "latency_ms": args.latency_ms,
        "probe": {**got, "single_mb_s": probe.single_bps / 1e6},
        "proposal": {
            "concurrency": proposal.setting.concurrency,
            "part_size": proposal.setting.part_size,
            "in_flight_bytes": proposal.in_flight_bytes,
            "expected_mb_s": proposal.expected_bps / 1e6,
            "why": proposal.why,
        },
        "grid": [
            {
                "concurrency": s.concurrency,
                "part_size": s.part_size,
                "memory_bytes": s.memory(),
                "mb_s": {"low": sp.low, "median": sp.median, "high": sp.high, "runs": sp.runs},
            }
            for s, sp in sorted(chosen.spreads.items(), key=lambda kv: kv[0].cost())
        ],
        "indistinguishable": [[s.concurrency, s.part_size] for s in chosen.indistinguishable],
        "measured_knee": chosen.knee(),
        "sureness": chosen.sureness,
        "recommendation": {
            **advice.to_json(),
            "mb_s": chosen.spreads[chosen.setting].median,
        },
    }
    return doc, chosen


def notes(samples: list[Sample], args: argparse.Namespace) -> list[str]:
    if not samples:
        return []
    doc, chosen = result(samples, args)
    prop = doc["proposal"]
    s, sp = chosen.setting, chosen.spreads[chosen.setting]
    knee = chosen.knee()
    ratio = max(knee, prop["concurrency"]) / min(knee, prop["concurrency"])
    agree = "within a factor of 2" if ratio <= 2 else f"off by a factor of {ratio:.1f}"
    if knee == min(k.concurrency for k in chosen.spreads):
        agree += " (the grid's smallest concurrency: the knee may be lower)"
    if chosen.best.concurrency == max(k.concurrency for k in chosen.spreads):
        agree += " (the best is at the grid's largest concurrency: more may still help)"
    adv = Advice(s, int(doc["recommendation"]["commit_completes_in_flight"]), args.executor_cores)
    lines = [
        *upload_latency.note(args.latency_ms),
        f"model: {prop['why']} (expected {prop['expected_mb_s']:.0f} MB/s)",
        f"measured knee: concurrency {knee} (the fewest in flight indistinguishable from the "
        f"best); the model proposed {prop['concurrency']}: {agree}",
        f"picked: {s.label()}: {sp.median:.0f} MB/s [{sp.low:.0f}-{sp.high:.0f}], "
        f"{format_size(s.memory())} per process",
        f"how sure: {chosen.sureness}",
        "settings:",
        *adv.lines(),
    ]
    if args.advice:
        with open(args.advice, "w", encoding="utf-8") as out:
            json.dump(doc, out, indent=2)
        lines.append(f"advice: {args.advice}")
    return lines
