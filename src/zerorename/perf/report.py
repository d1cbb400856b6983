"""Summaries, ratios, tables, the JSON document and generic plots of a harness run."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zerorename.perf.model import Sample
from zerorename.units import GiB, KiB

#: metrics where a bigger value is better (all others: smaller is better)
HIGHER_IS_BETTER = frozenset(
    {"mb_s", "objects_s", "completes_s", "verified", "uploads", "files", "output_mb"}
)
#: metrics that describe a run rather than rate it: no ratios for them
DESCRIPTIVE = frozenset(
    {"verified", "uploads", "files", "output_mb", "objects", "bytes", "cpu_x_floor"}
)
#: the client whose CPU the "x floor" column divides by (perf/floor.py)
FLOOR = "floor"

#: the order metrics are shown in (others follow alphabetically)
_ORDER = [
    "mb_s",
    "objects_s",
    "completes_s",
    "commit_s",
    "requests",
    "sequential_requests",
    "write_s",
    "wall_s",
    "cpu_s_per_gib",
    "cpu_ms_per_object",
    "cpu_ms_per_complete",
    "cpu_x_floor",
    "peak_rss_mib",
    "growth_mib",
]


@dataclass
class Stat:
    group: str
    client: str
    metric: str
    median: float
    low: float
    high: float
    n: int

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "client": self.client,
            "metric": self.metric,
            "median": self.median,
            "min": self.low,
            "max": self.high,
            "n": self.n,
        }


@dataclass
class Ratio:
    group: str
    client: str
    baseline: str
    metric: str
    value: float  # client median / baseline median

    @property
    def better(self) -> bool:
        return self.value > 1 if self.metric in HIGHER_IS_BETTER else self.value < 1

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "client": self.client,
            "baseline": self.baseline,
            "metric": self.metric,
            "ratio": self.value,
        }


def metric_order(names: set[str]) -> list[str]:
    first = [m for m in _ORDER if m in names]
    return first + sorted(names - set(first))


def add_floor(samples: Sequence[Sample], metric: str | None) -> None:
    """The "x floor" column: each sample's ``metric`` over the median of the floor's
    samples of the same group (this run's floor, never a constant), as ``cpu_x_floor``."""
    if not metric:
        return
    floors: dict[str, list[float]] = {}
    for s in samples:
        if s.client == FLOOR and metric in s.metrics:
            floors.setdefault(s.group, []).append(float(s.metrics[metric]))
    for s in samples:
        values = floors.get(s.group)
        if values and metric in s.metrics and statistics.median(values) > 0:
            s.metrics["cpu_x_floor"] = float(s.metrics[metric]) / statistics.median(values)


def summarize(samples: Sequence[Sample]) -> list[Stat]:
    """Median and min-max of every metric per (group, client)."""
    buckets: dict[tuple[str, str, str], list[float]] = {}
    for s in samples:
        for metric, value in s.metrics.items():
            buckets.setdefault((s.group, s.client, metric), []).append(float(value))
    return [
        Stat(g, c, m, statistics.median(v), min(v), max(v), len(v))
        for (g, c, m), v in buckets.items()
    ]


def ratios(
    stats: Sequence[Stat],
    ours: Sequence[str],
    pairs: Sequence[tuple[str, str]] | None = None,
    metrics: Sequence[str] | None = None,
) -> list[Ratio]:
    """Our clients' medians over the baselines' medians, per group and metric: for the
    given (ours, baseline) ``pairs`` (default: each of ``ours`` against every other
    client), for ``metrics`` (default: every rated metric)."""
    index = {(s.group, s.client, s.metric): s for s in stats}
    out: list[Ratio] = []
    groups = sorted({s.group for s in stats})
    for group in groups:
        clients = [c for c in dict.fromkeys(s.client for s in stats if s.group == group)]
        if pairs is None:
            todo = [(m, o) for m in clients if m in ours for o in clients if o not in ours]
        else:
            todo = [(m, o) for m, o in pairs if m in clients and o in clients]
        names = list(metrics) if metrics is not None else metric_order({s.metric for s in stats})
        for mine, other in todo:
            for metric in names:
                st = index.get((group, mine, metric))
                base = index.get((group, other, metric))
                if st is None or base is None or base.median == 0 or metric in DESCRIPTIVE:
                    continue
                out.append(Ratio(group, mine, other, metric, st.median / base.median))
    return out


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    a = abs(value)
    if a >= 1000:
        return f"{value:,.0f}"
    if a >= 100:
        return f"{value:.1f}"
    if a >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join([line, sep, *body])


def stats_table(stats: Sequence[Stat]) -> str:
    """One row per (group, client): each metric as ``median [min-max]``."""
    metrics = metric_order({s.metric for s in stats})
    index = {(s.group, s.client, s.metric): s for s in stats}
    keys = list(dict.fromkeys((s.group, s.client) for s in stats))
    rows = []
    for group, client in keys:
        row = [group or "-", client]
        for m in metrics:
            st = index.get((group, client, m))
            if st is None:
                row.append("")
            elif st.n == 1 or st.low == st.high:
                row.append(_fmt(st.median))
            else:
                row.append(f"{_fmt(st.median)} [{_fmt(st.low)}-{_fmt(st.high)}]")
        rows.append(row)
    return format_table(["group", "client", *metrics], rows)


def ratios_table(rs: Sequence[Ratio]) -> str:
    rows = [
        [
            r.group or "-",
            f"{r.client} / {r.baseline}",
            r.metric,
            f"{r.value:.2f}x",
            "better" if r.better else "worse",
        ]
        for r in rs
    ]
    return format_table(["group", "ratio", "metric", "value", ""], rows)


# --- the JSON document ---------------------------------------------------------------------

_PACKAGES = (
    "zerorename",
    "aiobotocore",
    "botocore",
    "boto3",
    "s3transfer",
    "aiohttp",
    "uvloop",
    "anyio",
    "tenacity",
    "crc32c",
    "moto",
    "pyspark",
    "pyarrow",
    "obstore",
    "awscrt",
)


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def machine() -> dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gib = 0.0
    try:
        with open("/proc/meminfo") as f:
            mem_gib = int(f.readline().split()[1]) * KiB / GiB  # kB
    except (OSError, ValueError, IndexError):
        pass
    return {
        "hostname": socket.gethostname(),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_gib, 1),
        "kernel": platform.release(),
        "platform": platform.platform(),
        "load_avg": list(os.getloadavg()),
    }


# --- generic plot -----------------------------------------------------------------------------


def bar_plot(stats: Sequence[Stat], path: str, title: str) -> None:
    """One bar panel per metric: each (group, client) median with min-max error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in metric_order({s.metric for s in stats}) if m not in DESCRIPTIVE]
    if not metrics:
        return
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 4), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        sel = [s for s in stats if s.metric == metric]
        labels = [f"{s.client}\n{s.group}" if s.group else s.client for s in sel]
        meds = [s.median for s in sel]
        err = [[s.median - s.low for s in sel], [s.high - s.median for s in sel]]
        ax.bar(range(len(sel)), meds, yerr=err, capsize=4, color="tab:blue")
        ax.set_xticks(range(len(sel)), labels, rotation=30, ha="right", fontsize=8)
        better = "higher" if metric in HIGHER_IS_BETTER else "lower"
        ax.set_title(f"{metric} ({better} is better)", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
