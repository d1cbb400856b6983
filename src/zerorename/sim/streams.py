"""The stream actor: a query whose driver runs its micro-batches through the real
StreamSink (tasks, then the sink's batch commit); when the driver dies or a commit fails
(Spark then calls the sink's abort) the query is restarted by a new driver, which runs
the batch again under a new token, as Spark re-runs a batch the checkpoint has not
recorded. Every run of a batch writes the same data."""

from __future__ import annotations

import dataclasses

from zerorename.committers import MagicCommitter
from zerorename.errors import ZeroRenameError
from zerorename.sim.model import ActorSpec, Kind, StreamTold
from zerorename.sim.world import (
    STREAM_URI,
    DeadJob,
    World,
    crashed,
    new_uuid,
    one_line,
)
from zerorename.spark_adapter.options import WriteOptions
from zerorename.spark_adapter.stream.log import stream_job_id
from zerorename.spark_adapter.stream.sink import STREAM_COMMIT, StreamSink, ensure_job
from zerorename.spark_adapter.write import TaskResult, task_id_for
from zerorename.testing.memstore import MemoryStore

#: restarts of a query after a crash or a failed commit before its driver gives up
RESTARTS = 4

#: the sink's options with lock_wait=0 (see actors.job_actor: no wall-clock waits)
SIM_STREAM_COMMIT = dataclasses.replace(STREAM_COMMIT, lock_wait=0.0)


def batch_data(query: str, batch: int, task: int) -> bytes:
    return f"{query} batch {batch} task {task}\n".encode()


def sink_of(store: MemoryStore, query: str) -> StreamSink:
    committer = MagicCommitter(store, STREAM_URI, conflict="append", options=SIM_STREAM_COMMIT)
    return StreamSink(WriteOptions(path=STREAM_URI), query, committer)


async def run_tasks(
    store: MemoryStore, query: str, batch: int, token: str, tasks: int
) -> tuple[str, list[TaskResult]]:
    """One run of ``batch``'s tasks, each writing one file and committing."""
    committer = MagicCommitter(store, STREAM_URI, conflict="append", options=SIM_STREAM_COMMIT)
    job_id = stream_job_id(query, token, batch)
    results = []
    for t in range(tasks):
        await ensure_job(committer, job_id, query, batch)
        ta = committer.job(job_id).task_attempt(task_id_for(t, t * 10), 0)
        await ta.setup()
        data = batch_data(query, batch, t)
        async with ta.open(f"part-{t:05d}.csv") as out:
            await out.write(data)
        s = await ta.commit()
        results.append(TaskResult(t, 0, t * 10, 1, 1, len(data), s.to_json()))
    return job_id, results


async def stream_actor(w: World, i: int, spec: ActorSpec, *, final: bool = False) -> None:
    """Run the query's batches, restarting its driver after a crash or a failure."""
    if not final:
        await w.sched.pause(i, "start", not_before=spec.delay)
    query = new_uuid(w.rng(i, "query"))
    told = w.history.streams.setdefault(query, StreamTold(query, i))
    for t in range(spec.tasks):
        for b in range(spec.batches):
            told.batches.setdefault(b, [])
            if len(told.batches[b]) <= t:
                told.batches[b].append(batch_data(query, b, t))
    runs = told.runs
    while told.done < spec.batches and told.runs < runs + RESTARTS:
        told.runs += 1
        store = MemoryStore(w.state, min_part_size=1) if final else w.store(i)
        token = f"run{told.runs}" + ("-final" if final else "")
        job_id = ""
        batch = told.done
        try:
            for batch in range(told.done, spec.batches):
                job_id, results = await run_tasks(store, query, batch, token, spec.tasks)
                out = await sink_of(store, query).commit(batch, job_id, results)
                told.outcomes.append((w.step, batch, out.action))
                told.done = batch + 1
        except BaseException as exc:
            if crashed(exc):
                told.outcomes.append((w.step, batch, "crashed: " + one_line(exc)))
                if job_id:
                    w.dead.append(DeadJob(job_id, STREAM_URI, stream=True))
                continue
            if not isinstance(exc, Exception):
                raise
            told.outcomes.append((w.step, batch, "failed: " + one_line(exc)))
            if job_id:  # Spark aborts the batch's write, then the query stops
                try:
                    await sink_of(store, query).abort(batch, job_id)
                except Exception as again:
                    told.outcomes.append((w.step, batch, "abort failed: " + one_line(again)))
                except BaseException as again:
                    if not crashed(again):
                        raise


def straggler_data(query: str, batch: int) -> bytes:
    """What a straggler writes: never part of any batch (the checker would see it)."""
    return f"{query} batch {batch} STRAGGLER\n".encode()


async def straggler_actor(w: World, i: int, spec: ActorSpec) -> None:
    """A copy of task 0 of a stream query's batch that Spark did not accept (speculation),
    running at any point beside that query's first run: it sets the batch's job up (or
    finds it), writes the same file as the accepted task with other bytes, and commits its
    attempt. Nothing of it may become visible or be left behind."""
    streams = [j for j, a in enumerate(w.schedule_actors) if a.kind is Kind.STREAM]
    if not streams:
        return
    j = streams[w.rng(i, "target").randrange(len(streams))]
    target = w.schedule_actors[j]
    batch = w.rng(i, "batch").randrange(target.batches)
    await w.sched.pause(i, "start", not_before=spec.delay)
    query = new_uuid(w.rng(j, "query"))
    told = w.history.streams.get(query)
    if told is None or told.runs != 1:
        # not started, or its first run died: a copy lives only as long as its driver
        # (Spark's executors go with the application), so it never runs
        w.history.notes.append(f"straggler {i}: no live first run of query {query}")
        return
    store = w.store(i)
    committer = MagicCommitter(store, STREAM_URI, conflict="append", options=SIM_STREAM_COMMIT)
    job_id = stream_job_id(query, "run1", batch)
    try:
        await ensure_job(committer, job_id, query, batch)
        ta = committer.job(job_id).task_attempt(task_id_for(0, 999), 1)
        await ta.setup()
        async with ta.open("part-00000.csv") as out:
            await out.write(straggler_data(query, batch))
        await ta.commit()
        w.history.notes.append(f"straggler {i} of {job_id}: committed its attempt (not accepted)")
    except ZeroRenameError as exc:  # refused, or its upload aborted under it: discarded
        w.history.notes.append(f"straggler {i} of {job_id}: {one_line(exc)}")
