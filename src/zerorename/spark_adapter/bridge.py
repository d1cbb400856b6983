"""The Spark adapter's view of the process portal: one loop per Python worker process.

Spark runs task code synchronously in Python worker processes that are reused across
tasks (``spark.python.worker.reuse``) and forked from a daemon. :func:`get_bridge`
wraps :func:`zerorename.portal.process_portal` (one loop thread per process, uvloop when
available, started on first use, started afresh after a fork, closed at exit), so a
reused worker's tasks share one :class:`UploadEngine` per configuration and one
connection pool instead of opening their own. Misuse is reported as
:class:`BridgeError`, the Spark adapter's error.

The engine cache keeps at most :data:`MAX_ENGINES` engines. Its callers hold the engine it
hands out for as long as they need it (a task writer from its first batch to its commit),
so an engine is in use exactly while something references it: evicting one only takes
it out of the cache (retires it), and a retired engine is closed once its last user has
let go of it (a ``weakref.finalize``: at the next cache miss, which collects, or the
garbage collector's next run), or at :meth:`LoopBridge.close`. An engine is never
closed under a user, and the open engines are the cache's plus those still in use.
"""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import weakref
from collections.abc import Callable, Coroutine, Hashable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any, TypeVar

from zerorename.engine import EngineConfig, UploadEngine
from zerorename.portal import CLOSE_TIMEOUT, LoopPortal, process_portal
from zerorename.spark_adapter.errors import BridgeError

__all__ = ["CLOSE_TIMEOUT", "MAX_ENGINES", "LoopBridge", "get_bridge"]

T = TypeVar("T")

#: engines (distinct configurations) one process's cache keeps; the least recently
#: created one beyond this is retired (closed once no user holds it), so a long-lived
#: worker never accumulates pools.
MAX_ENGINES = 8

#: closes of retired engines started on the loop thread (kept until done)
_CLOSING: set[asyncio.Task[None]] = set()


class _CachedEngine(UploadEngine):
    """An engine of the cache: it hands its connections' closer to a finalizer, which
    must not hold the engine itself."""

    def closer(self) -> AsyncExitStack | None:
        return self._stack


def _close_retired(loop: asyncio.AbstractEventLoop, pid: int, stack: AsyncExitStack) -> None:
    """A retired engine's last user let go of it: close its connections on its loop
    (never blocks: a finalizer may run on any thread, the loop's included)."""
    if os.getpid() != pid or loop.is_closed() or not loop.is_running():
        return  # a forked child, or the loop has ended (its close closed the sockets)
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        task = loop.create_task(stack.aclose())
        _CLOSING.add(task)
        task.add_done_callback(_CLOSING.discard)
    else:
        asyncio.run_coroutine_threadsafe(stack.aclose(), loop)


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
        self._engines_lock = threading.Lock()
        #: engines taken out of the cache that some user still holds
        self._retired: weakref.WeakSet[_CachedEngine] = weakref.WeakSet()

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
        with self._engines_lock:
            retired = list(self._retired)
            self._retired = weakref.WeakSet()
        if retired and self.portal.is_running():
            for engine in retired:
                self.portal.run(engine.close(), timeout)
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
        key = ("engine", config)
        with self._engines_lock:
            keys = self.portal.resource_keys()
            if key not in keys:
                engines = [k for k in keys if isinstance(k, tuple) and k[:1] == ("engine",)]
                for old in engines[: max(0, len(engines) - MAX_ENGINES + 1)]:
                    self._retire(old)
                if len(self._retired):
                    # an engine refers to itself (bound methods), so only the cycle
                    # collector frees it: collect now, on a miss (rare), so the retired
                    # engines no user holds any more are closed at once
                    gc.collect()
            return self.resource(key, lambda: _CachedEngine(config))

    def _retire(self, key: Hashable) -> None:
        """Take the engine under ``key`` out of the cache; it is closed once its last
        user has let go of it."""
        engine = self.portal.forget(key)
        if not isinstance(engine, _CachedEngine):
            if engine is not None:  # not ours to keep open: close it as before
                self.portal.run(engine.close())
            return
        stack = engine.closer()
        if stack is None:
            return
        self._retired.add(engine)
        weakref.finalize(engine, _close_retired, self.portal.loop, os.getpid(), stack)

    def engines_open(self) -> tuple[int, int]:
        """(engines in the cache, retired engines some user still holds): for tests and
        diagnostics."""
        cached = sum(
            1 for k in self.portal.resource_keys() if isinstance(k, tuple) and k[:1] == ("engine",)
        )
        return cached, len(self._retired)


_BRIDGE = LoopBridge(portal=process_portal())


def get_bridge() -> LoopBridge:
    """The process-wide bridge, over the process portal (closed at exit, fork-safe)."""
    return _BRIDGE
