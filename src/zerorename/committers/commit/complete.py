"""The job commit's completion pass: the async driver of :class:`CompletionWindow`.

The window decides (which pendingset to hand out next, when to save the watermark); this
loop does the I/O it is told to: it feeds the scanned uploads to the store's
``complete_many``, settles a failed complete from the store (an earlier attempt may have
made the object), and saves the watermark through its caller, shielded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import anyio

from zerorename.aio import to_the_end, unwrapped
from zerorename.committers.commit.spool import PendingSetCache
from zerorename.committers.commit.window import Action, CompletionWindow
from zerorename.committers.conflict import ConflictMode
from zerorename.committers.context import JobContext
from zerorename.committers.errors import CommitterError, ConflictError, JobCommitError
from zerorename.committers.store import Check, is_ours
from zerorename.engine.errors import EngineError, PreconditionFailed
from zerorename.engine.results import PendingUpload

__all__ = ["Completed", "CompletionPass", "complete_sets"]


@dataclass
class Completed:
    """What a completion pass finished so far (read by the progress reports)."""

    uploads: int = 0
    bytes: int = 0
    #: pendingsets below this index are done
    sets: int = 0


async def settled(ctx: JobContext, upload: PendingUpload, exc: BaseException) -> bool:
    """After a failed complete: is the object there already, ours (an earlier attempt or
    process completed it)? A PreconditionFailed on someone else's object is a conflict."""
    try:
        info = await ctx.engine.head_object(upload.bucket, upload.key)
    except EngineError:
        return False
    why = Check.KEY_EXISTED if isinstance(exc, PreconditionFailed) else Check.FAILED
    if is_ours(upload, info, why):
        return True
    if isinstance(exc, PreconditionFailed):
        raise ConflictError(
            f"another writer created {upload.uri} during the commit (If-None-Match)",
            job_id=ctx.job_id,
            conflicts=(upload.key,),
        ) from exc
    return False


async def complete_sets(
    ctx: JobContext,
    sets: PendingSetCache,
    total: int,
    window: int,
    start: int,
    uncertain_until: int,
    done: Completed,
    save: Callable[[int], Awaitable[None]] | None,
    state: str,
) -> None:
    """Complete the uploads of the scanned pendingsets ``start``..``total``; those below
    ``uncertain_until`` may be done already (checked first). ``save(mark)`` writes the
    watermark into the journal when the window says so (None: not journaled, a verify
    pass). ``state`` names the journal's state in a failure. The caller saves the final
    watermark with its state move."""
    win = CompletionWindow(start, window, total, uncertain_until=uncertain_until)
    await CompletionPass(ctx, sets, win, done, save).run()
    if win.failures:
        first = win.failures[0]
        if isinstance(first, CommitterError):
            raise first
        raise JobCommitError(
            f"{len(win.failures)} uploads could not be completed: {first}",
            job_id=ctx.job_id,
            rolled_back=False,
            state=state,
        ) from first
    if win.unfinished:
        raise JobCommitError(
            f"internal error: {win.unfinished} pendingsets unfinished",
            job_id=ctx.job_id,
            rolled_back=False,
            state=state,
        )


class CompletionPass:
    """One pass of :func:`complete_sets`: feeds the uploads the window lets out to the
    store's ``complete_many`` and tells the window what finished or failed."""

    def __init__(
        self,
        ctx: JobContext,
        sets: PendingSetCache,
        win: CompletionWindow,
        done: Completed,
        save: Callable[[int], Awaitable[None]] | None,
    ) -> None:
        self.ctx, self.sets, self.win, self.done, self.save = ctx, sets, win, done, save
        #: (key, upload id) handed out -> its set
        self.inflight: dict[tuple[str, str], int] = {}
        #: set (and replaced) whenever a result came in: what a WAIT waits for
        self.changed = anyio.Event()

    async def run(self) -> None:
        ctx = self.ctx
        async with unwrapped():
            await ctx.engine.complete_many(
                self.records(),
                concurrency=ctx.opts.concurrency,
                if_none_match=ctx.conflict is ConflictMode.FAIL,
                on_result=self.on_result,
            )

    def _wake(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    def _finished(self, upload: PendingUpload) -> None:
        self.done.uploads += 1
        self.done.bytes += upload.length

    async def on_result(self, upload: PendingUpload, exc: BaseException | None) -> None:
        idx = self.inflight.pop((upload.key, upload.upload_id))
        if exc is not None:
            try:
                if await settled(self.ctx, upload, exc):
                    exc = None
            except ConflictError as conflict:
                exc = conflict
        if exc is None:
            self._finished(upload)
            self.win.succeeded(idx)
            self.done.sets = self.win.low
        else:
            self.win.failed(exc)
        self._wake()

    async def _next_set(self) -> int | None:
        """The next set to hand out, opened; the watermark saved or a result waited for
        first when the window says so. None: hand out nothing more."""
        win = self.win
        while True:
            step = win.poll()
            if step.action is Action.STOP:
                return None
            if step.action is Action.SAVE:
                if self.save is not None:
                    await to_the_end(self.save(step.index))
                win.saved(step.index)
                continue
            if step.action is Action.WAIT:
                await self.changed.wait()
                continue
            win.open(step.index)
            return step.index

    async def records(self) -> AsyncIterator[PendingUpload]:
        """The uploads to complete, set by set as the window opens them."""
        win, engine = self.win, self.ctx.engine
        while (idx := await self._next_set()) is not None:
            # read by the scan of this process: parsed to its end and checked before any
            # of its uploads is handed out (a set gone after the job's cleanup began: none)
            loaded = self.sets.pop(idx)
            for up in loaded.uploads() if loaded is not None else ():
                if win.stopped:
                    return
                if win.must_check(idx) and is_ours(
                    up, await engine.head_object(up.bucket, up.key), Check.RESUME
                ):
                    self._finished(up)
                    continue
                win.handed_out(idx)
                self.inflight[(up.key, up.upload_id)] = idx
                yield up
            win.close(idx)
            self.done.sets = win.low
