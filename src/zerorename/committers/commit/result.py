"""What a job commit reports: progress snapshots while it works, its result at the end."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import TracebackType

import anyio

from zerorename.aio import unwrapped
from zerorename.committers.codec.pending import SuccessData
from zerorename.committers.codec.success import success_filename
from zerorename.committers.commit.journal import Journal
from zerorename.committers.context import JobContext

__all__ = [
    "CommitProgress",
    "CommitRecords",
    "JobCommitResult",
    "ProgressFn",
    "ProgressTicker",
    "RecordWrite",
    "success_record",
]


@dataclass(frozen=True)
class CommitProgress:
    """A snapshot handed to the progress callback (at least once a second while working)."""

    job_id: str
    phase: str
    pendingsets_done: int
    pendingsets_total: int
    uploads_done: int
    uploads_total: int
    bytes_done: int
    bytes_total: int
    elapsed: float


ProgressFn = Callable[[CommitProgress], "Awaitable[None] | None"]


@dataclass(frozen=True)
class JobCommitResult:
    """What a successful job commit did."""

    job_id: str
    files: int
    bytes: int
    pendingsets: int
    duration: float
    retries: int
    throttles: int
    success_key: str | None
    resumed: bool = False
    cleanup_error: str | None = None


#: what a record's body is: its bytes, or (only where its content needs the commit's own
#: figures) a pure function making them from the snapshot taken when it is sent
Body = bytes | Callable[[CommitProgress], bytes]


@dataclass(frozen=True)
class RecordWrite:
    """A caller's record, stored by the job commit itself with one PUT (unconditional, as
    the journal's) at the destination's bucket."""

    key: str
    body: Body
    content_type: str = "application/json"

    def payload(self, progress: CommitProgress) -> bytes:
        """The bytes to store, for the commit's snapshot at the time it is sent."""
        return self.body(progress) if callable(self.body) else self.body


@dataclass(frozen=True)
class CommitRecords:
    """A caller's records the job commit sends in its own rounds, so they cost none of
    their own (a resume sends only ``with_succeeded``). A write that fails fails the
    commit as the journal's write there would. Values, not callbacks: the committers
    never call back into their caller (a stream sink's log is such a record)."""

    #: written with the journal and the plan: answered before the first complete
    with_journal: tuple[RecordWrite, ...] = ()
    #: written with the journal's ``succeeded``: every complete was answered before
    with_succeeded: tuple[RecordWrite, ...] = ()
    #: keys deleted in the release's last request, with the journal (not when it fails)
    release_also: tuple[str, ...] = ()


class ProgressTicker:
    """Calls ``report`` every ``interval`` seconds while the block runs: a task group of
    one task, cancelled when the block ends; an exception group leaving the block is
    raised as its first error (:func:`~zerorename.aio.unwrapped`). It never swallows an
    exception (its exit returns None), so a ``return`` inside needs nothing after it."""

    def __init__(self, report: Callable[[], Awaitable[None]], interval: float) -> None:
        self._report = report
        self._interval = interval
        self._stack = contextlib.AsyncExitStack()

    async def _tick(self) -> None:
        while True:
            await self._report()
            await anyio.sleep(self._interval)

    async def __aenter__(self) -> None:
        await self._stack.enter_async_context(unwrapped())
        tg = await self._stack.enter_async_context(anyio.create_task_group())
        self._stack.callback(tg.cancel_scope.cancel)  # runs first: before the group's exit
        tg.start_soon(self._tick)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.__aexit__(exc_type, exc, tb)


def success_record(
    ctx: JobContext,
    j: Journal,
    pendingsets: int,
    stats: tuple[int, int],
    extra_metrics: Mapping[str, int | float],
    diagnostics: Mapping[str, str],
) -> SuccessData:
    """A committed job's ``_SUCCESS``: its figures (``stats``: this process's retries and
    throttles, added to the journal's), the caller's, and up to its first files."""
    metrics: dict[str, int | float] = {
        "files": j.uploads_total,
        "uploads": j.uploads_total,
        "bytes": j.bytes_total,
        "pendingsets": pendingsets,
        "duration_ms": round((time.time() - j.started) * 1000),
        "retries": j.retries + stats[0],
        "throttles": j.throttles + stats[1],
        "commit_processes": j.processes,
        **extra_metrics,
    }
    diag = {
        "conflict": ctx.conflict.value,
        "scope": ctx.scope.value,
        "destination": ctx.dest.uri,
        **diagnostics,
    }
    return SuccessData(
        job_id=j.job_id,
        committer=ctx.kind.value,
        metrics=metrics,
        description=f"zerorename {ctx.kind.value} committer",
        diagnostics=diag,
        filenames=[success_filename(ctx.dest.key(rel)) for rel in j.filenames],
    )
