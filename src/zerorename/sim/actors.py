"""The batch actors: a zerorename job of one committer and conflict mode (its tasks, then
its job commit, as a Spark driver runs them), and a Hadoop S3A magic job (its layout and
order: uploads, pendingsets, completes, ``_SUCCESS``, then its directory deleted).

Each actor writes down what it was told in the world's history; a crash (the process
dies) leaves the job for an operator, as a driver that died does."""

from __future__ import annotations

import time
from typing import Any

from zerorename.committers import (
    CommitOptions,
    JobCommitError,
    MagicCommitter,
    PartitionedCommitter,
    StagingCommitter,
)
from zerorename.committers.codec.success import SuccessData
from zerorename.committers.paths import Destination
from zerorename.committers.s3a.layout import S3AJobLayout
from zerorename.sim.model import BUCKET, DEST, ActorSpec, JobTold, Outcome
from zerorename.sim.world import URI, DeadJob, World, crashed, new_uuid, one_line
from zerorename.testing.s3acrash import TASK, s3a_commit, s3a_pendingset

KINDS: dict[str, Any] = {
    "magic": MagicCommitter,
    "staging": StagingCommitter,
    "partitioned": PartitionedCommitter,
}


def data_keys_now(w: World, prefix: str) -> frozenset[str]:
    """The data objects under ``prefix`` right now (the checker's view, not the code's)."""
    return frozenset(
        k
        for k in w.state.objects(BUCKET, prefix)
        if "__magic" not in k and not k.endswith("/_SUCCESS")
    )


def tell(w: World, told: JobTold, outcome: Outcome, detail: str = "") -> None:
    told.told.append((w.step, outcome, detail))


async def job_actor(w: World, i: int, spec: ActorSpec) -> None:
    """A zerorename batch job: set up, tasks write and commit, job commit; on a failure,
    Spark's abortJob; on a crash, nothing (the job is left for an operator)."""
    await w.sched.pause(i, "start", not_before=spec.delay)
    job_id = new_uuid(w.rng(i, "job"))
    store = w.store(i)
    # lock_wait=0: a commit that finds the destination locked refuses at once (a wait would
    # run on the wall clock, which the seeded scheduler does not drive)
    opts = CommitOptions(staging_dir=w.tmp / f"actor{i}", progress_interval=60.0, lock_wait=0.0)
    committer = KINDS[spec.committer](store, URI, conflict=spec.conflict, options=opts)
    told = JobTold(job_id, i, spec.committer, spec.conflict, {})
    w.history.jobs[job_id] = told
    job: Any = None
    try:
        job = await committer.setup_job(job_id)
        summaries = []
        for t in range(spec.tasks):
            ta = job.task_attempt(t)
            await ta.setup()
            rel = f"p={t % 2}/part-{t}.csv"
            data = f"{job_id} task {t}\n".encode()
            async with ta.open(rel) as out:
                await out.write(data)
            summaries.append(await ta.commit())
            told.files[f"{DEST}/{ta.final_rel(rel)}"] = data  # the task committed
        told.commit_start = w.step
        told.seen_at_start = data_keys_now(w, f"{DEST}/")
        await job.commit(summaries)
        told.commit_end = w.step
        tell(w, told, Outcome.COMMITTED)
    except BaseException as exc:
        if crashed(exc):
            tell(w, told, Outcome.CRASHED, one_line(exc))
            w.dead.append(DeadJob(job_id, URI, stream=False))
            return
        if not isinstance(exc, Exception):
            raise
        told.commit_end = w.step
        if isinstance(exc, JobCommitError) and exc.rolled_back:
            tell(w, told, Outcome.FAILED, one_line(exc))
            return
        tell(w, told, Outcome.LEFT, one_line(exc))
        if job is not None:  # Spark's abortJob after a failed job
            try:
                await job.abort()
                tell(w, told, Outcome.ABORTED, "abortJob")
            except BaseException as again:
                if crashed(again):
                    w.dead.append(DeadJob(job_id, URI, stream=False))
                    tell(w, told, Outcome.CRASHED, one_line(again))
                elif not isinstance(again, Exception):
                    raise
                else:
                    tell(w, told, Outcome.REFUSED, "abortJob: " + one_line(again))


async def s3a_actor(w: World, i: int, spec: ActorSpec) -> None:
    """A Hadoop S3A magic job in S3A's layout and order. Its commit point is its
    ``_SUCCESS`` (S3A's only sign of a committed job); a crash in the cleanup after it
    leaves ``__magic_job-<id>/`` behind a committed job."""
    await w.sched.pause(i, "start", not_before=spec.delay)
    job_id = new_uuid(w.rng(i, "s3a"))
    store = w.store(i)
    dest = Destination.parse(URI)
    layout = S3AJobLayout(dest, job_id)
    told = JobTold(job_id, i, "s3a", "append", {})
    w.history.jobs[job_id] = told
    now = int(time.time() * 1000)
    tried: dict[str, tuple[str, bytes]] = {}  # pendingset key -> the task's file
    try:
        await store.put_object(BUCKET, layout.attempt_dir(0), b"")
        uploads = []
        for t in range(spec.tasks):
            rel = f"part-{t:05d}-{job_id}-c000.csv"
            data = f"{job_id} s3a task {t}\n".encode()
            p = await store.upload(BUCKET, dest.key(rel), data, defer=True)
            uploads.append(p)
            body = s3a_pendingset(job_id, [s3a_commit(p, job_id, f"attempt_{t}", now)])
            tried[layout.pendingset(0, TASK.format(t))] = (dest.key(rel), data)
            await store.put_object(BUCKET, layout.pendingset(0, TASK.format(t)), body)
            told.files[dest.key(rel)] = data  # the task committed
        told.commit_start = w.step
        for p in uploads:
            await store.complete(p)
        success = SuccessData(
            job_id=job_id,
            committer="magic",
            description="S3A magic committer (simulated)",
            job_id_source="spark.sql.sources.writeJobUUID",
            filenames=["/" + p.key for p in uploads],
        )
        await store.put_object(BUCKET, layout.success, success.to_json())
        told.commit_end = w.step
        tell(w, told, Outcome.COMMITTED, "_SUCCESS written")
        keys = [o.key async for o in store.list_objects(BUCKET, layout.root)]
        await store.delete_objects(BUCKET, keys)
    except BaseException as exc:
        # a task committed when its pendingset was stored, answered or not (the store's
        # state says so: the simulation's view, not the code's)
        stored = w.state.objects(BUCKET, layout.root)
        for key, (file_key, data) in tried.items():
            if key in stored:
                told.files[file_key] = data
        if crashed(exc):
            tell(w, told, Outcome.CRASHED, one_line(exc))
            w.dead.append(DeadJob(job_id, URI, stream=False))
            return
        if not isinstance(exc, Exception):
            raise
        tell(w, told, Outcome.LEFT, one_line(exc))
        w.dead.append(DeadJob(job_id, URI, stream=False))  # S3A leaves it to an operator
