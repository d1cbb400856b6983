"""The blocking facade from worker threads; no threads or tasks leak across many jobs;
progress is reported at least once a second during a long job commit."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from committer_helpers import (
    committer,
    data_objects,
    dest_prefix,
    dest_uri,
    engine_for,
    uploads,
    write,
)

from zerorename.committers import CommitOptions, CommitProgress
from zerorename.committers.sync import SyncCommitter
from zerorename.engine import UploadEngine
from zerorename.servers.faultrules import FaultRule
from zerorename.servers.targets import S3Target
from zerorename.servers.wsgiserver import CONNECTION_THREAD_PREFIX

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)


def run_sync_job(s3: S3Target, kind: str, tmp: Path, tasks: int = 3) -> tuple[str, dict]:  # type: ignore[type-arg]
    expected = {}
    with SyncCommitter(
        kind, dest_uri(s3, kind), s3.engine_config(), options=CommitOptions(staging_dir=tmp)
    ) as c:
        job = c.setup_job()

        def task(t: int):  # type: ignore[no-untyped-def]
            ta = job.task_attempt(t)
            ta.setup()
            with ta.open(f"t={t}/data ü.csv") as f:
                for i in range(100):
                    f.write(b"row %d,%d\n" % (t, i))
            return ta.commit()

        with ThreadPoolExecutor(max_workers=tasks) as pool:
            summaries = list(pool.map(task, range(tasks)))
        for t in range(tasks):
            expected[f"t={t}/data ü-{job.job_id}.csv"] = b"".join(
                b"row %d,%d\n" % (t, i) for i in range(100)
            )
        res = job.commit(summaries)
        assert res.files == tasks and res.bytes == sum(map(len, expected.values()))
        assert sum(s.bytes for s in summaries) == res.bytes
    return job.job_id, expected


@MOTO
def test_sync_facade_from_worker_threads(s3: S3Target, tmp_path: Path) -> None:
    for kind in ("magic", "staging"):
        _, expected = run_sync_job(s3, kind, tmp_path)
        assert data_objects(s3, dest_prefix(s3, kind)) == expected
        assert uploads(s3, dest_prefix(s3, kind)) == []


def _our_threads() -> int:
    """Threads of this process, without the in-process moto server's request threads
    (one per connection: they come and go with the clients' connections)."""
    return sum(not t.name.startswith(CONNECTION_THREAD_PREFIX) for t in threading.enumerate())


def _settled_threads(limit: int, timeout: float = 5.0) -> int:
    """The thread count once threads that are already exiting are gone (a leak stays)."""
    deadline = time.monotonic() + timeout
    while (n := _our_threads()) > limit and time.monotonic() < deadline:
        time.sleep(0.05)
    return n


@MOTO
def test_no_thread_leak_over_many_jobs(s3: S3Target, tmp_path: Path) -> None:
    run_sync_job(s3, "magic", tmp_path, tasks=2)  # warm up lazily created threads
    before = _settled_threads(0, timeout=1.0)
    for _ in range(5):
        run_sync_job(s3, "magic", tmp_path, tasks=2)
    assert _settled_threads(before) <= before


@MOTO
async def test_no_task_leak_and_bytes_reported(s3: S3Target) -> None:
    async with engine_for(s3) as eng:
        baseline = len(asyncio.all_tasks())
        for _ in range(4):
            job = await committer("magic", eng, dest_uri(s3)).setup_job()
            ta = job.task_attempt(0)
            await ta.setup()
            await write(ta, "f.bin", b"12345")
            s = await ta.commit()
            assert s.bytes == 5  # deferred uploads still report their bytes (HADOOP-17414)
            await job.commit([s])
        assert len(asyncio.all_tasks()) == baseline


@MOTO
async def test_progress_at_least_once_a_second(
    s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    """Completes answer 50 ms late (the proxy's latency rule), two at a time, so 40 completes
    take at least 1 s: a report after every 40 completes or fewer is a report at least once a
    second, counted in requests rather than read off a clock (so a loaded machine, which only
    makes the completes slower, cannot fail it). The 120 completes take 3 s or more: long
    enough for the ticker (every 0.5 s) to report six times, and three times the 40 that a
    commit reporting only at its end (or a ticker slower than a second) would exceed."""
    assert s3.endpoint_url is not None
    proxy = fault_proxy(s3.endpoint_url)
    proxy.add_rule(FaultRule(operation="CompleteMultipartUpload", fault="latency", delay=0.05))
    async with UploadEngine(s3.with_endpoint(proxy.url).engine_config(batch_concurrency=2)) as eng:
        c = committer("magic", eng, dest_uri(s3), pending_records=False, concurrency=2)
        job = await c.setup_job()
        sums = []
        for t in range(4):
            ta = job.task_attempt(t)
            await ta.setup()
            for f in range(30):
                await write(ta, f"t{t}/{f}.bin", b"p")
            sums.append(await ta.commit())
        seen: list[CommitProgress] = []

        async def progress(p: CommitProgress) -> None:  # async callbacks are awaited
            seen.append(p)

        await job.commit(sums, progress=progress)
    assert proxy.stats.faults("CompleteMultipartUpload", "latency") == 120
    done = [p.uploads_done for p in seen]
    assert done == sorted(done) and done[0] == 0, done
    assert done[-1] == 120 and seen[-1].uploads_total == 120
    steps = [b - a for a, b in itertools.pairwise(done)]
    assert max(steps) <= 40, f"a report missed a second's worth of completes: {done}"
