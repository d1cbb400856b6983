"""Concurrent commits on one destination on real servers (moto and Ceph RGW; issue 20,
findings 4 and 5): the stores refuse a second If-None-Match create of the commit lock;
a replace racing an append (slowed by the fault proxy's latency) removes all of the
append's files or none; two fail-mode commits racing to an empty destination, one wins;
a dead holder's lock released by ``zerorename jobs abort``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from committer_helpers import data_objects, objects, uploads

from zerorename.cli.jobs import main
from zerorename.committers import (
    CommitOptions,
    ConflictError,
    JobCommitError,
    MagicCommitter,
)
from zerorename.committers.commit.lock import DestinationLocked
from zerorename.engine import UploadEngine
from zerorename.engine.config import RetryConfig
from zerorename.engine.errors import PreconditionFailed
from zerorename.servers.faultproxy import FaultProxy, FaultRule
from zerorename.servers.targets import S3Target

ProxyFactory = Callable[..., FaultProxy]


def uri_of(s3: S3Target, name: str) -> str:
    return f"s3://{s3.bucket}/{s3.prefix}{name}"


def committer(engine: Any, uri: str, tmp: Path, conflict: str = "append", **kw: Any) -> Any:
    opts = CommitOptions(staging_dir=tmp, progress_interval=0.05, **kw)
    return MagicCommitter(engine, uri, conflict=conflict, options=opts)


async def ready(engine: Any, uri: str, tmp: Path, conflict: str, tag: str, n: int) -> Any:
    """A job of ``n`` committed tasks (one file each): (job id, summaries)."""
    job = await committer(engine, uri, tmp, conflict).setup_job()
    sums = []
    for t in range(n):
        ta = job.task_attempt(t)
        await ta.setup()
        async with ta.open(f"{tag}-{t}.csv") as out:
            await out.write(f"{tag} {t}".encode())
        sums.append(await ta.commit())
    return job.job_id, sums


async def test_the_store_refuses_a_second_if_none_match_create(s3: S3Target) -> None:
    """What the lock rests on, checked on each server."""
    key = f"{s3.prefix}lock-check/__magic_commit/lock.json"
    async with UploadEngine(s3.engine_config()) as engine:
        await engine.put_object(s3.bucket, key, b"first", if_none_match=True)
        with pytest.raises(PreconditionFailed):
            await engine.put_object(s3.bucket, key, b"second", if_none_match=True)
        assert await engine.get_object(s3.bucket, key) == b"first"


async def test_a_replace_racing_an_append_removes_all_of_it_or_none(
    s3: S3Target, fault_proxy: ProxyFactory, tmp_path: Path
) -> None:
    uri = uri_of(s3, "race4")
    prefix = f"{s3.prefix}race4/"
    proxy = fault_proxy(str(s3.endpoint_url))
    async with (
        UploadEngine(s3.engine_config()) as fast,
        UploadEngine(s3.with_endpoint(proxy.url).engine_config()) as slow,
    ):
        await fast.put_object(s3.bucket, f"{prefix}old.csv", b"old")
        b_id, b_sums = await ready(fast, uri, tmp_path, "append", "b", 5)
        a_id, a_sums = await ready(fast, uri, tmp_path, "replace", "a", 2)
        proxy.add_rule(FaultRule("CompleteMultipartUpload", fault="latency", delay=0.3))
        b_job = await committer(slow, uri, tmp_path, concurrency=1).open_job(b_id)
        a_job = await committer(fast, uri, tmp_path, "replace").open_job(a_id)

        async def b_files() -> int:
            return sum(
                [
                    o.key.endswith(".csv") and b_id in o.key
                    async for o in fast.list_objects(s3.bucket, prefix)
                ]
            )

        async def run_a() -> None:
            while True:  # until B has completed a file, not all of them
                if await b_files():
                    break
                await anyio.sleep(0.02)
            await a_job.commit(a_sums)

        async with anyio.create_task_group() as tg:
            tg.start_soon(b_job.commit, b_sums)
            tg.start_soon(run_a)
    data = data_objects(s3, prefix)
    left = [k for k in data if b_id in k]
    assert left == [], f"{len(left)} of B's 5 files survived the replace ordered after it"
    assert sorted(data) == sorted(k for k in data if a_id in k) and len(data) == 2
    assert not [k for k in objects(s3, prefix) if "__magic_commit" in k]


async def test_two_fail_mode_commits_racing_to_an_empty_destination_one_wins(
    s3: S3Target, fault_proxy: ProxyFactory, tmp_path: Path
) -> None:
    uri = uri_of(s3, "race5")
    prefix = f"{s3.prefix}race5/"
    proxy = fault_proxy(str(s3.endpoint_url))
    async with UploadEngine(s3.with_endpoint(proxy.url).engine_config()) as engine:
        jobs = [await ready(engine, uri, tmp_path, "fail", t, 2) for t in ("one", "two")]
        proxy.add_rule(FaultRule(fault="latency", delay=0.05))
        outcome: dict[str, BaseException | None] = {}

        async def run(job_id: str, sums: Any) -> None:
            job = await committer(engine, uri, tmp_path, "fail").open_job(job_id)
            try:
                await job.commit(sums)
                outcome[job_id] = None
            except ConflictError as exc:
                outcome[job_id] = exc

        async with anyio.create_task_group() as tg:
            for job_id, sums in jobs:
                tg.start_soon(run, job_id, sums)
    winners = [j for j, e in outcome.items() if e is None]
    assert len(winners) == 1, f"{len(winners)} fail-mode commits succeeded: {outcome}"
    (winner,) = winners
    (loser,) = [j for j, e in outcome.items() if e is not None]
    data = data_objects(s3, prefix)
    assert sorted(data) == sorted(k for k in data if winner in k) and len(data) == 2
    assert not [k for k in objects(s3, prefix) if loser in k or "__magic_commit" in k]
    assert not [k for k in uploads(s3, prefix) if loser in k]


async def test_jobs_abort_releases_a_dead_holders_lock(
    s3: S3Target, fault_proxy: ProxyFactory, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    """Job H's commit stops after a complete (the store fails the rest; no rollback): its
    journal and lock stay. Job K waits, then refuses naming H with nothing changed;
    ``zerorename jobs abort`` of H releases the lock and K commits."""
    uri = uri_of(s3, "dead")
    prefix = f"{s3.prefix}dead/"
    proxy = fault_proxy(str(s3.endpoint_url))
    once = RetryConfig(max_attempts=1, base_delay=0.0, max_delay=0.0, max_elapsed=10)
    async with (
        UploadEngine(s3.engine_config()) as fast,
        UploadEngine(s3.with_endpoint(proxy.url).engine_config(retry=once)) as failing,
    ):
        h_id, h_sums = await ready(fast, uri, tmp_path, "append", "h", 3)
        k_id, k_sums = await ready(fast, uri, tmp_path, "append", "k", 1)
        proxy.add_rule(FaultRule("CompleteMultipartUpload", fault="internal_error", burst=(2, 100)))
        h = await committer(
            failing, uri, tmp_path, concurrency=1, rollback_on_failure=False
        ).open_job(h_id)
        with pytest.raises(JobCommitError) as failed:
            await h.commit(h_sums)
        assert not failed.value.rolled_back
        lock = f"{prefix}__magic_commit/lock.json"
        assert h_id.encode() in objects(s3, prefix)[lock]
        before = objects(s3, prefix)
        k = await committer(fast, uri, tmp_path, lock_wait=0.3, lock_stale_after=0).open_job(k_id)
        with pytest.raises(DestinationLocked) as refused:
            await k.commit(k_sums)
        assert h_id in str(refused.value) and "jobs resume|abort" in str(refused.value)
        assert objects(s3, prefix) == before
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.access_key or "")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key or "")
        monkeypatch.setenv("AWS_DEFAULT_REGION", s3.region)
        argv = ["jobs", "abort", uri, h_id, "--endpoint-url", str(s3.endpoint_url)]
        code = await asyncio.to_thread(main, [*argv, "--addressing-style", "path"])
        assert code == 0, capsys.readouterr().err
        assert lock not in objects(s3, prefix)
        await k.commit(k_sums)
    data = data_objects(s3, prefix)
    assert len(data) == 1 and all(k_id in key for key in data)
    assert lock not in objects(s3, prefix)
