"""Entry points run coroutines on uvloop when it is installed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory when available, else None (asyncio's default)."""
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def new_loop() -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's when available, else asyncio's."""
    factory = loop_factory()
    return factory() if factory is not None else asyncio.new_event_loop()


def run(coro: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """Run ``coro`` to completion on a fresh loop (uvloop when available)."""
    with asyncio.Runner(loop_factory=loop_factory(), debug=debug) as runner:
        return runner.run(coro)
