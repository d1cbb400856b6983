"""Entry points run coroutines on uvloop when it is installed (the loop choice is the
portal's, :func:`zerorename.portal.loop_factory`, so every loop zerorename makes is alike)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from zerorename.portal import loop_factory, new_loop

__all__ = ["loop_factory", "new_loop", "run"]

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """Run ``coro`` to completion on a fresh loop (uvloop when available)."""
    with asyncio.Runner(loop_factory=loop_factory(), debug=debug) as runner:
        return runner.run(coro)
