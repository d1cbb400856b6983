"""``tune``: measure the endpoint, propose a setting from the model, confirm it on a grid.

Planning, per ``--latency-ms`` (a list: one tuning each), probes the endpoint in a child
process (the round trip of small requests, one part sent on one connection, then a burst
of parts in flight for the client's CPU per GiB and the server's ceiling; through the
fault proxy with a latency), proposes concurrency and part size
(:mod:`zerorename.perf.scenarios.tune.model`) and measures the grid's edge until the grid brackets
the knee (:mod:`zerorename.perf.scenarios.tune.grid`); the harness then runs every grid with
interleaved repetitions. The notes pick, per latency, the cheapest setting
indistinguishable from the best that reaches ``--share`` of it, say how sure and why, and
give the answer in each user's terms; ``--advice FILE`` writes it as JSON and ``--plot``
draws MB/s against concurrency with min-max error bars, a panel per latency.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from zerorename.perf.model import (
    ChildFailed,
    Meter,
    Run,
    Sample,
    Target,
    parse_list,
    positive_int,
    run_in_child,
    size_arg,
)
from zerorename.perf.scenarios import upload as upload_scenario
from zerorename.perf.scenarios import upload_latency
from zerorename.perf.scenarios.commit.latency import Wire
from zerorename.perf.scenarios.tune.grid import Measure, bracket, extension
from zerorename.perf.scenarios.tune.model import (
    Advice,
    Pick,
    Probe,
    Setting,
    burst_rate,
    burst_time,
    grid,
    pick,
    propose,
    server_ceiling,
)
from zerorename.units import GiB, MiB, format_size, parse_size

NAME = "tune"
HELP = (
    "measure the endpoint (RTT, one connection's rate, client CPU, the server's ceiling), "
    "propose concurrency and part size from the model, confirm on a grid extended until it "
    "brackets the knee; settings for Python and PySpark, per latency"
)
OURS: tuple[str, ...] = ()
_FUNC = "zerorename.perf.clients:upload_zerorename"
_PROBE = "zerorename.perf.scenarios.tune.scenario:measure_probe"
#: small requests timed for the round trip (their median); single-part uploads timed for
#: one connection's rate (the fastest: on a shared machine the noise only slows)
RTT_REQUESTS, PART_REQUESTS = 9, 5
PROBE_PART = 8 * MiB
#: requests in flight of the burst that measures the client's CPU and the ceiling: at 32,
#: moto measured 158-162 MB/s where its grids then measured 191-297 at 2-4 in flight (a
#: server past its best), so the model proposed 1 for knees of 2-4; the burst's round
#: trips are taken out of its rate (burst_rate), so 8 in flight also measure the ceiling
#: 20-50 ms away
BURST_CONCURRENCY = 8


def latency_list_arg(text: str) -> list[float]:
    """A comma list of latencies in ms, each >= 0 (``0,20,50``; 0: the proxy, no delay)."""
    items = parse_list(text)
    if not items:
        raise argparse.ArgumentTypeError(f"need a comma-separated list of ms, got {text!r}")
    out: list[float] = []
    for item in items:
        try:
            value = float(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not a number of ms") from None
        if not math.isfinite(value) or value < 0:
            raise argparse.ArgumentTypeError(f"a latency must be a number >= 0 ms, got {item!r}")
        if value in out:
            raise argparse.ArgumentTypeError(f"latency {item} ms is given twice")
        out.append(value)
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--size",
        type=size_arg,
        default="256MiB",
        help="bytes per upload, in the probe's burst and the grid (default: 256MiB)",
    )
    p.add_argument(
        "--latency-ms",
        type=latency_list_arg,
        default=None,
        help="add this latency to every request, sent through the fault proxy (http "
        "targets); a list (0,20,50) tunes for each, 0 being the proxy with no delay "
        "(default: none: no proxy)",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.05,
        help="medians within this fraction of the best are indistinguishable from it, "
        "whatever the spreads (default: 0.05)",
    )
    p.add_argument(
        "--share",
        type=float,
        default=0.9,
        help="a pick's median must reach this fraction of the best's, however wide the "
        "spreads that make them indistinguishable (default: 0.9)",
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
        help="write the recommendation as JSON, one entry per latency (probe and its "
        "ceilings, proposal, bracketing steps, spreads, best, pick, settings) (default: none)",
    )


# --- the probe (a child process) --------------------------------------------------------


def measure_probe(target: Target, params: dict[str, Any]) -> dict[str, float]:
    """The endpoint's probe: median RTT of HeadObject, the fastest of single PUTs of
    ``part_bytes`` on one connection, then a burst (a multipart upload of ``size`` with
    many parts in flight) for the client's CPU s/GiB and the server's ceiling."""
    latency = params.get("latency_ms")
    wire = Wire(target, float(latency)) if latency is not None else None
    with wire if wire is not None else contextlib.nullcontext():
        on = wire.target if wire is not None else target
        return _probe(on, params, wire)


def _probe(target: Target, params: dict[str, Any], wire: Wire | None) -> dict[str, float]:
    from zerorename.engine import UploadEngine
    from zerorename.perf.clients import make_data
    from zerorename.portal import run

    part = int(params["part_bytes"])
    size = int(params["size"])
    base = target.key(NAME, uuid.uuid4().hex)
    burst = max(1, min(BURST_CONCURRENCY, math.ceil(size / PROBE_PART)))

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
        many = target.engine_config(
            part_size=PROBE_PART, max_concurrency=burst, max_pool_connections=burst
        )
        async with UploadEngine(many) as engine:
            path = upload_scenario.data_file(size)
            proxy0 = wire.proxy.cpu_seconds() if wire is not None else 0.0
            want0 = _wanted_seconds()
            with Meter() as m:
                await engine.upload(target.bucket, f"{base}/cpu", path)
            want1 = _wanted_seconds()
            proxy_cpu = (wire.proxy.cpu_seconds() - proxy0) if wire is not None else 0.0
            await engine.delete_object(target.bucket, f"{base}/cpu")
        return {
            "rtt_s": statistics.median(rtts),
            "part_s": min(parts),
            "part_bytes": float(part),
            "cpu_s_per_gib": max(m.cpu - proxy_cpu, 1e-6) / (size / GiB),
            "proxy_cpu_s_per_gib": proxy_cpu / (size / GiB),
            "burst_bytes": float(size),
            "burst_concurrency": float(burst),
            "burst_s": m.wall,
            "burst_cpu_s": m.cpu,
            # CPU plus the time runnable but waiting for a core: on a busy machine a
            # client that waited for the CPU did not wait for the server
            "burst_wanted_s": (want1 - want0) if want0 is not None and want1 is not None else m.cpu,
        }

    return run(main())


def _wanted_seconds() -> float | None:
    """Seconds this process's threads ran or waited runnable for a core (Linux's
    /proc/self/task/*/schedstat: run time and run-queue delay), or None."""
    total = 0
    try:
        for task in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{task}/schedstat", encoding="ascii") as f:
                    run_ns, delay_ns, _ = f.read().split()
            except FileNotFoundError:  # a thread that ended meanwhile
                continue
            total += int(run_ns) + int(delay_ns)
    except (OSError, ValueError):
        return None
    return total / 1e9


def _probe_of(got: Mapping[str, float]) -> Probe:
    """The model's probe. With --latency-ms the proxy is a thread of every measured
    process, sharing its interpreter: its CPU counts against the ceiling of the runs. The
    burst gives the server's ceiling when it left the client (and proxy) waiting."""
    cpu = got["cpu_s_per_gib"] + got.get("proxy_cpu_s_per_gib", 0.0)
    client = Probe(got["rtt_s"], int(got["part_bytes"]), got["part_s"], cpu)
    if "burst_s" not in got:
        return client
    size, conc = int(got["burst_bytes"]), int(got["burst_concurrency"])
    expected = burst_time(client, size, conc, PROBE_PART)
    busy = got.get("burst_wanted_s", got["burst_cpu_s"])
    net = burst_rate(client, size, conc, PROBE_PART, got["burst_s"])
    server = server_ceiling(size, got["burst_s"], busy, expected)
    return dataclasses.replace(client, server_bps=None if server is None else net, burst_bps=net)


# --- plan: per latency, probe, propose, bracket the grid ----------------------------------


def _latencies(args: argparse.Namespace) -> list[float | None]:
    lat = args.latency_ms
    if lat is None:
        return [None]
    if isinstance(lat, (int, float)):
        return [float(lat)]
    return list(lat)


def _lat_label(latency: float | None) -> str:
    return "no proxy" if latency is None else f"{latency:g} ms"


def _run(
    s: Setting, size: int, latency: float | None, extra: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    params = {
        "size": size,
        "part_size": s.part_size,
        "concurrency": s.concurrency,
        "pool": s.concurrency,
        "source": "file",
        "path": upload_scenario.data_file(size),
        "checksum": "CRC32C",
        **extra,
    }
    return upload_latency.wrap(_FUNC, params, latency)


def _pilot(target: Target, args: argparse.Namespace, size: int, latency: float | None) -> Measure:
    """The bracketing's measure: each setting ``--reps`` times, interleaved, in children."""

    def measure(settings: Sequence[Setting]) -> dict[Setting, list[float]]:
        out: dict[Setting, list[float]] = {s: [] for s in settings}
        order = list(settings)
        for rep in range(max(1, int(args.reps))):
            shift = rep % len(order)
            for s in order[shift:] + order[:shift]:
                func, params = _run(s, size, latency, {})
                label = f"bracket {_lat_label(latency)} {s.label()} rep {rep + 1}"
                try:
                    got = run_in_child(func, target, params, timeout=float(args.run_timeout))
                except (ChildFailed, subprocess.TimeoutExpired) as exc:
                    print(f"[perf] {label} failed: {exc}", file=sys.stderr, flush=True)
                    continue
                out[s].append(float(got["mb_s"]))
                if not getattr(args, "quiet", False):
                    print(f"[perf] {label}: {got['mb_s']:.0f} MB/s", file=sys.stderr, flush=True)
        return out

    return measure


def plan(args: argparse.Namespace, target: Target) -> list[Run]:
    """Per latency: probe the endpoint, propose, measure the grid's edge and extend it
    until it brackets the knee; then one run per setting of every bracketed grid."""
    size = parse_size(args.size)
    latencies = _latencies(args)
    for latency in latencies:
        upload_latency.check_target(latency, target)
    if not 0 <= args.tolerance < 1:
        raise SystemExit(f"--tolerance must be in [0, 1), got {args.tolerance}; e.g. 0.05")
    if not 0 < args.share <= 1:
        raise SystemExit(f"--share must be in (0, 1], got {args.share}; e.g. 0.9")
    if args.advice and not os.access(os.path.dirname(os.path.abspath(args.advice)), os.W_OK):
        raise SystemExit(f"--advice: cannot write {args.advice}; choose another path")
    runs = []
    for latency in latencies:
        params: dict[str, Any] = {"part_bytes": PROBE_PART, "size": size}
        if latency is not None:
            params["latency_ms"] = latency
        got = run_in_child(_PROBE, target, params, timeout=float(args.run_timeout))
        proposal = propose(_probe_of(got), size)
        measure = _pilot(target, args, size, latency)
        br = bracket(grid(proposal, size), measure, size, args.tolerance, share=args.share)
        extra = {
            "probe": got,
            "proposed": [proposal.setting.concurrency, proposal.setting.part_size],
            "bracket": list(br.steps),
            "added": [[s.concurrency, s.part_size] for s in br.added],
            "pilot": [[s.concurrency, s.part_size, v] for s, v in br.measured.items()],
        }
        for s in br.settings:
            func, run_params = _run(s, size, latency, extra)
            lat = "" if latency is None else f"lat={latency:g}ms "
            group = f"{lat}conc={s.concurrency} part={format_size(s.part_size)}"
            runs.append(Run("zerorename", func, run_params, group))
    return runs


# --- results, notes, plot ----------------------------------------------------------------


def _by_latency(samples: list[Sample]) -> dict[float | None, list[Sample]]:
    by: dict[float | None, list[Sample]] = defaultdict(list)
    for s in samples:
        lat = s.params.get("latency_ms")
        by[None if lat is None else float(lat)].append(s)
    return dict(by)


def _measured(samples: list[Sample]) -> dict[Setting, list[float]]:
    by: dict[Setting, list[float]] = defaultdict(list)
    for s in samples:
        key = Setting(int(s.params["concurrency"]), int(s.params["part_size"]))
        by[key].append(float(s.metrics["mb_s"]))
    return dict(by)


def result(samples: list[Sample], args: argparse.Namespace) -> tuple[dict[str, Any], Pick]:
    """One latency's recommendation as JSON-ready data, and the pick it came from."""
    got = samples[0].params["probe"]
    probe = _probe_of(got)
    proposal = propose(probe, parse_size(args.size))
    chosen = pick(_measured(samples), args.tolerance, args.share)
    advice = Advice(chosen.setting, proposal.commit_completes, args.executor_cores)
    best = chosen.spreads[chosen.best]
    mine = chosen.spreads[chosen.setting]
    lat = samples[0].params.get("latency_ms")
    doc = {
        "latency_ms": lat,
        "probe": {
            **got,
            "single_mb_s": probe.single_bps / 1e6,
            "client_ceiling_mb_s": probe.client_bps / 1e6,
            "burst_net_mb_s": None if probe.burst_bps is None else probe.burst_bps / 1e6,
            "ceiling_mb_s": probe.ceiling_bps / 1e6,
            "server_ceiling_mb_s": None if probe.server_bps is None else probe.server_bps / 1e6,
            "bound": probe.bound,
        },
        "proposal": {
            "concurrency": proposal.setting.concurrency,
            "part_size": proposal.setting.part_size,
            "in_flight_bytes": proposal.in_flight_bytes,
            "expected_mb_s": proposal.expected_bps / 1e6,
            "why": proposal.why,
        },
        "bracket": {
            "steps": list(samples[0].params.get("bracket", [])),
            "added": list(samples[0].params.get("added", [])),
            # planning's own runs: [concurrency, part size, [MB/s per run]]
            "pilot": list(samples[0].params.get("pilot", [])),
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
        "best": {"concurrency": chosen.best.concurrency, "part_size": chosen.best.part_size},
        "best_mb_s": best.median,
        "pick_over_best": mine.median / best.median if best.median > 0 else None,
        "indistinguishable": [[s.concurrency, s.part_size] for s in chosen.indistinguishable],
        "measured_knee": chosen.knee(),
        # what bracketing would still ask on the final figures (None: they bracket)
        "final_edge": _final_edge(chosen, args),
        "sureness": chosen.sureness,
        "recommendation": {**advice.to_json(), "mb_s": mine.median},
    }
    return doc, chosen


def _final_edge(chosen: Pick, args: argparse.Namespace) -> str | None:
    """Why the final figures do not bracket the knee, or None when they do."""
    ext = extension(chosen.spreads, parse_size(args.size), args.tolerance, share=args.share)
    return None if ext is None else ext.why


def _notes_one(samples: list[Sample], args: argparse.Namespace) -> tuple[list[str], Any]:
    doc, chosen = result(samples, args)
    prop = doc["proposal"]
    s, sp = chosen.setting, chosen.spreads[chosen.setting]
    knee = chosen.knee()
    ratio = max(knee, prop["concurrency"]) / min(knee, prop["concurrency"])
    agree = "within a factor of 2" if ratio <= 2 else f"off by a factor of {ratio:.1f}"
    steps = doc["bracket"]["steps"]
    final = doc["final_edge"]
    adv = Advice(s, int(doc["recommendation"]["commit_completes_in_flight"]), args.executor_cores)
    lat = doc["latency_ms"]
    lines = [
        f"-- latency {_lat_label(None if lat is None else float(lat))} --",
        f"model: {prop['why']} (expected {prop['expected_mb_s']:.0f} MB/s)",
        *_bracket_lines(steps, doc["bracket"]["added"]),
        f"measured knee: concurrency {knee} (the fewest in flight indistinguishable from the "
        f"best and within {args.share:.0%} of it); the model proposed {prop['concurrency']}: "
        f"{agree}",
        f"picked: {s.label()}: {sp.median:.0f} MB/s [{sp.low:.0f}-{sp.high:.0f}], "
        f"{format_size(s.memory())} per process; best {chosen.best.label()}: "
        f"{doc['best_mb_s']:.0f} MB/s (pick/best {doc['pick_over_best']:.0%})",
        *(
            [f"the final runs do not bracket the knee (planning's did: the noise): {final}"]
            if final
            else []
        ),
        f"how sure: {chosen.sureness}",
        "settings:",
        *adv.lines(),
    ]
    return lines, doc


def _bracket_lines(steps: Sequence[str], added: Sequence[Sequence[int]]) -> list[str]:
    """What bracketing in planning did, one line per step."""
    if not steps:
        return ["grid: brackets the knee as planned (its edge did not beat its neighbour)"]
    shown = ", ".join(f"{c} x {format_size(p)}" for c, p in added)
    head = (
        f"grid extended by {shown}:" if shown else "grid not extended (steps within it or capped):"
    )
    return [head, *(f"  {w}" for w in steps)]


def notes(samples: list[Sample], args: argparse.Namespace) -> list[str]:
    if not samples:
        return []
    groups = sorted(_by_latency(samples).items(), key=lambda kv: -1.0 if kv[0] is None else kv[0])
    shown = ",".join(f"{lat:g}" for lat, _ in groups if lat is not None)
    lines: list[str] = upload_latency.note(float(shown)) if "," not in shown and shown else []
    if "," in shown:
        lines = [
            f"--latency-ms {shown}: every request of each latency's runs went through the fault "
            f"proxy (a thread of the measured process: its CPU is taken out of cpu_s_per_gib, "
            f"its memory is in peak RSS) with that latency added before it was forwarded."
        ]
    docs = []
    for _lat, group in groups:
        more, doc = _notes_one(group, args)
        lines += more
        docs.append(doc)
    if args.advice:
        with open(args.advice, "w", encoding="utf-8") as out:
            json.dump({"per_latency": docs}, out, indent=2)
        lines.append(f"advice: {args.advice}")
    return lines


def plot(samples: list[Sample], args: argparse.Namespace, path: str) -> None:
    """MB/s against concurrency, a panel per latency, a line per part size, error bars
    from each setting's slowest to its fastest interleaved run; the pick starred."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted(_by_latency(samples).items(), key=lambda kv: -1.0 if kv[0] is None else kv[0])
    fig, axes = plt.subplots(1, len(groups), figsize=(4.8 * len(groups), 4), squeeze=False)
    for ax, (lat, group) in zip(axes[0], groups, strict=True):
        chosen = pick(_measured(group), args.tolerance, args.share)
        parts = sorted({s.part_size for s in chosen.spreads})
        for n, part in enumerate(parts):
            line = sorted(s for s in chosen.spreads if s.part_size == part)
            # each part size's points a little apart, so the error bars do not hide
            dodge = 1.04 ** (n - (len(parts) - 1) / 2)
            xs = [s.concurrency * dodge for s in line]
            med = [chosen.spreads[s].median for s in line]
            lo = [chosen.spreads[s].median - chosen.spreads[s].low for s in line]
            hi = [chosen.spreads[s].high - chosen.spreads[s].median for s in line]
            ax.errorbar(xs, med, yerr=[lo, hi], marker="o", capsize=4, label=format_size(part))
        mine = chosen.spreads[chosen.setting]
        dodge = 1.04 ** (parts.index(chosen.setting.part_size) - (len(parts) - 1) / 2)
        ax.plot(
            [chosen.setting.concurrency * dodge],
            [mine.median],
            marker="*",
            markersize=16,
            color="red",
            linestyle="none",
            label="pick",
        )
        ax.set_xscale("log", base=2)
        ticks = sorted({s.concurrency for s in chosen.spreads})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel("MB/s (median, min-max)")
        ax.set_title(f"latency {_lat_label(lat)}")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, title="part size", title_fontsize=8)
    runs = max(len(v) for g in _by_latency(samples).values() for v in _measured(g).values())
    fig.suptitle(
        f"zerorename perf tune: {format_size(parse_size(args.size))} per upload, "
        f"{runs} interleaved run(s) per setting",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
