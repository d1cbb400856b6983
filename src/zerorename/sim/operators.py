"""The actors around the jobs: the operator (``zerorename jobs resume|abort`` of a job
whose driver died, ``zerorename uploads abort`` of the destination, run through the very
functions the CLI calls with arguments its parser made), the bucket's lifecycle rule
(aborts pending uploads older than a few requests), and a foreign writer (PUTs and a
multipart upload of keys no job owns)."""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import functools
import io
import sys
from typing import Any

from zerorename.cli import jobs as cli
from zerorename.committers import MagicCommitter
from zerorename.committers.s3a.jobs import NOTHING_ROLLED_BACK, UNRECORDED
from zerorename.sim.model import BUCKET, DEST, SIBLING, ActorSpec, Outcome
from zerorename.sim.world import URI, DeadJob, World, crashed, one_line
from zerorename.spark_adapter.stream.jobs import stream_job_action, stream_job_ids

#: pauses an operator waits for a dead job to appear before it gives up
PATIENCE = 40
#: the lifecycle rule aborts uploads initiated more than this many uploads ago
LIFECYCLE_AGE = 6


@functools.cache
def cli_parser() -> argparse.ArgumentParser:
    """The ``zerorename`` command's own parser (built once: building it costs more than a
    whole schedule's store requests)."""
    parser = argparse.ArgumentParser(prog="zerorename")
    # with the hook the `zerorename` command registers (zerorename.commands): a stream
    # batch's job is resumed or aborted as a user's command does it
    cli.add_subcommands(
        parser.add_subparsers(dest="command"),
        stream_jobs=stream_job_action,
        stream_ids=stream_job_ids,
    )
    return parser


def cli_args(*argv: str) -> argparse.Namespace:
    """``argv`` parsed by the ``zerorename`` command's own parser."""
    return cli_parser().parse_args(list(argv))


_PRINTED: contextvars.ContextVar[io.StringIO | None] = contextvars.ContextVar(
    "zerorename_sim_printed", default=None
)


class TaskStdout(io.TextIOBase):
    """``sys.stdout`` while a schedule runs: what a task prints goes to the buffer its
    command set (actors run at once; swapping ``sys.stdout`` per command would mix them)."""

    def __init__(self, rest: io.StringIO) -> None:
        self.rest = rest

    def write(self, text: str) -> int:
        return (_PRINTED.get() or self.rest).write(text)


async def run_cli(store: Any, *argv: str, out: io.StringIO | None = None) -> str:
    """Run a ``jobs`` or ``uploads`` command on ``store``; what it printed (also in ``out``
    when given: what a command printed before it died was read by its operator)."""
    args = cli_args(*argv)
    out = io.StringIO() if out is None else out
    token = _PRINTED.set(out)
    try:
        with contextlib.ExitStack() as stack:
            if not isinstance(sys.stdout, TaskStdout):  # not in a schedule: nothing at once
                stack.enter_context(contextlib.redirect_stdout(out))
            if args.command == "jobs":
                await cli._jobs_action(store, args)
            else:
                await cli._uploads_abort(store, args)
    finally:
        _PRINTED.reset(token)
    return out.getvalue()


KEPT = "objects this job may have completed: "


def kept_keys(printed: str) -> set[str]:
    """The keys an S3A abort kept and reported as ones the job may have completed (S3A
    keys carry no job id: an identical object may be a re-run's, so it is never deleted)."""
    out: set[str] = set()
    for line in printed.splitlines():
        if line.startswith("kept ") and KEPT in line:
            uris = line.split(KEPT, 1)[1].split(" and ", 1)[0]
            out |= {u.strip().removeprefix(f"s3://{BUCKET}/") for u in uris.split(", ")}
    return out


def told_by(action: str, printed: str) -> Outcome:
    """What a successful ``jobs resume|abort`` told the operator about the job: an abort
    that found nothing to roll back did not abort a job (it may have committed)."""
    if action == "resume":
        return Outcome.COMMITTED
    cleared = NOTHING_ROLLED_BACK in printed or UNRECORDED in printed
    return Outcome.CLEARED if cleared else Outcome.ABORTED


async def job_command(w: World, actor: int, store: Any, action: str, target: DeadJob) -> None:
    """``zerorename jobs <action> <dest> <job>`` (or the API's ``Job.cleanup()``), told to
    the job's history."""
    told = w.history.jobs.get(target.job_id)
    what = f"jobs {action} {target.job_id} (actor {actor})"
    printed = ""
    seen = io.StringIO()
    try:
        if action == "cleanup":
            await MagicCommitter(store, target.uri).job(target.job_id).cleanup()
        else:
            printed = await run_cli(store, "jobs", action, target.uri, target.job_id, out=seen)
    except BaseException as exc:
        if told is not None:  # what it printed before it died or failed, it told
            told.kept |= kept_keys(seen.getvalue())
        if crashed(exc):
            w.history.notes.append(f"step {w.step}: {what}: operator's process died")
            return
        if not isinstance(exc, Exception):
            raise
        w.history.notes.append(f"step {w.step}: {what} refused: {one_line(exc)}")
        if told is not None:
            told.told.append((w.step, Outcome.REFUSED, f"{action}: {one_line(exc)}"))
        return
    w.history.notes.append(f"step {w.step}: {what} succeeded")
    if told is not None and action != "cleanup":
        outcome = told_by(action, printed)
        told.kept |= kept_keys(printed)
        told.told.append((w.step, outcome, f"operator {action}"))
        if action == "resume" and told.commit_end is None:
            told.commit_end = w.step


async def operator_actor(w: World, i: int, spec: ActorSpec) -> None:
    """Wait for a job whose driver died, then resume or abort it."""
    await w.sched.pause(i, "start", not_before=spec.delay)
    rng = w.rng(i, "operator")

    def targets() -> list[DeadJob]:
        return [
            d
            for d in w.dead
            if not (d.stream and 1 in w.avoid) and not (10 in w.avoid and d.job_id in w.claimed)
        ]

    for _ in range(PATIENCE):
        if targets():
            break
        await w.sched.pause(i, "waiting for a dead job")
    if not targets():
        return
    target = targets()[rng.randrange(len(targets()))]
    w.claimed.add(target.job_id)
    action = spec.kind.value  # abort | resume | cleanup
    await job_command(w, i, w.store(i), action, target)


async def uploads_actor(w: World, i: int, spec: ActorSpec) -> None:
    """``zerorename uploads abort s3://bkt/out``: the operator's explicit prefix."""
    await w.sched.pause(i, "start", not_before=spec.delay)
    try:
        await run_cli(w.store(i), "uploads", "abort", URI)
        w.history.notes.append(f"step {w.step}: uploads abort {URI} (actor {i}) done")
    except Exception as exc:
        w.history.notes.append(f"step {w.step}: uploads abort failed: {one_line(exc)}")
    except BaseException as exc:
        if not crashed(exc):
            raise
    w.history.prefix_aborts.append(w.step)


async def lifecycle_actor(w: World, i: int, spec: ActorSpec) -> None:
    """The bucket's rule: now and then, abort every pending upload older than
    LIFECYCLE_AGE uploads (the store does it: no request)."""
    for n in range(3):
        await w.sched.pause(i, f"lifecycle {n}", not_before=spec.delay + 8 * n)
        newest = max((u.seq for u in w.state.uploads.values()), default=0)
        old = [u for u in w.state.uploads.values() if u.seq <= newest - LIFECYCLE_AGE]
        for u in old:
            del w.state.uploads[u.upload_id]
        if old:
            w.history.notes.append(
                f"step {w.step}: lifecycle aborted {', '.join(u.key for u in old)}"
            )
            w.history.prefix_aborts.append(w.step)


async def foreign_actor(w: World, i: int, spec: ActorSpec) -> None:
    """Another writer: objects in the destination (its root and a partition), one in a
    sibling prefix, and a multipart upload it keeps pending."""
    await w.sched.pause(i, "start", not_before=spec.delay)
    store = w.store(i)
    keys = [f"{DEST}/foreign-{i}.csv", f"{DEST}/p=0/foreign-{i}.csv", f"{SIBLING}/foreign-{i}"]
    try:
        for key in keys:
            data = f"foreign {i} {key}\n".encode()
            w.history.foreign[key] = (data, w.step, None)
            await store.put_object(BUCKET, key, data)
            w.history.foreign[key] = (data, w.history.foreign[key][1], w.step)
        up = await store._create(BUCKET, f"{DEST}/foreign-upload-{i}")
        w.history.foreign_uploads.add(up)
    except Exception as exc:
        w.history.notes.append(f"step {w.step}: foreign writer {i}: {one_line(exc)}")
