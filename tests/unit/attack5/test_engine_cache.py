"""Attacks on the one engine cache (helper attack5; committers/enginecache.py, the bridge
and SyncCommitter): facades and bridge users of one configuration closing under each
other, eviction while in use, use after close, a fork. No request is sent: an engine's
stack (``_stack``) tells whether it is open."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator

import pytest

from zerorename.committers.errors import CommitterError
from zerorename.committers.sync import SyncCommitter
from zerorename.engine import EngineConfig, UploadEngine
from zerorename.spark_adapter import bridge as bridge_mod
from zerorename.spark_adapter.bridge import get_bridge


def cfg(n: int) -> EngineConfig:
    return EngineConfig(endpoint_url="http://127.0.0.1:9", region="us-east-1", max_concurrency=n)


def is_open(engine: UploadEngine) -> bool:
    return engine._stack is not None


@pytest.fixture(autouse=True)
def fresh_process_loop() -> Iterator[None]:
    get_bridge().close()
    yield
    get_bridge().close()


def test_closing_one_facade_leaves_the_engine_to_the_other_and_to_the_bridge() -> None:
    a = SyncCommitter("magic", "s3://b/t", cfg(1))
    b = SyncCommitter("magic", "s3://b/t", cfg(1))
    user = get_bridge().engine(cfg(1))
    assert a.engine is b.engine is user
    a.close()
    a.close()
    assert is_open(user)
    with pytest.raises(CommitterError, match="closed"):
        a.job("00000000-0000-4000-8000-000000000000").status()
    b.close()
    assert is_open(user)  # the cache's engine: the bridge user still has it
    assert get_bridge().engine(cfg(1)) is user


def test_a_facade_holds_its_engine_through_eviction_and_lets_go_at_close() -> None:
    c = SyncCommitter("magic", "s3://b/t", cfg(99))
    held = c.engine
    for i in range(bridge_mod.MAX_ENGINES):
        get_bridge().engine(cfg(100 + i))
    assert get_bridge().engines_open() == (bridge_mod.MAX_ENGINES, 1)
    assert is_open(held)
    c.close()
    del c, held
    gc.collect()
    get_bridge().engine(cfg(500))  # a miss collects: the retired engine no one holds closes
    assert get_bridge().engines_open() == (bridge_mod.MAX_ENGINES, 0)


def test_a_forked_child_neither_counts_nor_closes_its_parents_retired_engines() -> None:
    """The child's copy of an engine the parent retired while holding it is the parent's
    (its connections, its loop): the child's cache does not count it, and the child's
    bridge.close() does not close it."""
    keep = get_bridge().engine(cfg(1))
    for i in range(bridge_mod.MAX_ENGINES):
        get_bridge().engine(cfg(100 + i))
    assert get_bridge().engines_open() == (bridge_mod.MAX_ENGINES, 1)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            seen = get_bridge().engines_open()
            get_bridge().engine(cfg(2))
            get_bridge().close()
            os.write(w, f"{seen} {is_open(keep)}".encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        said = f.read()
    os.waitpid(pid, 0)
    assert said == "(0, 0) True"
    assert is_open(keep)


def test_a_fork_while_another_thread_holds_the_cache_lock_does_not_hang_the_child() -> None:
    """A thread of the parent taking an engine at the moment of a fork (the cache's lock
    held) must not leave the child's cache locked forever (the portal renews its lock)."""
    import signal

    from zerorename.committers.enginecache import engine_cache
    from zerorename.portal import process_portal

    cache = engine_cache(process_portal())
    r, w = os.pipe()
    with cache._lock:  # as another thread in the middle of engine() at fork time
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                signal.alarm(30)
                get_bridge().engine(cfg(3))
                get_bridge().close()
                os.write(w, b"ok")
            finally:
                os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        said = f.read()
    os.waitpid(pid, 0)
    assert said == "ok"


@pytest.mark.xfail(
    strict=True,
    reason="defect left: the portal's own close (process_portal().close(), what runs at "
    "exit) does not close a retired engine a user still holds; only LoopBridge.close() "
    "calls the cache's close_retired (the portal has no hook for it, and a resource of "
    "the cache's own would change the portal's resource counts the bridge tests assert)",
)
def test_the_portals_close_closes_a_retired_engine_still_held() -> None:
    from zerorename.portal import process_portal

    keep = get_bridge().engine(cfg(1))
    for i in range(bridge_mod.MAX_ENGINES):
        get_bridge().engine(cfg(100 + i))
    assert get_bridge().engines_open() == (bridge_mod.MAX_ENGINES, 1)
    process_portal().close()
    assert not is_open(keep)
