"""The ``commit`` scenario: how fast a job commit completes N deferred uploads.

Clients, on the same target with the same prepared state (N one-part deferred uploads of
``--object-kib`` KiB, written by ``--pendingsets`` magic task attempts):

- ``zerorename``: ``Job.commit(summaries)``, the product's job commit: it streams the
  pendingsets, completes through ``engine.complete_many`` with ``--batch-concurrency`` in
  flight, writes ``_SUCCESS`` and deletes the job's records.
- ``boto3-15`` / ``boto3-64``: the classic loop, a ``ThreadPoolExecutor`` of 15 (S3A's old
  connection pool) or 64 threads calling ``complete_multipart_upload`` for each upload of a
  list already in memory; boto3 as users run it (default config but the pool size).

Each measured run (a child of the harness, see :func:`zerorename.perf.model.run_in_child`)
prepares its own job under a fresh prefix in a separate process (``python -m
zerorename.perf.scenarios.commit.scenario prepare``, untimed), so the child's CPU and peak
RSS are the commit's alone; then it measures, verifies by listing (untimed) and deletes
what it wrote. With ``--latency-ms`` the measured phase goes through the fault proxy and
each run also reports its requests and sequential requests
(:mod:`zerorename.perf.scenarios.commit.latency`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import select
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from zerorename.perf.errors import PrepareFailed as PrepareFailed  # re-exported
from zerorename.perf.model import (
    ChildFailed,
    Meter,
    Run,
    Sample,
    Target,
    positive_float,
    run_json_module,
)
from zerorename.perf.scenarios.commit import latency as commit_latency
from zerorename.perf.scenarios.commit.latency import Measure
from zerorename.perf.scenarios.commit.verify import VerificationError, cleanup, verify
from zerorename.units import MiB

NAME = "commit"
HELP = "job commit rate: complete N deferred uploads (zerorename Job.commit vs boto3 threads)"

CLIENTS = ("zerorename", "boto3-15", "boto3-64", "floor")  # floor: commit/floor.py
#: the harness rates these (prepare_s and base_rss_mib describe the setup, not the commit)
RATIO_METRICS = ("completes_s", "commit_s", "cpu_ms_per_complete", "peak_rss_mib")
FLOOR_METRIC = "cpu_ms_per_complete"  # the "x floor" column
_THREADS = {"boto3-15": 15, "boto3-64": 64}
_FUNC = "zerorename.perf.scenarios.commit.scenario:"
_FLOOR = "zerorename.perf.scenarios.commit.floor:measure_floor"
#: the request parameter carrying each checksum algorithm's part checksum (as the engine's)
_CHECKSUM_PARAM = {"CRC32": "ChecksumCRC32", "CRC32C": "ChecksumCRC32C", "SHA256": "ChecksumSHA256"}
#: one part: the engine's smallest part size (5 MiB) bounds a one-part object
_MAX_OBJECT_KIB = 5 * 1024


# --- options and plan ---------------------------------------------------------------------


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"need integers >= 1, got {text!r}")
    return values


def _clients(text: str) -> list[str]:
    names = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in names if c not in CLIENTS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"clients are a comma list of {', '.join(CLIENTS)}")
    return names


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _object_kib(text: str) -> int:
    value = _positive(text)
    if value > _MAX_OBJECT_KIB:
        raise argparse.ArgumentTypeError(f"one-part objects: at most {_MAX_OBJECT_KIB} KiB")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The scenario's options (each has a default, stated in its help)."""
    parser.add_argument(
        "--uploads",
        type=_int_list,
        default="5000",
        help="deferred uploads completed per run; a comma list (1000,5000) measures each "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--pendingsets",
        type=_positive,
        default=50,
        help="task attempts (pendingsets) the uploads are spread over (default: %(default)s)",
    )
    parser.add_argument(
        "--batch-concurrency",
        type=_positive,
        default=64,
        help="zerorename: completes in flight during the job commit (default: %(default)s)",
    )
    parser.add_argument(
        "--object-kib",
        type=_object_kib,
        default=1,
        help="size of each (one-part) object in KiB (default: %(default)s)",
    )
    parser.add_argument(
        "--clients",
        type=_clients,
        default=",".join(CLIENTS),
        help="comma list of clients to measure (default: %(default)s)",
    )
    parser.add_argument(
        "--prepare-concurrency",
        type=_positive,
        default=64,
        help="outputs written at once while preparing, untimed (default: %(default)s)",
    )
    parser.add_argument(
        "--pending-records",
        action="store_true",
        default=False,
        help="tasks also write a .pending record per upload (the committers' default), "
        "which zerorename's job commit then deletes (default: off: preparing is cheaper)",
    )
    parser.add_argument(
        "--latency-ms",
        type=positive_float,
        default=None,
        help="add this latency to every request of the measured phase, sent through the "
        "fault proxy (http targets), and report each run's requests and sequential "
        "requests, the chain's operations in the notes: the round trips of a commit "
        "against a remote store; a small job shows them best (--uploads 12 --pendingsets "
        "12) (default: none: no proxy)",
    )


def plan(args: argparse.Namespace, target: Target) -> list[Run]:
    """One run per client per --uploads value; the clients of one N form one group."""
    runs: list[Run] = []
    latency = commit_latency.plan_params(args.latency_ms, target)
    for n in args.uploads:
        common: dict[str, Any] = {
            "uploads": n,
            "pendingsets": min(args.pendingsets, n),
            "object_kib": args.object_kib,
            "prepare_concurrency": args.prepare_concurrency,
            "pending_records": bool(args.pending_records),
            "target": target.name,
            **latency,
        }
        for client in args.clients:
            if client in ("zerorename", "floor"):  # the floor: as many in flight
                params = {**common, "batch_concurrency": args.batch_concurrency}
                func = _FUNC + "measure_zerorename" if client == "zerorename" else _FLOOR
            else:
                params = {**common, "threads": _THREADS[client]}
                func = _FUNC + "measure_boto3"
            runs.append(Run(client, func, params, group=f"commit N={n}"))
    return runs


# --- preparation (a separate process) -------------------------------------------------------


def _per_task(uploads: int, pendingsets: int) -> list[int]:
    return [uploads // pendingsets + (i < uploads % pendingsets) for i in range(pendingsets)]


async def _prepare(target: Target, params: dict[str, Any], dest: str, out: Path) -> dict[str, Any]:
    """Set up a magic job at ``dest`` whose committed tasks hold ``uploads`` deferred uploads;
    write the task commit summaries (JSON lines) to ``out``."""
    import anyio

    from zerorename.committers import CommitOptions, MagicCommitter, TaskCommitSummary
    from zerorename.engine import UploadEngine

    per_task = _per_task(int(params["uploads"]), int(params["pendingsets"]))
    conc = int(params.get("prepare_concurrency", 64))
    payload = b"x" * (int(params["object_kib"]) * 1024)
    t0 = time.perf_counter()
    cfg = target.engine_config(max_concurrency=conc, batch_concurrency=conc)
    async with UploadEngine(cfg) as engine:
        options = CommitOptions(pending_records=bool(params.get("pending_records", False)))
        job = await MagicCommitter(engine, dest, options=options).setup_job()
        summaries: list[TaskCommitSummary | None] = [None] * len(per_task)
        outputs = anyio.Semaphore(conc)
        tasks = anyio.Semaphore(max(2, conc // 4))  # bounds the records held at once

        async def write(ta: Any, rel: str) -> None:
            async with outputs, ta.open(rel) as f:
                await f.write(payload)

        async def task(t: int) -> None:
            async with tasks:
                ta = job.task_attempt(t, 0)
                await ta.setup()
                async with anyio.create_task_group() as tg:
                    for i in range(per_task[t]):
                        tg.start_soon(write, ta, f"part-{t:05d}-{i:06d}.bin")
                summaries[t] = await ta.commit()

        async with anyio.create_task_group() as tg:
            for t in range(len(per_task)):
                tg.start_soon(task, t)
    done = [s for s in summaries if s is not None]
    if sum(s.uploads for s in done) != sum(per_task):
        raise RuntimeError(f"prepared {sum(s.uploads for s in done)} of {sum(per_task)} uploads")
    text = "".join(s.to_json() + "\n" for s in done)
    await anyio.Path(out).write_text(text, encoding="utf-8")
    return {"job_id": job.job_id, "prepare_s": time.perf_counter() - t0}


def prepare_in_child(
    target: Target,
    params: dict[str, Any],
    dest: str,
    out: Path,
    *,
    timeout: float = 7200.0,
    fork: bool = False,
) -> dict[str, Any]:
    """Run :func:`_prepare` in another process (its memory and CPU are not the measured
    child's); returns ``{"job_id", "prepare_s"}``. By default a fresh ``python -m
    zerorename.perf.scenarios.commit.scenario prepare`` (credentials on stdin, never argv): a boto3
    run's child never imports the engine. With ``fork`` (zerorename's run, whose child
    imports the engine and the committers anyway) a fork of this process prepares, with
    those imports already made (a fresh interpreter would spend ~1.4 s of CPU on them)."""
    if fork:
        return _prepare_forked(target, params, dest, out, timeout)
    payload = {"target": target.to_json(), "params": params, "dest": dest, "out": str(out)}
    try:
        result: dict[str, Any] = run_json_module(
            "zerorename.perf.scenarios.commit.scenario", payload, timeout, "prepare"
        )
    except ChildFailed as exc:
        raise PrepareFailed(f"preparing {dest} {exc}") from None
    return result


def _prepare_forked(
    target: Target, params: dict[str, Any], dest: str, out: Path, timeout: float
) -> dict[str, Any]:
    """:func:`_prepare` in a fork of this single-threaded process (called before the run
    starts any thread or event loop); its result, or its error in one line, comes back
    through a pipe. The fork's memory is its own: this process's peak RSS never sees it."""
    import zerorename.committers.committer  # noqa: F401  (loaded once, here, before the fork)
    from zerorename.portal import run

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the fork: prepare, answer, leave without running this process's exit
        code, answer = 1, "{}"
        try:
            os.close(read_fd)
            answer = json.dumps(run(_prepare(target, params, dest, out)))
            code = 0
        except BaseException as exc:
            answer = json.dumps({"error": f"{type(exc).__name__}: {' '.join(str(exc).split())}"})
        finally:
            try:
                os.write(write_fd, answer.encode())
            finally:
                os._exit(code)
    os.close(write_fd)
    try:
        ready, _, _ = select.select([read_fd], [], [], timeout)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            raise PrepareFailed(f"preparing {dest}: no result within {timeout:.0f} s")
        chunks = []
        while chunk := os.read(read_fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    result: dict[str, Any] = json.loads(b"".join(chunks) or b"{}")
    if "job_id" not in result:
        raise PrepareFailed(f"preparing {dest} failed: {result.get('error', 'no result')}")
    return result


# --- measured functions (each runs in a fresh child) -----------------------------------------


def measure_zerorename(target: Target, params: dict[str, Any]) -> dict[str, float]:
    """The product: ``Job.commit(summaries)`` of the prepared job."""
    return _measure(target, params, "zerorename", _commit_zerorename)


def measure_boto3(target: Target, params: dict[str, Any]) -> dict[str, float]:
    """The baseline: a thread pool of ``params["threads"]`` calling complete_multipart_upload."""
    return _measure(target, params, f"boto3-{int(params['threads'])}", _commit_boto3)


def _measure(target: Target, params: dict[str, Any], label: str, commit: Any) -> dict[str, float]:
    n = int(params["uploads"])
    size = int(params["object_kib"]) * 1024
    # the committers (and the engine behind them) are imported by the runs that use them:
    # a boto3 run's peak RSS and CPU never carry them
    uri, list_prefix = target.destination(NAME, f"{label}-{uuid.uuid4().hex[:12]}")
    try:
        with tempfile.TemporaryDirectory(prefix="zr-commit-") as tmp:
            out = Path(tmp) / "summaries.jsonl"
            prep = prepare_in_child(target, params, uri, out, fork=label == "zerorename")
            summaries = out.read_text(encoding="utf-8").splitlines()
            with commit_latency.measured(target, params) as wire:
                on = wire.target if wire else target
                measure = wire.measure if wire else Meter
                meter, extra = commit(on, params, uri, prep["job_id"], summaries, measure)
                if wire:
                    extra.update(wire.metrics())
                    wire.save_chain(params, label)
        metrics = {
            "completes_s": n / meter.wall,
            "commit_s": meter.wall,
            "cpu_ms_per_complete": meter.cpu * 1000.0 / n,
            "peak_rss_mib": meter.peak_rss / MiB,
            "base_rss_mib": meter.base_rss / MiB,
            "uploads": float(n),
            "prepare_s": float(prep["prepare_s"]),
            **extra,
        }
        verify(
            target.plain_boto3_client(),
            target.bucket,
            list_prefix,
            expected=n,
            size=size,
            job_id=prep["job_id"],
            committed_by_job=label == "zerorename",
        )
        metrics["verified"] = 1.0
    except BaseException:
        if not params.get("keep"):
            try:  # best effort: the run's own error is the one to report
                cleanup(target.plain_boto3_client(), target.bucket, list_prefix)
            except Exception as exc:
                sys.stderr.write(f"cleanup of s3://{target.bucket}/{list_prefix}: {exc}\n")
        raise
    if not params.get("keep"):
        cleanup(target.plain_boto3_client(), target.bucket, list_prefix)
    return metrics


#: what a commit function returns: the meter of the measured phase and extra metrics
Measured = tuple[Meter, dict[str, float]]


def _commit_zerorename(
    target: Target,
    params: dict[str, Any],
    dest: str,
    job_id: str,
    lines: list[str],
    measure: Measure,
) -> Measured:
    """``Job.commit``; also counts its progress reports and their largest gap (a long
    commit that reports nothing looks hung to whoever runs it)."""
    from zerorename.committers import MagicCommitter, TaskCommitSummary
    from zerorename.engine import UploadEngine
    from zerorename.portal import run

    summaries = [TaskCommitSummary.from_json(line) for line in lines]
    n, sets = int(params["uploads"]), int(params["pendingsets"])
    ticks: list[float] = []

    async def go() -> Meter:
        cfg = target.engine_config(batch_concurrency=int(params["batch_concurrency"]))
        async with UploadEngine(cfg) as engine:
            job = await MagicCommitter(engine, dest).open_job(job_id)
            with measure() as meter:
                result = await job.commit(summaries, progress=lambda p: ticks.append(p.elapsed))
        if (result.files, result.pendingsets) != (n, sets):
            raise VerificationError(
                f"job commit reported {result.files} files in {result.pendingsets} "
                f"pendingsets, not {n} in {sets}"
            )
        return meter

    meter = run(go())
    gaps = [b - a for a, b in itertools.pairwise([0.0, *ticks, meter.wall])]
    return meter, {"progress_reports": float(len(ticks)), "max_progress_gap_s": max(gaps)}


def load_uploads(client: Any, summaries: Iterable[str], threads: int) -> list[tuple[str, str, Any]]:
    """Every upload of the prepared pendingsets as (key, upload id, parts for the complete
    request), read with boto3: the in-memory list a thread-pool commit loop works from."""

    def read(line: str) -> list[tuple[str, str, Any]]:
        uri = json.loads(line)["pendingset"]
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        doc = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        out = []
        for c in doc["commits"]:
            param = _CHECKSUM_PARAM.get(c.get("checksumAlgorithm") or "")
            parts = []
            for p in c["parts"]:
                part: dict[str, Any] = {"PartNumber": p["number"], "ETag": p["etag"]}
                if param and p.get("checksum"):
                    part[param] = p["checksum"]
                parts.append(part)
            out.append((c["destinationKey"], c["uploadId"], parts))
        return out

    with ThreadPoolExecutor(threads) as pool:
        return [u for chunk in pool.map(read, list(summaries)) for u in chunk]


def _commit_boto3(
    target: Target,
    params: dict[str, Any],
    dest: str,
    job_id: str,
    lines: list[str],
    measure: Measure,
) -> Measured:
    threads = int(params["threads"])
    client = target.plain_boto3_client(max_pool_connections=threads)
    uploads = load_uploads(client, lines, threads)
    if len(uploads) != int(params["uploads"]):
        raise VerificationError(f"pendingsets hold {len(uploads)} uploads, not {params['uploads']}")
    bucket = target.bucket

    def complete(u: tuple[str, str, Any]) -> None:
        client.complete_multipart_upload(
            Bucket=bucket, Key=u[0], UploadId=u[1], MultipartUpload={"Parts": u[2]}
        )

    with measure() as meter, ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(complete, uploads):
            pass
    return meter, {}


# --- notes and plot --------------------------------------------------------------------------


def _by(samples: Iterable[Sample]) -> dict[tuple[int, str], list[Sample]]:
    out: dict[tuple[int, str], list[Sample]] = {}
    for s in samples:
        out.setdefault((int(s.params["uploads"]), s.client), []).append(s)
    return out


def _order(clients: Iterable[str]) -> list[str]:
    """The clients seen, in CLIENTS order (unknown ones last, sorted)."""
    seen = set(clients)
    return [c for c in CLIENTS if c in seen] + sorted(seen - set(CLIENTS))


def notes(samples: list[Sample], args: argparse.Namespace) -> list[str]:
    """What was verified where, what each client's measured phase covers, and the
    zerorename commit's peak RSS against the product goal."""
    if not samples:
        return []
    targets = sorted({str(s.params.get("target", "?")) for s in samples})
    kib = samples[0].params.get("object_kib", args.object_kib)
    counts = ", ".join(
        f"{c} N={n}: {sum(s.metrics.get('verified') == 1.0 for s in ss)}/{len(ss)}"
        for (n, c), ss in sorted(_by(samples).items())
    )
    lines = [
        f"verified on {', '.join(targets)} (listing after each run, untimed): exactly N "
        f"objects of {kib} KiB, no multipart upload left; zerorename runs also _SUCCESS "
        f"written and the job's records deleted. Runs verified: {counts}",
        "measured: zerorename = Job.commit(summaries): reads the pendingsets, completes "
        "with --batch-concurrency in flight, writes _SUCCESS, deletes the job's records; "
        "boto3-T = ThreadPoolExecutor(T) calling complete_multipart_upload over a list "
        "already in memory. Preparing ran untimed in a separate process.",
    ]
    if any(s.client == "floor" for s in samples):
        from zerorename.perf.floor import COMMIT_NOTE

        lines.append(COMMIT_NOTE)
    for (n, c), ss in sorted(_by(samples).items()):
        if c != "zerorename":
            continue
        peaks = [s.metrics["peak_rss_mib"] for s in ss if "peak_rss_mib" in s.metrics]
        if peaks:
            sets = ss[0].params.get("pendingsets", "?")
            lines.append(
                f"zerorename job commit of {n} uploads in {sets} pendingsets: peak RSS "
                f"{statistics.median(peaks):.0f} MiB median, {max(peaks):.0f} max "
                f"(product goal < 200 MiB)"
            )
    prep = [s.metrics["prepare_s"] for s in samples if "prepare_s" in s.metrics]
    if prep:
        lines.append(f"preparing (untimed): {statistics.median(prep):.1f} s median per run")
    return lines + commit_latency.notes(samples, _order)


def _stats(values: Sequence[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def plot(samples: list[Sample], args: argparse.Namespace, path: str) -> None:
    """Completes/s per client (median bars, min-max error bars) at the largest N, and
    completes/s against N when several --uploads values were measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = _by(s for s in samples if "completes_s" in s.metrics)
    if not groups:
        return
    sizes = sorted({n for n, _ in groups})
    clients = _order(c for _, c in groups)
    fig, axes = plt.subplots(
        1, 2 if len(sizes) > 1 else 1, figsize=(11 if len(sizes) > 1 else 6, 4)
    )
    ax0 = axes[0] if len(sizes) > 1 else axes
    top = sizes[-1]
    shown = [c for c in clients if (top, c) in groups]
    meds, lows, highs = [], [], []
    for c in shown:
        med, lo, hi = _stats([s.metrics["completes_s"] for s in groups[(top, c)]])
        meds.append(med)
        lows.append(med - lo)
        highs.append(hi - med)
    ax0.bar(shown, meds, yerr=[lows, highs], capsize=6, color="#4c72b0")
    for x, (m, hi) in enumerate(zip(meds, highs, strict=True)):
        ax0.annotate(
            f"{m:,.0f}",
            (x, m + hi),
            ha="center",
            va="bottom",
            xytext=(0, 3),
            textcoords="offset points",
        )
    ax0.set_ylim(0, max(m + hi for m, hi in zip(meds, highs, strict=True)) * 1.15 or 1)
    ax0.set_ylabel("completes / s (median, min-max)")
    ax0.set_title(f"job commit of {top:,} uploads")
    if len(sizes) > 1:
        ax1 = axes[1]
        for c in clients:
            ns = [n for n in sizes if (n, c) in groups]
            st = [_stats([s.metrics["completes_s"] for s in groups[(n, c)]]) for n in ns]
            ax1.errorbar(
                ns,
                [m for m, _, _ in st],
                yerr=[[m - lo for m, lo, _ in st], [hi - m for m, _, hi in st]],
                marker="o",
                capsize=4,
                label=c,
            )
        ax1.set_xscale("log")
        ax1.set_xticks(sizes, [f"{n:,}" for n in sizes])
        ax1.minorticks_off()
        ax1.set_ylim(bottom=0)
        ax1.set_xlabel("uploads (N)")
        ax1.set_ylabel("completes / s")
        ax1.set_title("completes/s vs N")
        ax1.legend()
    target = ", ".join(sorted({str(s.params.get("target", "")) for s in samples}))
    fig.suptitle(f"zerorename perf commit ({target})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# --- the preparation process -----------------------------------------------------------------


def _main(argv: list[str]) -> int:
    if argv != ["prepare"]:
        sys.stderr.write(
            "usage: python -m zerorename.perf.scenarios.commit.scenario prepare < request.json\n"
            "(used by the commit scenario's measured runs; see `zerorename perf commit`)\n"
        )
        return 2
    from zerorename.portal import run

    req = json.loads(sys.stdin.read())
    target = Target.from_json(req["target"])
    result = run(_prepare(target, req["params"], req["dest"], Path(req["out"])))
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
