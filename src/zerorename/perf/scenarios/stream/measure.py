"""The ``stream`` scenario's measured runs (each in a fresh child of the harness).

``measure_stream``: a micro-batch stream without Spark. Per batch, tasks write their files
as deferred uploads the way the streaming writer's tasks do (``ensure_job``, then a magic
task attempt per task that opens, writes and commits), through an engine straight to the
target (untimed: executors are not the driver); then ``StreamSink.commit`` of the batch is
timed on one engine kept open across batches (the driver-side worker's warm engine and
connections). ``measure_baseline``: the least a commit of the same files must do, the
uploads completed by boto3 in a thread pool of the commit's concurrency plus one PUT of a
small record, on one client and pool kept across batches.

With ``latency_ms`` the timed commits go through the fault proxy with that latency on every
request, and each batch's requests are counted from the proxy's log. A run verifies the
destination (untimed) before it reports anything, then deletes what it wrote.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

from zerorename.perf.model import Target
from zerorename.perf.scenarios.commit import latency as commit_latency
from zerorename.perf.scenarios.commit.latency import Wire
from zerorename.perf.scenarios.commit.verify import cleanup
from zerorename.perf.scenarios.stream.check import (
    BatchFigure,
    Expected,
    check,
    destination_problems,
    figures,
)
from zerorename.servers.requestlog import Request, describe, sequential_requests

NAME = "stream"
#: a task attempt id per (batch, task): unique in the run, as Spark's are
_ATTEMPT_IDS = 100_000


def _listing(client: Any, bucket: str, prefix: str) -> tuple[list[tuple[str, int]], list[str]]:
    """(key, size) of every object and the key of every pending upload under ``prefix``."""
    objects = [
        (o["Key"], int(o["Size"]))
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for o in page.get("Contents", [])
    ]
    uploads = [
        u["Key"]
        for page in client.get_paginator("list_multipart_uploads").paginate(
            Bucket=bucket, Prefix=prefix
        )
        for u in page.get("Uploads", [])
    ]
    return objects, uploads


class _Counter:
    """Per batch: the proxy's requests of the timed commit (nothing without the proxy);
    keeps every batch's chain so the run's most common one goes to the notes."""

    def __init__(self, wire: Wire | None) -> None:
        self.wire = wire
        self.chains: Counter[str] = Counter()
        self.logs: dict[str, list[Request]] = {}

    def start(self) -> None:
        if self.wire is not None:
            self.wire.proxy.reset()

    def figure(self, seconds: float) -> BatchFigure:
        if self.wire is None:
            return BatchFigure(seconds)
        log = self.wire.proxy.log
        line = describe(log)
        self.chains[line] += 1
        self.logs.setdefault(line, log)
        return BatchFigure(seconds, len(log), sequential_requests(log))

    def save(self, params: dict[str, Any], client: str) -> None:
        """The run's most common chain, for the notes (as ``perf commit --latency-ms``)."""
        if self.wire is not None and self.chains:
            self.wire.log = self.logs[self.chains.most_common(1)[0][0]]
            self.wire.save_chain(params, client)


def _run(
    target: Target,
    params: dict[str, Any],
    client: str,
    body: Callable[[Target, Target, _Counter, str, dict[str, Any]], list[BatchFigure]],
) -> dict[str, float]:
    """Common frame: a fresh prefix, the proxy when asked, the batches, the untimed checks
    (``body`` verifies), then the prefix deleted (also when the run fails)."""
    # no committers here: the baseline's child never loads them (nor the engine)
    uri, list_prefix = target.destination(NAME, f"{client}-{uuid.uuid4().hex[:12]}")
    try:
        with ExitStack() as stack:
            wire = stack.enter_context(commit_latency.measured(target, params))
            counter = _Counter(wire)
            timed_on = wire.target if wire is not None else target
            batches = body(target, timed_on, counter, uri, params)
            counter.save(params, client)
        metrics = figures(batches[int(params["warmup"]) :])
        metrics["files"] = float(params["files"])
        metrics["verified"] = 1.0
    finally:
        if not params.get("keep"):
            try:  # best effort on failure: the run's own error is the one to report
                cleanup(target.plain_boto3_client(), target.bucket, list_prefix)
            except Exception as exc:
                sys.stderr.write(f"cleanup of {uri}/: {exc}\n")
    return metrics


def _total_batches(params: dict[str, Any]) -> int:
    return int(params["warmup"]) + int(params["batches"])


def _tasks(files: int, per_task: int) -> list[int]:
    """Files of each task of a batch: ``per_task`` each, the last one the rest."""
    return [min(per_task, files - i) for i in range(0, files, per_task)]


# --- zerorename: the streaming sink --------------------------------------------------------


def measure_stream(target: Target, params: dict[str, Any]) -> dict[str, float]:
    """``StreamSink.commit`` of each batch, timed (see the module docstring)."""
    return _run(target, params, "zerorename", _stream_batches)


def _stream_batches(
    direct: Target, timed_on: Target, counter: _Counter, dest: str, params: dict[str, Any]
) -> list[BatchFigure]:
    from zerorename.portal import run

    figs, want = run(stream_batches(direct, timed_on, counter, dest, params))
    inject(direct, dest, params.get("inject"))
    verify_stream(direct, dest, want)
    return figs


async def stream_batches(
    direct: Target, timed_on: Target, counter: _Counter, dest: str, params: dict[str, Any]
) -> tuple[list[BatchFigure], Expected]:
    """The batches: tasks write (untimed), ``StreamSink.commit`` timed; returns the figures
    and what the destination must hold."""
    import anyio

    from zerorename.committers import MagicCommitter
    from zerorename.engine import UploadEngine
    from zerorename.spark_adapter.options import WriteOptions
    from zerorename.spark_adapter.stream.log import stream_job_id
    from zerorename.spark_adapter.stream.sink import STREAM_COMMIT, StreamSink

    files, size = int(params["files"]), int(params["file_size"])
    per_task = _tasks(files, int(params["files_per_task"]))
    payload = b"z" * size
    query = str(uuid.uuid4())
    opts = WriteOptions(path=dest)
    # the driver's engine settings (WriteOptions.engine_config), on this target
    cfg = {"max_concurrency": opts.concurrency, "max_pool_connections": opts.pool_size}
    figs: list[BatchFigure] = []
    jobs: list[str] = []
    async with (
        UploadEngine(direct.engine_config(**cfg)) as task_engine,
        UploadEngine(timed_on.engine_config(**cfg)) as driver_engine,
    ):
        tasks_side = MagicCommitter(task_engine, dest, conflict="append", options=STREAM_COMMIT)
        driver = MagicCommitter(driver_engine, dest, conflict="append", options=STREAM_COMMIT)
        sink = StreamSink(opts, query, driver)
        for b in range(_total_batches(params)):
            job_id = stream_job_id(query, uuid.uuid4().hex, b)
            results: list[Any] = []
            async with anyio.create_task_group() as tg:
                for t, n in enumerate(per_task):
                    tg.start_soon(_task, tasks_side, job_id, query, b, t, n, payload, results)
            accepted = sorted(results, key=lambda r: r.partition)
            counter.start()
            t0 = time.perf_counter()
            out = await sink.commit(b, job_id, accepted)
            seconds = time.perf_counter() - t0
            figs.append(counter.figure(seconds))
            if (out.action, out.files) != ("committed", files):
                raise RuntimeError(
                    f"batch {b}: the sink says {out.action} with {out.files} files, "
                    f"not committed with {files}"
                )
            jobs.append(job_id)
    return figs, Expected(query, tuple(jobs), files, size)


async def _task(
    committer: Any,
    job_id: str,
    query: str,
    batch: int,
    t: int,
    n: int,
    payload: bytes,
    results: list[Any],
) -> None:
    """Task ``t`` of ``batch``: what the stream writer's task does (the batch's job set up
    unless another task did, a magic task attempt, ``n`` deferred uploads, its commit)."""
    from zerorename.committers.paths import output_name
    from zerorename.spark_adapter.stream.sink import ensure_job
    from zerorename.spark_adapter.write import TaskResult, task_id_for

    tid = batch * _ATTEMPT_IDS + t
    await ensure_job(committer, job_id, query, batch)
    ta = committer.job(job_id).task_attempt(task_id_for(t, tid), 0)
    await ta.setup()
    for i in range(n):
        async with ta.open(output_name(t, job_id, ".bin", file_index=i)) as out:
            await out.write(payload)
    s = await ta.commit()
    results.append(TaskResult(t, 0, tid, n, n, n * len(payload), s.to_json()))


def verify_stream(target: Target, dest: str, want: Expected) -> None:
    """Raise StreamVerificationError unless ``dest`` holds exactly the committed batches'
    files, no record and no pending upload, and the query's log (read as the sink reads
    it) records exactly those batches."""
    from zerorename.committers import MagicCommitter
    from zerorename.committers.paths import Destination
    from zerorename.engine import UploadEngine
    from zerorename.portal import run
    from zerorename.spark_adapter.options import WriteOptions
    from zerorename.spark_adapter.stream.sink import STREAM_COMMIT, StreamSink

    async def read_log() -> Any:
        async with UploadEngine(target.engine_config()) as engine:
            committer = MagicCommitter(engine, dest, conflict="append", options=STREAM_COMMIT)
            return await StreamSink(WriteOptions(path=dest), want.query_id, committer).read_log()

    log = run(read_log())
    d = Destination.parse(dest)
    objects, uploads = _listing(target.plain_boto3_client(), d.bucket, d.list_prefix)
    check(destination_problems(d.list_prefix, objects, uploads, log, want), d.uri)


def inject(target: Target, dest: str, fault: str | None) -> None:
    """Tests only (``params["inject"]``): make the destination wrong before the check, so a
    test sees the run refuse its figures: ``upload`` leaves a pending upload, ``missing``
    deletes a committed file."""
    if fault is None:
        return
    from zerorename.committers.paths import Destination

    d = Destination.parse(dest)
    client = target.plain_boto3_client()
    if fault == "upload":
        client.create_multipart_upload(Bucket=d.bucket, Key=f"{d.list_prefix}leftover.bin")
    elif fault == "missing":
        objects, _ = _listing(client, d.bucket, d.list_prefix)
        key = next(k for k, _ in objects if k.endswith(".bin"))
        client.delete_object(Bucket=d.bucket, Key=key)
    else:
        raise ValueError(f"unknown fault to inject: {fault!r}")


# --- the baseline: boto3 completes + one PUT -----------------------------------------------


def measure_baseline(target: Target, params: dict[str, Any]) -> dict[str, float]:
    """The uploads completed by a boto3 thread pool, then one small PUT, timed per batch."""
    return _run(target, params, "baseline", _baseline_batches)


def _baseline_batches(
    direct: Target, timed_on: Target, counter: _Counter, dest: str, params: dict[str, Any]
) -> list[BatchFigure]:
    # dest is _run's: s3://<bucket>/<key> of target.destination
    bucket, list_prefix = direct.bucket, dest.removeprefix(f"s3://{direct.bucket}/") + "/"
    files, size = int(params["files"]), int(params["file_size"])
    threads = int(params["concurrency"])
    payload = b"z" * size
    prep = direct.plain_boto3_client(max_pool_connections=16)
    timed = timed_on.plain_boto3_client(max_pool_connections=threads)
    record = f"{list_prefix}_baseline/log.json"
    figs: list[BatchFigure] = []

    def start(key: str) -> tuple[str, str, str]:
        uid = prep.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        etag = prep.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=1, Body=payload)[
            "ETag"
        ]
        return key, uid, etag

    def complete(up: tuple[str, str, str]) -> None:
        key, uid, etag = up
        timed.complete_multipart_upload(
            Bucket=bucket,
            Key=key,
            UploadId=uid,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
        )

    total = _total_batches(params)
    with ThreadPoolExecutor(16) as prep_pool, ThreadPoolExecutor(threads) as pool:
        for b in range(total):
            keys = [f"{list_prefix}b{b:06d}-part-{i:05d}.bin" for i in range(files)]
            ups = list(prep_pool.map(start, keys))
            counter.start()
            t0 = time.perf_counter()
            list(pool.map(complete, ups))
            body = json.dumps({"batch": b, "files": files}).encode()
            timed.put_object(Bucket=bucket, Key=record, Body=body)
            figs.append(counter.figure(time.perf_counter() - t0))
    objects, uploads = _listing(direct.plain_boto3_client(), bucket, list_prefix)
    data = [s for k, s in objects if k != record]
    problems = []
    if len(data) != total * files or any(s != size for s in data):
        problems.append(f"{len(data)} objects, expected {total * files} of {size} bytes")
    if uploads:
        problems.append(f"{len(uploads)} multipart uploads left")
    check(problems, dest)
    return figs
