"""Entry points run coroutines on uvloop when it is installed (the loop choice is the
portal's, :func:`zerorename.portal.loop_factory`, so every loop zerorename makes is alike)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from zerorename.portal import loop_factory, new_loop

__all__ = ["loop_factory", "new_loop", "run"]

T = TypeVar("T")


def interrupt_only(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a Ctrl-C (KeyboardInterrupt), alone or in a task group's
    exception group with nothing but cancellations beside it."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    if isinstance(exc, BaseExceptionGroup):
        parts = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        return bool(parts) and all(interrupt_only(e) for e in parts)
    return False


def _quiet_on_interrupt(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler: a task that ended with the Ctrl-C that stops the run
    (the second Ctrl-C, raised inside a clean-up's task group) is not logged with its
    traceback at shutdown; the caller says "interrupted" in one line. Anything else goes
    to asyncio's default handler."""
    if interrupt_only(context.get("exception")):
        return
    loop.default_exception_handler(context)


def run(coro: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """Run ``coro`` to completion on a fresh loop (uvloop when available)."""
    with asyncio.Runner(loop_factory=loop_factory(), debug=debug) as runner:
        runner.get_loop().set_exception_handler(_quiet_on_interrupt)
        return runner.run(coro)
