"""The process's one cache of :class:`UploadEngine`\\ s: one per configuration, entered on
a :class:`LoopPortal`'s loop, so everything a process runs there (Spark's tasks through
the bridge, :class:`~zerorename.committers.sync.SyncCommitter` facades) shares engines
and connection pools instead of opening its own (:func:`engine_cache`: one cache a portal).

The cache keeps at most :data:`MAX_ENGINES` engines. Its callers hold the engine it hands
out for as long as they need it (a task writer from its first batch to its commit), so an
engine is in use exactly while something references it: evicting one only takes it out
of the cache (retires it), and a retired engine is closed once its last user has let go
of it (a ``weakref.finalize``: at the next cache miss, which collects, or the garbage
collector's next run), or at :meth:`EngineCache.close_retired`. An engine is never closed
under a user, and the open engines are the cache's plus those still in use.
"""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import weakref
from collections.abc import Hashable
from contextlib import AsyncExitStack

from zerorename.engine import EngineConfig, UploadEngine
from zerorename.portal import CLOSE_TIMEOUT, LoopPortal

__all__ = ["MAX_ENGINES", "EngineCache", "engine_cache"]

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


def _is_engine_key(key: Hashable) -> bool:
    return isinstance(key, tuple) and key[:1] == ("engine",)


class EngineCache:
    """One engine per configuration on ``portal``'s loop, kept as the portal's resources
    (closed with it). Thread-safe; not for the loop's thread."""

    def __init__(self, portal: LoopPortal) -> None:
        self.portal = portal
        self._lock = threading.Lock()
        #: engines taken out of the cache that some user still holds, of process ``_pid``
        self._retired: weakref.WeakSet[_CachedEngine] = weakref.WeakSet()
        self._pid = os.getpid()

    def _mine(self) -> weakref.WeakSet[_CachedEngine]:
        """The retired engines of this process: a forked child starts with none (its
        copies of the parent's are the parent's to close, on the parent's loop)."""
        if self._pid != os.getpid():
            self._retired, self._pid = weakref.WeakSet(), os.getpid()
        return self._retired

    def engine(self, config: EngineConfig) -> UploadEngine:
        """The engine for ``config`` (one per distinct config in the cache), entered on the
        loop. Hold it while you use it: the cache may retire it, but a retired engine is
        closed only once nothing references it."""
        key = ("engine", config)
        with self._lock:
            keys = self.portal.resource_keys()
            if key not in keys:
                engines = [k for k in keys if _is_engine_key(k)]
                for old in engines[: max(0, len(engines) - MAX_ENGINES + 1)]:
                    self._retire(old)
                if len(self._mine()):
                    # an engine refers to itself (bound methods), so only the cycle
                    # collector frees it: collect now, on a miss (rare), so the retired
                    # engines no user holds any more are closed at once
                    gc.collect()
            return self.portal.resource(key, lambda: _CachedEngine(config))

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
        self._mine().add(engine)
        weakref.finalize(engine, _close_retired, self.portal.loop, os.getpid(), stack)

    def close_retired(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Close the retired engines some user still holds (before the portal closes: the
        cache's own are its resources)."""
        with self._lock:
            retired = list(self._mine())
            self._retired = weakref.WeakSet()
        if retired and self.portal.is_running():
            for engine in retired:
                self.portal.run(engine.close(), timeout)

    def engines_open(self) -> tuple[int, int]:
        """(engines in the cache, retired engines some user still holds): for tests and
        diagnostics."""
        cached = sum(1 for k in self.portal.resource_keys() if _is_engine_key(k))
        return cached, len(self._mine())


_CACHES: weakref.WeakKeyDictionary[LoopPortal, EngineCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def engine_cache(portal: LoopPortal) -> EngineCache:
    """The one engine cache of ``portal`` (of the process portal: the process's)."""
    with _CACHES_LOCK:
        cache = _CACHES.get(portal)
        if cache is None:
            cache = _CACHES[portal] = EngineCache(portal)
        return cache


def _after_fork_in_child() -> None:
    """A lock another thread held at fork time stays held forever in the child: renew the
    caches' locks (the portal renews its own)."""
    global _CACHES_LOCK
    _CACHES_LOCK = threading.Lock()
    for cache in list(_CACHES.values()):
        cache._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
