"""The Spark adapter's view of the process portal: one loop per Python worker process.

Spark runs task code synchronously in Python worker processes that are reused across
tasks (``spark.python.worker.reuse``) and forked from a daemon. :func:`get_bridge`
wraps :func:`zerorename.portal.process_portal` (one loop thread per process, uvloop when
available, started on first use, started afresh after a fork, closed at exit), so a
reused worker's tasks share one :class:`UploadEngine` per configuration and one
connection pool instead of opening their own. Misuse is reported as
:class:`BridgeError`, the Spark adapter's error.

Its engines are the process's one engine cache's
(:mod:`zerorename.committers.enginecache`: at most :data:`MAX_ENGINES`, one per
configuration, a retired engine closed once its last user lets go of it), which the
committers' ``SyncCommitter`` shares.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Hashable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from zerorename.committers.enginecache import MAX_ENGINES, engine_cache
from zerorename.engine import EngineConfig, UploadEngine
from zerorename.portal import CLOSE_TIMEOUT, LoopPortal, process_portal
from zerorename.spark_adapter.errors import BridgeError

__all__ = ["CLOSE_TIMEOUT", "MAX_ENGINES", "LoopBridge", "get_bridge"]

T = TypeVar("T")


class LoopBridge:
    """Runs coroutines on a :class:`LoopPortal` (the process's, or a private one) and
    keeps one engine per configuration there. Thread-safe; not for the loop's thread."""

    def __init__(
        self,
        *,
        use_uvloop: bool | None = None,
        name: str = "zerorename-loop",
        portal: LoopPortal | None = None,
    ) -> None:
        self.portal = portal if portal is not None else LoopPortal(use_uvloop=use_uvloop, name=name)
        #: the portal's engine cache (the process's, over the process portal)
        self._engines = engine_cache(self.portal)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """This process's loop (started on first use)."""
        return self.portal.loop

    @property
    def loops_started(self) -> int:
        """How many loops the portal started in this process (for tests)."""
        return self.portal.loops_started

    def is_running(self) -> bool:
        """True when this process has a live loop thread."""
        return self.portal.is_running()

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Close this process's resources (newest first), the retired engines still
        held, and stop the loop."""
        if self.portal.in_loop_thread():
            raise BridgeError("LoopBridge.close() called from the loop thread")
        self._engines.close_retired(timeout)
        self.portal.close(timeout)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop thread and return its result (or raise its error);
        on ``timeout`` seconds it is cancelled and :class:`TimeoutError` raised."""
        if self.portal.in_loop_thread():
            coro.close()
            raise BridgeError(
                "LoopBridge.run() called from the loop thread; await the coroutine instead"
            )
        return self.portal.run(coro, timeout)

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Schedule a plain callable on the loop thread (fire and forget)."""
        self.portal.call_soon(fn)

    def resource(self, key: Hashable, factory: Callable[[], AbstractAsyncContextManager[T]]) -> T:
        """The resource under ``key`` for this process, entered on first use."""
        if self.portal.in_loop_thread():
            raise BridgeError("LoopBridge.resource() called from the loop thread")
        return self.portal.resource(key, factory)

    def discard(self, key: Hashable) -> bool:
        """Close and forget the resource under ``key``; False when there was none."""
        return self.portal.discard(key)

    def resource_count(self) -> int:
        """How many resources this process holds (for tests and diagnostics)."""
        return self.portal.resource_count()

    def engine(self, config: EngineConfig) -> UploadEngine:
        """This process's :class:`UploadEngine` for ``config`` (one per distinct config in
        the cache), entered on the loop. Hold it while you use it: the cache may retire
        it, but a retired engine is closed only once nothing references it."""
        if self.portal.in_loop_thread():
            raise BridgeError("LoopBridge.engine() called from the loop thread")
        return self._engines.engine(config)

    def engines_open(self) -> tuple[int, int]:
        """(engines in the cache, retired engines some user still holds): for tests and
        diagnostics."""
        return self._engines.engines_open()


_BRIDGE = LoopBridge(portal=process_portal())


def get_bridge() -> LoopBridge:
    """The process-wide bridge, over the process portal (closed at exit, fork-safe)."""
    return _BRIDGE
