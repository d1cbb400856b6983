"""The ``stream`` scenario's pure parts: a run's per-batch figures, and what the
destination must hold after a run (checked before any figure is reported).

No I/O here: :mod:`zerorename.perf.scenarios.stream.measure` lists the destination and reads the
query's log, these functions judge what it found.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from zerorename.perf.errors import StreamVerificationError as StreamVerificationError  # re-exported
from zerorename.perf.scenarios.commit.verify import MAGIC_JOB_PREFIX
from zerorename.spark_adapter.stream.log import KEEP, LOG_NAME, STREAMS_DIR, StreamLog


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ``values``: a value that
    was measured (with fewer than 100 values, p99 is the largest)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {q}")
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


@dataclass(frozen=True)
class BatchFigure:
    """One timed batch commit: its wall time and, behind the proxy, its requests and the
    longest chain of them sent one after another (None without the proxy)."""

    seconds: float
    requests: int | None = None
    sequential: int | None = None


def figures(batches: Sequence[BatchFigure]) -> dict[str, float]:
    """A run's metrics over its timed batches: commit latency p50/p99/max (ms) and, when
    counted, requests per batch and sequential requests (median, and the largest)."""
    if not batches:
        raise ValueError("no timed batch")
    ms = [b.seconds * 1000.0 for b in batches]
    out = {
        "commit_p50_ms": percentile(ms, 50),
        "commit_p99_ms": percentile(ms, 99),
        "commit_max_ms": max(ms),
        "batches": float(len(batches)),
    }
    reqs = [b.requests for b in batches if b.requests is not None]
    seq = [b.sequential for b in batches if b.sequential is not None]
    if reqs and seq:
        out["requests"] = float(statistics.median(reqs))
        out["sequential_requests"] = float(statistics.median(seq))
        out["sequential_requests_max"] = float(max(seq))
    return out


@dataclass(frozen=True)
class Expected:
    """What a run committed: ``jobs`` (the batch jobs in batch order), ``files`` per batch
    of ``size`` bytes each, and the query whose log records them."""

    query_id: str
    jobs: tuple[str, ...]
    files: int
    size: int


def destination_problems(
    prefix: str,
    objects: Iterable[tuple[str, int]],
    uploads: Iterable[str],
    log: StreamLog,
    want: Expected,
) -> list[str]:
    """Everything wrong with a stream run's destination ``prefix`` (ends with '/'):
    ``objects`` are (key, size) listed under it, ``uploads`` the keys of its pending
    multipart uploads, ``log`` the query's log as read. Right is: exactly ``files`` data
    files of ``size`` bytes per committed job and no other file, no job record (magic
    directory, job note), nothing pending, and a log that records exactly those batches."""
    # imported here: the baseline's child (which never calls this) does not load the
    # committers and the engine behind them
    from zerorename.committers.paths import job_id_of_key

    problems: list[str] = []
    streams = f"{prefix}{STREAMS_DIR}/"
    log_key = f"{streams}{want.query_id}/{LOG_NAME}"
    per_job: Counter[str | None] = Counter()
    wrong_size = records = foreign = 0
    has_log = False
    for key, size in objects:
        if key == log_key:
            has_log = True
        elif key.startswith(streams) or key[len(prefix) :].startswith(MAGIC_JOB_PREFIX):
            records += 1
        elif not key.startswith(prefix):
            foreign += 1
        else:
            per_job[job_id_of_key(key)] += 1
            wrong_size += size != want.size
    expected: Counter[str | None] = Counter(dict.fromkeys(want.jobs, want.files))
    missing = (expected - per_job).total()
    extra = (per_job - expected).total()
    if missing:
        problems.append(f"{missing} committed files missing")
    if extra:
        problems.append(f"{extra} files of no committed batch")
    if wrong_size:
        problems.append(f"{wrong_size} files not of {want.size} bytes")
    if records:
        problems.append(f"{records} job records or notes left")
    if foreign:
        problems.append(f"{foreign} objects outside {prefix}")
    pending = sum(1 for _ in uploads)
    if pending:
        problems.append(f"{pending} multipart uploads left (zerorename uploads list not empty)")
    if not has_log:
        problems.append(f"no log at {log_key}")
    problems += log_problems(log, want)
    return problems


def log_problems(log: StreamLog, want: Expected) -> list[str]:
    """Where the query's log disagrees with the batches the run committed."""
    n = len(want.jobs)
    problems = []
    if log.query_id != want.query_id:
        problems.append(f"the log is query {log.query_id}'s, not {want.query_id}'s")
    if log.pending is not None:
        problems.append(f"the log has an intent of batch {log.pending.batch} left")
    if log.last_batch != n - 1 or log.batches != n:
        problems.append(
            f"the log records {log.batches} batches up to {log.last_batch}, not {n} up to {n - 1}"
        )
    if log.files != n * want.files or log.bytes != n * want.files * want.size:
        problems.append(
            f"the log counts {log.files} files of {log.bytes} bytes, not "
            f"{n * want.files} of {n * want.files * want.size}"
        )
    if tuple(e.job_id for e in log.recent) != want.jobs[-KEEP:]:
        problems.append("the log's recent batches are not the run's last jobs")
    return problems


def check(problems: Sequence[str], where: str) -> None:
    """Raise :class:`StreamVerificationError` (one line) when there are ``problems``."""
    if problems:
        raise StreamVerificationError(
            f"{where}: {'; '.join(problems)}; the run's figures are not reported"
        )


__all__ = [
    "BatchFigure",
    "Expected",
    "StreamVerificationError",
    "check",
    "destination_problems",
    "figures",
    "log_problems",
    "percentile",
]
