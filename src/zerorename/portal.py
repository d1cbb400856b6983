"""The one way across threads: sync code hands coroutines to an event loop and waits.

:func:`process_portal` is the process's loop (uvloop when installed) on one daemon
thread: started on first use, started afresh after a fork (the parent's loop thread does
not exist in the child), closed at interpreter exit. The Spark adapter, the blocking
committer facade and the blocking upload writer all cross threads through it, so a
process holds one loop and its long-lived resources (engines) live there, keyed.
:meth:`LoopPortal.attach` is the same crossing onto a loop an async program already runs.
:func:`run` is the entry points' way: a coroutine run to its end on a fresh loop of the
same kind (uvloop when installed), quiet about the Ctrl-C that stops it.

Why not anyio's ``start_blocking_portal``: its thread comes from a
``ThreadPoolExecutor``, which ``threading`` joins before ``atexit`` handlers run, so a
process that never closed the portal would hang at exit; and a ``BlockingPortal`` must
be created on its loop, so it cannot serve an engine opened on the caller's own loop.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from zerorename.errors import ZeroRenameError

__all__ = [
    "CLOSE_TIMEOUT",
    "LoopPortal",
    "PortalError",
    "interrupt_only",
    "loop_factory",
    "new_loop",
    "process_portal",
    "run",
]

log = logging.getLogger("zerorename.portal")

T = TypeVar("T")

#: seconds close() waits for resources to close and the loop thread to end.
CLOSE_TIMEOUT = 30.0


class PortalError(ZeroRenameError, RuntimeError):
    """Raised when a portal is used in a way that cannot work: waiting on the loop from
    the loop's own thread (it would wait for itself forever), or using a loop attached in
    another process."""


def loop_factory(use_uvloop: bool | None = None) -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop factory: uvloop's unless ``use_uvloop`` is False or uvloop is not
    installed (then asyncio's); ``use_uvloop=True`` without uvloop raises ImportError."""
    if use_uvloop is not False:
        try:
            import uvloop
        except ImportError:
            if use_uvloop:
                raise
        else:
            return cast(Callable[[], asyncio.AbstractEventLoop], uvloop.new_event_loop)
    return asyncio.new_event_loop


def new_loop(use_uvloop: bool | None = None) -> asyncio.AbstractEventLoop:
    """A new event loop from :func:`loop_factory`."""
    return loop_factory(use_uvloop)()


# -- entry points: a coroutine run to its end on a fresh loop of the same kind ------------
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


@dataclass
class _State:
    """The loop of one process (one pid), its thread (None when attached) and resources."""

    pid: int
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread | None
    #: key -> (context manager, entered value), in creation order (closed in reverse).
    resources: dict[Hashable, tuple[AbstractAsyncContextManager[Any], Any]] = field(
        default_factory=dict
    )
    #: the coroutines handed to the loop from other threads (the callers' work, whose
    #: clean-ups must end before the resources they use are closed)
    submitted: weakref.WeakSet[Coroutine[Any, Any, Any]] = field(default_factory=weakref.WeakSet)


def _loop_main(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    try:
        loop.run_forever()
    finally:
        asyncio.set_event_loop(None)


def _submit(state: _State, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """The one place zerorename hands a coroutine to a loop from another thread."""
    state.submitted.add(coro)
    return asyncio.run_coroutine_threadsafe(coro, state.loop)


async def _await(aw: Awaitable[T]) -> T:
    return await aw


class LoopPortal:
    """Runs coroutines on a loop thread and blocks sync callers on them.

    Thread-safe; every method may be called from any thread but the loop's (waiting
    there raises :class:`PortalError`). ``close`` is idempotent; an owned portal starts
    a fresh loop if used again afterwards.
    """

    def __init__(self, *, use_uvloop: bool | None = None, name: str = "zerorename-loop") -> None:
        self._use_uvloop = use_uvloop
        self._name = name
        self._lock = threading.RLock()
        self._state: _State | None = None
        self._attached: _State | None = None
        self._loops_started = 0

    @classmethod
    def attach(cls, loop: asyncio.AbstractEventLoop) -> LoopPortal:
        """A portal onto ``loop``, which another thread runs (an async program's own
        loop): it never starts, stops or closes that loop."""
        portal = cls()
        portal._attached = _State(pid=os.getpid(), loop=loop, thread=None)
        portal._state = portal._attached
        return portal

    # -- lifecycle -------------------------------------------------------------------

    def _live(self, state: _State | None) -> bool:
        if state is None or state.pid != os.getpid():
            return False
        if state.thread is None:
            return not state.loop.is_closed()
        return state.thread.is_alive()

    def _current(self) -> _State:
        """The live state for this process, starting the loop thread if needed."""
        state = self._state
        if self._live(state):
            assert state is not None
            return state
        with self._lock:
            state = self._state
            if self._live(state):
                assert state is not None
                return state
            if self._attached is not None:
                raise PortalError(
                    f"the attached event loop belongs to process {self._attached.pid} or is "
                    "closed; attach to a loop running in this process"
                )
            if state is not None and state.pid == os.getpid():
                log.warning("zerorename loop thread ended unexpectedly; starting a new one")
            # A forked child's state is dropped untouched: the parent's loop thread does
            # not exist here and its sockets belong to the parent.
            loop = new_loop(self._use_uvloop)
            ready = threading.Event()
            thread = threading.Thread(
                target=_loop_main, args=(loop, ready), name=self._name, daemon=True
            )
            thread.start()
            ready.wait()
            self._loops_started += 1
            self._state = _State(pid=os.getpid(), loop=loop, thread=thread)
            return self._state

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """This process's loop (started on first use)."""
        return self._current().loop

    @property
    def loops_started(self) -> int:
        """How many loops this portal started in this process (for tests)."""
        return self._loops_started

    def is_running(self) -> bool:
        """True when this process has a live loop (thread) here."""
        return self._live(self._state)

    def in_loop_thread(self) -> bool:
        """True when called on this portal's loop (where waiting on it would deadlock)."""
        state = self._state
        if not self._live(state):
            return False
        assert state is not None
        if state.thread is not None and threading.current_thread() is state.thread:
            return True
        try:
            return asyncio.get_running_loop() is state.loop
        except RuntimeError:
            return False

    def _after_fork_in_child(self) -> None:
        # A lock held by another thread at fork time stays held forever in the child.
        self._lock = threading.RLock()
        if self._attached is None:
            self._state = None
            self._loops_started = 0

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Close this process's resources (newest first); an owned portal then stops
        its loop and joins its thread. Never raises for a resource that fails to close
        (it is logged)."""
        if self.in_loop_thread():
            raise PortalError("LoopPortal.close() called from the loop thread")
        with self._lock:
            state = self._state
            if self._attached is None:
                self._state = None
        if state is None or state.pid != os.getpid():
            return
        if self._live(state):
            owned = state.thread is not None
            fut = _submit(state, self._shutdown(state, owned=owned, grace=timeout / 2))
            try:
                fut.result(timeout)
            except concurrent.futures.TimeoutError:
                fut.cancel()
                log.warning("zerorename portal: resources did not close within %.0fs", timeout)
            except Exception:
                log.exception("zerorename portal: error while closing")
        if state.thread is None:
            return
        with contextlib.suppress(RuntimeError):
            state.loop.call_soon_threadsafe(state.loop.stop)
        state.thread.join(timeout)
        if not state.thread.is_alive():
            state.loop.close()

    @staticmethod
    async def _shutdown(state: _State, *, owned: bool, grace: float) -> None:
        """The callers' coroutines still running (the ones handed in through this portal,
        owned or attached) are cancelled and awaited (for up to ``grace`` seconds) first,
        so a clean-up they run to its end (a rollback, an abort:
        :func:`zerorename.aio.to_the_end`) still has its engine; then the resources close
        (newest first); then, owned only, every task left is cancelled."""
        me = asyncio.current_task()
        work = [t for t in asyncio.all_tasks() if t is not me and t.get_coro() in state.submitted]
        for t in work:
            t.cancel()
        if work:
            _, late = await asyncio.wait(work, timeout=grace)
            if late:
                log.warning(
                    "zerorename portal: %d task(s) still running after %.0fs; closing "
                    "their resources anyway",
                    len(late),
                    grace,
                )
        for key, (cm, _value) in reversed(list(state.resources.items())):
            try:
                await cm.__aexit__(None, None, None)
            except Exception:
                log.exception("zerorename portal: closing resource %r failed", key)
        state.resources.clear()
        if not owned:  # the loop's tasks belong to whoever runs it
            return
        others = [t for t in asyncio.all_tasks() if t is not me]
        for t in others:
            t.cancel()
        if others:
            await asyncio.gather(*others, return_exceptions=True)
        await asyncio.get_running_loop().shutdown_asyncgens()

    # -- running coroutines ----------------------------------------------------------

    def start(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop and return its future at once."""
        return _submit(self._current(), coro)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and return its result, or raise its very exception.

        On ``timeout`` (seconds) the coroutine is cancelled and :class:`TimeoutError` is
        raised; if the waiting thread is interrupted the coroutine is cancelled too.
        """
        if self.in_loop_thread():
            coro.close()
            raise PortalError(
                "LoopPortal.run() called from the loop thread; await the coroutine instead"
            )
        fut = self.start(coro)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"coroutine did not finish within {timeout}s") from None
        except BaseException:
            fut.cancel()
            raise

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``run(fn(*args))`` for an async function (anyio's ``BlockingPortal.call``)."""
        return self.run(_await(fn(*args)))

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Schedule a plain callable on the loop thread (fire and forget)."""
        self._current().loop.call_soon_threadsafe(fn)

    # -- per-process resources -------------------------------------------------------

    def resource(self, key: Hashable, factory: Callable[[], AbstractAsyncContextManager[T]]) -> T:
        """The resource stored under ``key`` for this process, created on first use:
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
            value = self.run(_await(cm.__aenter__()))
            state.resources[key] = (cm, value)
            return value

    def discard(self, key: Hashable) -> bool:
        """Close and forget the resource under ``key``; False when there was none."""
        with self._lock:
            state = self._state
            if not self._live(state):
                return False
            assert state is not None
            entry = state.resources.pop(key, None)
        if entry is None:
            return False
        self.run(_await(entry[0].__aexit__(None, None, None)))
        return True

    def forget(self, key: Hashable) -> Any:
        """Forget the resource under ``key`` without closing it and return its entered
        value (None when there was none): the caller now owns closing it."""
        with self._lock:
            state = self._state
            if not self._live(state):
                return None
            assert state is not None
            entry = state.resources.pop(key, None)
        return None if entry is None else entry[1]

    def resource_keys(self) -> list[Hashable]:
        """The keys of this process's resources, oldest first."""
        state = self._state
        if not self._live(state):
            return []
        assert state is not None
        return list(state.resources)

    def resource_count(self) -> int:
        """How many resources this process holds (for tests and diagnostics)."""
        return len(self.resource_keys())


_PORTAL = LoopPortal()


def process_portal() -> LoopPortal:
    """The process-wide portal (the only global state of zerorename)."""
    return _PORTAL


def _close_at_exit() -> None:
    try:
        _PORTAL.close(timeout=10.0)
    except Exception:  # exit must never hang or fail because of the portal
        log.debug("zerorename portal: close at exit failed", exc_info=True)


atexit.register(_close_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_PORTAL._after_fork_in_child)
