"""``sweep``: the engine's upload over a grid of pool size x concurrency x part size.

Every setting uploads the same object (``--size``) from the same file. The table gives
MB/s, CPU s/GiB and peak RSS per setting; the notes say, for each pool size and part
size, the concurrency where throughput stops growing (the next step adds less than
``--tolerance``), and recommend the cheapest setting (fewest requests in flight, then
fewest connections, then smallest parts: less memory) within ``--tolerance`` of the best.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from collections import defaultdict

from zerorename.perf.model import (
    Run,
    Sample,
    Target,
    int_list_arg,
    size_arg,
    size_list_arg,
)
from zerorename.perf.scenarios import upload as upload_scenario
from zerorename.perf.scenarios import upload_latency
from zerorename.units import format_size, parse_size

NAME = "sweep"
HELP = (
    "grid of pool size x concurrency x part size for the engine: where throughput stops "
    "growing, and a recommended setting"
)
OURS: tuple[str, ...] = ()
_FUNC = "zerorename.perf.clients:upload_zerorename"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--size", type=size_arg, default="512MiB", help="bytes per upload (default: 512MiB)"
    )
    p.add_argument(
        "--pools",
        type=int_list_arg,
        default="8,16,32",
        help="pool sizes (connections) (default: 8,16,32)",
    )
    p.add_argument(
        "--concurrencies",
        type=int_list_arg,
        default="4,8,16,32",
        help="requests in flight (default: 4,8,16,32)",
    )
    p.add_argument(
        "--part-sizes",
        type=size_list_arg,
        default="8MiB,16MiB,32MiB",
        help="part sizes (default: 8MiB,16MiB,32MiB)",
    )
    p.add_argument(
        "--checksum",
        default="CRC32C",
        choices=["CRC32C", "CRC32", "SHA256", "none"],
        help="per-part checksum (default: CRC32C)",
    )
    upload_scenario.add_latency_argument(p)
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.05,
        help="throughput within this fraction of the best counts as the best (default: 0.05)",
    )


def _group(pool: int, conc: int, part: int) -> str:
    return f"pool={pool} conc={conc} part={format_size(part)}"


def plan(args: argparse.Namespace, target: Target) -> list[Run]:
    size = parse_size(args.size)
    upload_latency.check_target(args.latency_ms, target)
    path = upload_scenario.data_file(size)
    runs = []
    for part in args.part_sizes:
        for pool in args.pools:
            for conc in args.concurrencies:
                params = {
                    "size": size,
                    "part_size": part,
                    "concurrency": conc,
                    "pool": pool,
                    "source": "file",
                    "path": path,
                    "checksum": args.checksum,
                }
                func, params = upload_latency.wrap(_FUNC, params, args.latency_ms)
                runs.append(Run("zerorename", func, params, _group(pool, conc, part)))
    return runs


def _medians(samples: list[Sample], metric: str) -> dict[tuple[int, int, int], float]:
    by: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    for s in samples:
        p = s.params
        by[(int(p["pool"]), int(p["concurrency"]), int(p["part_size"]))].append(s.metrics[metric])
    return {k: statistics.median(v) for k, v in by.items()}


def recommend(samples: list[Sample], tolerance: float) -> tuple[tuple[int, int, int], float]:
    """The cheapest (concurrency, pool, part) within ``tolerance`` of the best MB/s."""
    mbs = _medians(samples, "mb_s")
    best = max(mbs.values())
    ok = [k for k, v in mbs.items() if v >= (1 - tolerance) * best]
    pick = min(ok, key=lambda k: (k[1], k[0], k[2]))
    return pick, mbs[pick]


def knees(samples: list[Sample], tolerance: float) -> list[str]:
    """For each (pool, part): the concurrency after which throughput stops growing."""
    mbs = _medians(samples, "mb_s")
    lines = []
    for pool, part in sorted({(k[0], k[2]) for k in mbs}):
        concs = sorted(k[1] for k in mbs if k[0] == pool and k[2] == part)
        knee = concs[-1]
        for a, b in itertools.pairwise(concs):
            if mbs[(pool, b, part)] < (1 + tolerance) * mbs[(pool, a, part)]:
                knee = a
                break
        lines.append(
            f"  pool {pool:>3}, parts {format_size(part):>6}: stops growing at concurrency "
            f"{knee} ({mbs[(pool, knee, part)]:.0f} MB/s)"
        )
    return lines


def notes(samples: list[Sample], args: argparse.Namespace) -> list[str]:
    if not samples:
        return []
    (pool, conc, part), mbs = recommend(samples, args.tolerance)
    best = max(_medians(samples, "mb_s").values())
    rss = _medians(samples, "peak_rss_mib")[(pool, conc, part)]
    return [
        *upload_latency.note(args.latency_ms),
        f"where throughput stops growing (next concurrency step adds < {args.tolerance:.0%}):",
        *knees(samples, args.tolerance),
        f"recommended: max_concurrency={conc}, max_pool_connections={pool}, "
        f"part_size={format_size(part)}: {mbs:.0f} MB/s (best {best:.0f}), peak RSS "
        f"{rss:.0f} MiB — the fewest requests in flight within {args.tolerance:.0%} of "
        "the best",
    ]


def plot(samples: list[Sample], args: argparse.Namespace, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mbs = _medians(samples, "mb_s")
    parts = sorted({k[2] for k in mbs})
    pools = sorted({k[0] for k in mbs})
    (_rpool, rconc, rpart), rmbs = recommend(samples, args.tolerance)
    fig, axes = plt.subplots(1, len(parts), figsize=(4.5 * len(parts), 4), squeeze=False)
    for ax, part in zip(axes[0], parts, strict=True):
        for pool in pools:
            concs = sorted(k[1] for k in mbs if k[0] == pool and k[2] == part)
            ax.plot(concs, [mbs[(pool, c, part)] for c in concs], marker="o", label=f"pool {pool}")
        if part == rpart:
            ax.plot([rconc], [rmbs], marker="*", markersize=16, color="red", label="recommended")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel("MB/s (median)")
        ax.set_title(f"part size {format_size(part)}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(
        f"zerorename perf sweep: {format_size(parse_size(args.size))} per upload", fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
