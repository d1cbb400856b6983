"""The ``stream`` scenario: what the commit of one micro-batch costs the streaming sink.

A stream without Spark (:mod:`zerorename.perf.scenarios.stream.measure`): per batch, tasks write
``--files`` files as deferred uploads the way the streaming writer's tasks do, then
``StreamSink.commit`` of the batch is timed on an engine kept warm across batches. The
baseline is the least any commit of those files must do: the same uploads completed by a
boto3 thread pool of the commit's concurrency, then one PUT of a small record. Both run
``--batches`` timed batches (after ``--warmup`` untimed ones) on the same target, with the
same ``--latency-ms``; figures are per-batch commit latency p50/p99/max and, behind the
proxy, the requests per batch and the longest chain of them in sequence.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Iterable
from typing import Any

from zerorename.perf.model import (
    Run,
    Sample,
    Target,
    int_list_arg,
    non_negative_int,
    positive_float,
    positive_int,
    size_arg,
)
from zerorename.perf.scenarios.commit import latency as commit_latency
from zerorename.units import MiB, format_size

NAME = "stream"
HELP = (
    "streaming sink: per-batch commit latency (p50/p99/max) of micro-batches of N files, "
    "against boto3 completes + one PUT"
)
CLIENTS = ("zerorename", "baseline")
OURS = ("zerorename",)
RATIO_METRICS = ("commit_p50_ms", "commit_p99_ms", "commit_max_ms", "sequential_requests")
#: the commit's concurrency (EngineConfig.batch_concurrency's default) for the baseline pool
COMMIT_CONCURRENCY = 64
_FUNCS = {
    "zerorename": "zerorename.perf.scenarios.stream.measure:measure_stream",
    "baseline": "zerorename.perf.scenarios.stream.measure:measure_baseline",
}


def _file_size(text: str) -> int:
    value = size_arg(text)
    if value > 5 * MiB:
        raise argparse.ArgumentTypeError(f"files are one-part uploads: at most 5MiB, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The scenario's options (each has a default, stated in its help)."""
    parser.add_argument(
        "--files",
        type=int_list_arg,
        default="1,8,64",
        help="files per batch; a comma list measures each (default: %(default)s)",
    )
    parser.add_argument(
        "--batches",
        type=positive_int,
        default=20,
        help="timed batches per run; p99 is the largest of fewer than 100 (default: %(default)s)",
    )
    parser.add_argument(
        "--warmup",
        type=non_negative_int,
        default=1,
        help="untimed batches first (the first commit opens the connections and finds no "
        "log) (default: %(default)s)",
    )
    parser.add_argument(
        "--file-size",
        type=_file_size,
        default="64KiB",
        help="size of each file, one part (default: %(default)s)",
    )
    parser.add_argument(
        "--files-per-task",
        type=positive_int,
        default=1,
        help="files each task writes: a batch of N files has N / this task attempts, "
        "each one pendingset (default: %(default)s, as a Spark task per output file)",
    )
    parser.add_argument(
        "--latency-ms",
        type=positive_float,
        default=None,
        help="add this latency to every request of the timed commits, sent through the "
        "fault proxy (http targets), and count each batch's requests and sequential "
        "requests (the round trips a commit waits for); tasks write straight to the "
        "target (default: none: no proxy, no request counts)",
    )


def plan(args: argparse.Namespace, target: Target) -> list[Run]:
    """Per --files value one group: the sink and the baseline."""
    latency = commit_latency.plan_params(args.latency_ms, target)
    runs = []
    for n in args.files:
        params: dict[str, Any] = {
            "files": n,
            "uploads": n,  # named as perf commit's, so its chain notes read them
            "batches": args.batches,
            "warmup": args.warmup,
            "file_size": args.file_size,
            "files_per_task": args.files_per_task,
            "concurrency": COMMIT_CONCURRENCY,
            "target": target.name,
            **latency,
        }
        for client in CLIENTS:
            runs.append(Run(client, _FUNCS[client], params, group=f"files={n}"))
    return runs


def _order(clients: Iterable[str]) -> list[str]:
    seen = set(clients)
    return [c for c in CLIENTS if c in seen] + sorted(seen - set(CLIENTS))


def _rank(client: str) -> int:
    return CLIENTS.index(client) if client in CLIENTS else len(CLIENTS)


def notes(samples: list[Sample], args: argparse.Namespace) -> list[str]:
    """What was measured and verified, the figures per files per batch, and the chains."""
    if not samples:
        return []
    first = samples[0].params
    lines = [
        f"each run: {first['warmup']} untimed + {first['batches']} timed batches of "
        f"--files files of {format_size(int(first['file_size']))} "
        f"({first['files_per_task']} per task); zerorename = StreamSink.commit on one warm "
        f"engine (tasks write first, untimed, straight to the target); baseline = boto3 "
        f"ThreadPoolExecutor({first['concurrency']}) completing the same uploads + one PUT "
        f"of a small record. p50/p99/max are over a run's timed batches (nearest rank); "
        f"the table shows their median [min-max] over reps.",
        "verified after every run (untimed, else no figures): exactly the committed "
        "batches' files, no job record or note, no pending upload (uploads list empty), "
        "and the query's log records exactly those batches.",
    ]
    by: dict[tuple[int, str], list[Sample]] = {}
    for s in samples:
        by.setdefault((int(s.params["files"]), s.client), []).append(s)
    for (n, client), ss in sorted(by.items(), key=lambda kv: (kv[0][0], _rank(kv[0][1]))):
        p50 = statistics.median(s.metrics["commit_p50_ms"] for s in ss)
        p99 = statistics.median(s.metrics["commit_p99_ms"] for s in ss)
        seq = [s.metrics["sequential_requests"] for s in ss if "sequential_requests" in s.metrics]
        rounds = f", {statistics.median(seq):g} sequential requests" if seq else ""
        lines.append(f"  files={n} {client}: commit p50 {p50:.1f} ms, p99 {p99:.1f} ms{rounds}")
    return lines + commit_latency.notes(samples, _order)


def plot(samples: list[Sample], args: argparse.Namespace, path: str) -> None:
    """Commit p50 (bars) and p99 (markers) per files per batch, sink next to baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({int(s.params["files"]) for s in samples})
    clients = _order(s.client for s in samples)
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(1, len(clients))
    for ci, client in enumerate(clients):
        xs, p50s, p99s = [], [], []
        for i, n in enumerate(sizes):
            ss = [s for s in samples if s.client == client and int(s.params["files"]) == n]
            if ss:
                xs.append(i + ci * width)
                p50s.append(statistics.median(s.metrics["commit_p50_ms"] for s in ss))
                p99s.append(statistics.median(s.metrics["commit_p99_ms"] for s in ss))
        ax.bar(xs, p50s, width, label=f"{client} p50")
        ax.plot(xs, p99s, "k_", markersize=14, label="p99" if ci == 0 else None)
    ax.set_xticks([i + width * (len(clients) - 1) / 2 for i in range(len(sizes))])
    ax.set_xticklabels([f"{n} file{'' if n == 1 else 's'}" for n in sizes])
    ax.set_ylabel("commit latency per batch (ms)")
    target = ", ".join(sorted({str(s.params.get("target", "")) for s in samples}))
    ms = samples[0].params.get("latency_ms") if samples else None
    extra = f", +{ms:g} ms per request" if ms else ""
    ax.set_title(f"zerorename perf stream ({target}{extra})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


__all__ = ["CLIENTS", "NAME", "add_arguments", "notes", "plan", "plot"]
