"""Small asyncio helpers every layer shares: the error inside a task group's exception
group, a step that runs to its end through a cancel, and async iteration over sources that
may be sync or async."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
)
from contextvars import ContextVar
from typing import TypeVar

import anyio

__all__ = ["aiter_any", "cleanup_interrupted", "first_error", "to_the_end", "unwrapped"]

#: called when an interrupt (a cancel) finds a clean-up (``to_the_end(..., cleanup=True)``)
#: running or starts one: the CLI sets it to print that the clean-up is finishing
#: (:mod:`zerorename.clirun`); unset elsewhere
cleanup_interrupted: ContextVar[Callable[[], None] | None] = ContextVar(
    "zerorename_cleanup_interrupted", default=None
)

T = TypeVar("T")
log = logging.getLogger(__name__)


def _leaves(exc: BaseException) -> list[BaseException]:
    if not isinstance(exc, BaseExceptionGroup):
        return [exc]
    return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]


def first_error(exc: BaseException) -> BaseException:
    """The error inside (nested) exception groups, else ``exc`` itself: the first real
    failure, preferred over cancellations, with a note counting the other failures.
    A group holding an interrupt (KeyboardInterrupt, SystemExit) is returned as it is,
    so unwrapping never hides one."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    leaves = _leaves(exc)
    if any(not isinstance(e, (Exception, asyncio.CancelledError)) for e in leaves):
        return exc
    real = [e for e in leaves if not isinstance(e, asyncio.CancelledError)]
    if not real:
        return leaves[0]
    first = real[0]
    note = f"({len(real) - 1} more task(s) failed at the same time)"
    if len(real) > 1 and note not in getattr(first, "__notes__", ()):
        first.add_note(note)
    return first


@contextlib.asynccontextmanager
async def unwrapped() -> AsyncIterator[None]:
    """Re-raise an exception group escaping the block as its :func:`first_error` (the
    leaf keeps its own cause and traceback)."""
    try:
        yield
    except BaseExceptionGroup as eg:
        raise first_error(eg)  # noqa: B904 - the leaf keeps its own __cause__


async def to_the_end(step: Awaitable[T], *, cleanup: bool = False) -> T:
    """Await ``step`` to its end even when this task is cancelled meanwhile, then raise
    the cancel: for the requests that must not be cut short (a create whose id we would
    never learn, the abort or rollback after a failure, a journal save).

    anyio's ``CancelScope(shield=True)`` keeps anyio's own cancels out, but not asyncio's
    ``Task.cancel()``, which is what ``asyncio.Runner`` does on Ctrl-C and what a
    portal's caller does when it gives up; so the step runs as a task of its own and this
    one only waits for it. When a cancel came meanwhile it is raised once the step has
    ended, whatever the step's outcome (the interrupt is what ended the caller; a step's
    error it hides is logged (info), naming what the clean-up left undone); else
    the step's result or error. Two cancels in a row do not stop the step either; only the
    loop's end does. ``cleanup`` (a rollback or an abort): a cancel that finds the step
    running, or that started it, calls :data:`cleanup_interrupted`."""
    task = asyncio.ensure_future(step)
    cancelled: asyncio.CancelledError | None = None
    me = asyncio.current_task()
    notice = cleanup_interrupted.get() if cleanup else None
    if notice is not None and me is not None and me.cancelling():
        notice()
        notice = None
    with anyio.CancelScope(shield=True):
        while not task.done():
            try:
                await asyncio.wait((task,))  # neither cancels it nor raises its error
            except asyncio.CancelledError as exc:
                if notice is not None:
                    notice()
                    notice = None
                cancelled = cancelled or exc
    if cancelled is not None:
        err = None if task.cancelled() else task.exception()
        if err is not None:  # the interrupt is raised in its place: say what it hides
            # (info: a CLI's interrupt stays one line on stderr, as its contract is)
            log.info("a clean-up interrupted meanwhile failed: %s: %s", type(err).__name__, err)
        raise cancelled
    return task.result()


async def aiter_any(source: Iterable[T] | AsyncIterable[T]) -> AsyncGenerator[T, None]:
    """Iterate a sync or an async iterable the same way (``async for``). A sync source is
    read on the event loop, one item per step."""
    if isinstance(source, AsyncIterable):
        async for item in source:
            yield item
    else:
        for item in source:
            yield item


async def batches(
    source: Iterable[T] | AsyncIterable[T], size: int
) -> AsyncGenerator[list[T], None]:
    """The items of a sync or async iterable in lists of ``size`` (the last may be shorter,
    none is empty), pulled lazily: S3's DeleteObjects takes 1000 keys a request."""
    batch: list[T] = []
    async for item in aiter_any(source):
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
