"""The event-loop bridge: one asyncio loop thread per process, for sync callers.

Spark runs task code synchronously in Python worker processes that are reused across
tasks (``spark.python.worker.reuse``) and forked from a daemon. The bridge gives each
process exactly one loop (uvloop when available) on one daemon thread, created on first
use, recreated after a fork (the parent's loop thread does not exist in the child), and
shut down at interpreter exit. Per-process resources such as :class:`UploadEngine`
instances live on that loop, keyed by their configuration, so every task a reused worker
runs shares one connection pool instead of opening its own.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Coroutine, Hashable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from zerorename.spark_adapter.errors import BridgeError

if TYPE_CHECKING:
    from zerorename.engine import EngineConfig, UploadEngine

log = logging.getLogger("zerorename.spark")

T = TypeVar("T")

#: seconds close() waits for resources to close and the loop thread to end.
CLOSE_TIMEOUT = 30.0
#: engines (distinct configurations) one process keeps; the least recently created
#: one beyond this is closed, so a long-lived worker never accumulates pools.
MAX_ENGINES = 8


@dataclass
class _ProcessState:
    """The loop, its thread and the resources of one process (one pid)."""

    pid: int
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    #: key -> (context manager, entered value), in creation order (closed in reverse).
    resources: dict[Hashable, tuple[AbstractAsyncContextManager[Any], Any]] = field(
        default_factory=dict
    )


def _new_loop(use_uvloop: bool | None) -> asyncio.AbstractEventLoop:
    if use_uvloop is not False:
        try:
            import uvloop
        except ImportError:
            if use_uvloop:
                raise
        else:
            return cast(asyncio.AbstractEventLoop, uvloop.new_event_loop())
    return asyncio.new_event_loop()


def _loop_main(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    try:
        loop.run_forever()
    finally:
        asyncio.set_event_loop(None)


class LoopBridge:
    """Runs coroutines on this process's loop thread and blocks sync callers on them.

    Thread-safe; every method may be called from any thread except the loop thread
    (``run`` there raises :class:`BridgeError`). ``close`` is idempotent and the bridge
    starts a fresh loop if used again afterwards.
    """

    def __init__(self, *, use_uvloop: bool | None = None, name: str = "zerorename-loop") -> None:
        self._use_uvloop = use_uvloop
        self._name = name
        self._lock = threading.RLock()
        self._state: _ProcessState | None = None
        self._loops_started = 0

    # -- lifecycle -------------------------------------------------------------------

    def _current(self) -> _ProcessState:
        """The live state for this process, starting the loop thread if needed."""
        pid = os.getpid()
        state = self._state
        if state is not None and state.pid == pid and state.thread.is_alive():
            return state
        with self._lock:
            state = self._state
            if state is not None and state.pid == pid and state.thread.is_alive():
                return state
            if state is not None and state.pid != pid:
                # Forked child: the parent's loop thread does not exist here and its
                # sockets belong to the parent. Drop it all without touching it.
                self._state = None
            elif state is not None:
                # Same process, but the thread died (should not happen): start over.
                log.warning("zerorename loop thread ended unexpectedly; starting a new one")
                self._state = None
            loop = _new_loop(self._use_uvloop)
            ready = threading.Event()
            thread = threading.Thread(
                target=_loop_main, args=(loop, ready), name=self._name, daemon=True
            )
            thread.start()
            ready.wait()
            self._loops_started += 1
            self._state = _ProcessState(pid=pid, loop=loop, thread=thread)
            return self._state

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """This process's loop (started on first use)."""
        return self._current().loop

    @property
    def loops_started(self) -> int:
        """How many loops this bridge object started in this process (for tests)."""
        return self._loops_started

    def is_running(self) -> bool:
        """True when this process has a live loop thread."""
        state = self._state
        return state is not None and state.pid == os.getpid() and state.thread.is_alive()

    def _after_fork_in_child(self) -> None:
        # A lock held by another thread at fork time stays held forever in the child.
        self._lock = threading.RLock()
        self._state = None
        self._loops_started = 0

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Close this process's resources (newest first), stop the loop and join its
        thread. Does nothing when no loop runs here; never raises for a resource that
        fails to close (it is logged)."""
        with self._lock:
            state = self._state
            self._state = None
        if state is None or state.pid != os.getpid():
            return
        if threading.current_thread() is state.thread:
            raise BridgeError("LoopBridge.close() called from the loop thread")
        if state.thread.is_alive():
            fut = asyncio.run_coroutine_threadsafe(self._shutdown(state), state.loop)
            try:
                fut.result(timeout)
            except concurrent.futures.TimeoutError:
                fut.cancel()
                log.warning("zerorename bridge: resources did not close within %.0fs", timeout)
            except Exception:
                log.exception("zerorename bridge: error while closing")
            with contextlib.suppress(RuntimeError):
                state.loop.call_soon_threadsafe(state.loop.stop)
            state.thread.join(timeout)
        if not state.thread.is_alive():
            state.loop.close()

    @staticmethod
    async def _shutdown(state: _ProcessState) -> None:
        for key, (cm, _value) in reversed(list(state.resources.items())):
            try:
                await cm.__aexit__(None, None, None)
            except Exception:
                log.exception("zerorename bridge: closing resource %r failed", key)
        state.resources.clear()
        me = asyncio.current_task()
        others = [t for t in asyncio.all_tasks() if t is not me]
        for t in others:
            t.cancel()
        if others:
            await asyncio.gather(*others, return_exceptions=True)
        await asyncio.get_running_loop().shutdown_asyncgens()

    # -- running coroutines ----------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop thread and return its result (or raise its error).

        On ``timeout`` (seconds) the coroutine is cancelled and :class:`TimeoutError` is
        raised; if the calling thread is interrupted the coroutine is cancelled too.
        """
        state = self._current()
        if threading.current_thread() is state.thread:
            coro.close()
            raise BridgeError(
                "LoopBridge.run() called from the loop thread; await the coroutine instead"
            )
        fut = asyncio.run_coroutine_threadsafe(coro, state.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"coroutine did not finish within {timeout}s") from None
        except BaseException:
            fut.cancel()
            raise

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Schedule a plain callable on the loop thread (fire and forget)."""
        self._current().loop.call_soon_threadsafe(fn)

    # -- per-process resources -------------------------------------------------------

    def resource(self, key: Hashable, factory: Callable[[], AbstractAsyncContextManager[T]]) -> T:
        """The resource stored under ``key`` for this process, creating it on first use:
        ``factory()`` is entered on the loop, kept, and exited at ``close``/exit."""
        state = self._current()
        entry = state.resources.get(key)
        if entry is not None:
            return cast(T, entry[1])
        with self._lock:
            state = self._current()
            entry = state.resources.get(key)
            if entry is not None:
                return cast(T, entry[1])
            cm = factory()
            value = self.run(cm.__aenter__())
            state.resources[key] = (cm, value)
            return value

    def discard(self, key: Hashable) -> bool:
        """Close and forget the resource under ``key``; False when there was none."""
        with self._lock:
            state = self._state
            if state is None or state.pid != os.getpid():
                return False
            entry = state.resources.pop(key, None)
        if entry is None:
            return False
        self.run(entry[0].__aexit__(None, None, None))
        return True

    def resource_count(self) -> int:
        """How many resources this process holds (for tests and diagnostics)."""
        state = self._state
        if state is None or state.pid != os.getpid():
            return 0
        return len(state.resources)

    def engine(self, config: EngineConfig) -> UploadEngine:
        """This process's :class:`UploadEngine` for ``config`` (one per distinct config),
        entered on the loop and closed at exit."""
        from zerorename.engine import UploadEngine

        key = ("engine", config)
        state = self._current()
        if key not in state.resources:
            engines = [k for k in state.resources if isinstance(k, tuple) and k[:1] == ("engine",)]
            for old in engines[: max(0, len(engines) - MAX_ENGINES + 1)]:
                self.discard(old)
        return self.resource(key, lambda: UploadEngine(config))


_BRIDGE = LoopBridge()


def get_bridge() -> LoopBridge:
    """The process-wide bridge (the only global state of zerorename)."""
    return _BRIDGE


def _close_at_exit() -> None:
    try:
        _BRIDGE.close(timeout=10.0)
    except Exception:  # exit must never hang or fail because of the bridge
        log.debug("zerorename bridge: close at exit failed", exc_info=True)


atexit.register(_close_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_BRIDGE._after_fork_in_child)
