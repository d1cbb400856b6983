"""One schedule, run: its actors interleaved by the scheduler, then the final recovery
(every job left behind is resumed, or aborted when resume refuses; every unfinished query
runs again, with no fault), then the checker."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from zerorename.errors import ZeroRenameError
from zerorename.sim.actors import job_actor, s3a_actor
from zerorename.sim.checker import check
from zerorename.sim.clock import VirtualLoop
from zerorename.sim.model import BUCKET, DEST, ActorSpec, Kind, Outcome, Schedule
from zerorename.sim.operators import (
    TaskStdout,
    foreign_actor,
    kept_keys,
    lifecycle_actor,
    operator_actor,
    run_cli,
    told_by,
    uploads_actor,
)
from zerorename.sim.scheduler import Hung, Scheduler
from zerorename.sim.streams import straggler_actor, stream_actor
from zerorename.sim.world import URI, World, crashed, one_line
from zerorename.testing.memstate import MemoryState
from zerorename.testing.memstore import MemoryStore

#: the destination's commit lock (zerorename.committers.commit.lock.lock_key)
LOCK = f"{DEST}/__magic_commit/lock.json"

Actor = Callable[[World, int, ActorSpec], Awaitable[None]]
ACTORS: dict[Kind, Actor] = {
    Kind.JOB: job_actor,
    Kind.S3A: s3a_actor,
    Kind.STREAM: stream_actor,
    Kind.ABORT: operator_actor,
    Kind.RESUME: operator_actor,
    Kind.CLEANUP: operator_actor,
    Kind.UPLOADS: uploads_actor,
    Kind.LIFECYCLE: lifecycle_actor,
    Kind.FOREIGN: foreign_actor,
    Kind.STRAGGLER: straggler_actor,
}


@dataclass
class RunResult:
    """What one schedule did and what the checker found."""

    schedule: Schedule
    violations: list[str]
    trace: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    picks: tuple[int, ...] = ()
    #: virtual seconds the schedule's waits took (lock polls, tickers)
    clock: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.violations


async def _actor(w: World, i: int, spec: ActorSpec) -> None:
    try:
        await ACTORS[spec.kind](w, i, spec)
    except BaseException as exc:
        if not crashed(exc):
            w.history.errors.append(f"actor {i} ({spec.label()}) raised {one_line(exc)}")
    finally:
        w.sched.live -= 1


def _job_left(w: World, job_id: str) -> bool:
    objs = w.state.objects(BUCKET)
    return any(job_id in k for k in objs if "__magic" in k) or any(
        job_id in k for k, _ in w.state.pending(BUCKET)
    )


def lock_holder(w: World) -> str | None:
    """The job named by the destination's commit lock (None: free, or not a lock record)."""
    data = w.state.objects(BUCKET, LOCK).get(LOCK)
    try:
        holder = json.loads(data)["jobId"] if data is not None else None
    except (ValueError, TypeError, KeyError):
        return None
    return holder if isinstance(holder, str) else None


def holder_first(w: World, job_ids: list[str]) -> list[str]:
    """``job_ids`` with the lock's holder first: an operator whose resume of one job was
    refused because a dead job holds the lock resumes that job first, as the refusal says
    (the CLI's resume would wait out ``lock_wait``, 15 minutes, on the schedule's clock)."""
    holder = lock_holder(w)
    if holder is None or holder not in job_ids:
        return job_ids
    return [holder, *(j for j in job_ids if j != holder)]


#: a command claim a refusal names (zerorename.committers.cmdclaim)
CLAIM_URI = re.compile(rf"s3://{BUCKET}/({DEST}/__magic_commit/command-[^ ;()]+\.json)")


async def as_told(w: World, store: MemoryStore, action: str, job_id: str) -> str:
    """``zerorename jobs <action>`` as the final operator runs it when nothing else is
    left (the abort after a refused resume): refused by the command claims of other
    commands, it does what the refusal says once that process is gone (every actor's
    process is, by now): deletes the claims it names and runs it again."""
    try:
        return await run_cli(store, "jobs", action, URI, job_id)
    except ZeroRenameError as exc:
        named = CLAIM_URI.findall(str(exc)) if "by another command" in str(exc) else []
        if not named:
            raise
        w.history.notes.append(f"final: {action} of {job_id} refused: {one_line(exc)}")
        await store.delete_objects(BUCKET, named)
        w.history.notes.append(f"final: deleted the dead commands' claims {', '.join(named)}")
    return await run_cli(store, "jobs", action, URI, job_id)


async def final_recovery(w: World, schedule: Schedule) -> None:
    """What an operator does at the end: every job with something left is resumed (or
    aborted when resume refuses, unless it was told it committed), the lock's holder
    first; every query that did not finish is run again."""
    todo = list(w.history.jobs)
    while todo:
        todo = holder_first(w, todo)
        job_id = todo.pop(0)
        told = w.history.jobs[job_id]
        last = [o for _, o, _ in told.told]
        settled = Outcome.COMMITTED in last or Outcome.FAILED in last or Outcome.ABORTED in last
        if settled and not _job_left(w, job_id):
            continue
        store = MemoryStore(w.state, min_part_size=1)
        try:
            await run_cli(store, "jobs", "resume", URI, job_id)
            told.told.append((w.step, Outcome.COMMITTED, "final resume"))
            if told.commit_end is None:
                told.commit_end = w.step
            continue
        except ZeroRenameError as exc:
            why = one_line(exc)
        if "no job" in why.lower() and not _job_left(w, job_id):
            continue
        w.history.notes.append(f"final: resume of job {job_id} refused: {why}")
        try:
            printed = await as_told(w, store, "abort", job_id)
            told.told.append((w.step, told_by("abort", printed), "final abort"))
            told.kept |= kept_keys(printed)
        except ZeroRenameError as exc:
            told.told.append((w.step, Outcome.REFUSED, "final abort: " + one_line(exc)))
            w.history.notes.append(f"final: abort of job {job_id} refused: {one_line(exc)}")
    for i, spec in enumerate(schedule.actors):
        if spec.kind is Kind.STREAM:
            await stream_actor(w, i, spec, final=True)


#: CPU seconds a schedule may use before it is reported as a hang: one takes well under a
#: second; waits take none (the clock is virtual: :mod:`zerorename.sim.clock`), so this
#: catches a schedule that spins, on a quiet machine as on a loaded one
LIMIT = 300.0


async def _recovery(w: World, schedule: Schedule) -> None:
    try:
        await final_recovery(w, schedule)
    except Exception as exc:
        w.history.errors.append(f"final recovery raised {one_line(exc)}")
    finally:
        w.sched.live -= 1


async def run_world(w: World, schedule: Schedule) -> None:
    """The actors, interleaved by the scheduler, then the final recovery (its commands'
    waits on the virtual clock too)."""
    async with anyio.create_task_group() as tg:
        for i, spec in enumerate(schedule.actors):
            tg.start_soon(_actor, w, i, spec)
        await w.sched.drive()
    w.sched.live = 1
    async with anyio.create_task_group() as tg:
        tg.start_soon(_recovery, w, schedule)
        await w.sched.drive()


async def run_async(schedule: Schedule, tmp: Path, limit: float = LIMIT) -> RunResult:
    state = MemoryState(BUCKET)
    state.create_bucket(BUCKET)
    sched = Scheduler(schedule.seed, schedule.faults, schedule.picks)
    w = World(
        schedule.seed, state, sched, tmp, avoid=schedule.avoid, schedule_actors=schedule.actors
    )
    sched.live = len(schedule.actors)
    sched.cpu_limit = limit
    sched.cpu_start = time.process_time()
    try:
        await run_world(w, schedule)
    except* Hung:
        pass
    w.history.requests = sched.log
    hang = sched.hang
    violations = hang[:1] + list(w.history.errors)
    if not hang:  # a run cut short leaves what its final recovery did not get to
        violations += check(state.objects(BUCKET), state.pending(BUCKET), w.history)
    notes = w.history.notes + hang[1:]
    return RunResult(schedule, violations, sched.trace, notes, tuple(sched.picked), sched.clock)


#: where a schedule's local files go (staging committers): memory where there is some
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def run_schedule(schedule: Schedule, *, limit: float = LIMIT) -> RunResult:
    """Run ``schedule`` on a fresh in-memory store (its own event loop, on a virtual
    clock); one that cannot end (see :mod:`~zerorename.sim.scheduler`), or still running
    after ``limit`` seconds of CPU, is stopped and reported as a ``hang`` violation."""
    quiet = io.StringIO()
    with (
        tempfile.TemporaryDirectory(prefix="zr-sim-", dir=SCRATCH) as tmp,
        contextlib.redirect_stdout(TaskStdout(quiet)),
        contextlib.redirect_stderr(quiet),
        asyncio.Runner(loop_factory=VirtualLoop) as runner,
    ):
        return runner.run(run_async(schedule, Path(tmp), limit))
