"""LoopBridge: one loop thread per process, reused, fork-safe, closed at exit (no Spark)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest

from zerorename.spark_adapter.bridge import BridgeError, LoopBridge


@pytest.fixture
def bridge() -> Iterator[LoopBridge]:
    b = LoopBridge()
    yield b
    b.close()


async def _add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


async def _thread_name() -> str:
    return threading.current_thread().name


def test_run_returns_result_on_loop_thread(bridge: LoopBridge) -> None:
    assert bridge.run(_add(2, 3)) == 5
    assert bridge.run(_thread_name()) == "zerorename-loop"
    assert bridge.is_running()


def test_uvloop_used_when_available(bridge: LoopBridge) -> None:
    uvloop = pytest.importorskip("uvloop")
    assert isinstance(bridge.loop, uvloop.Loop)
    plain = LoopBridge(use_uvloop=False)
    try:
        assert not isinstance(plain.loop, uvloop.Loop)
    finally:
        plain.close()


def test_run_raises_the_coroutine_error(bridge: LoopBridge) -> None:
    async def boom() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        bridge.run(boom())
    assert bridge.run(_add(1, 1)) == 2  # the loop survives


def test_timeout_cancels_the_coroutine(bridge: LoopBridge) -> None:
    cancelled = threading.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    # slow() would finish after 30 s with no error: the TimeoutError, and slow() seeing its
    # cancellation, show that the timeout ended it (no clock read)
    with pytest.raises(TimeoutError):
        bridge.run(slow(), timeout=0.2)
    assert cancelled.wait(60)


def test_run_from_loop_thread_is_refused(bridge: LoopBridge) -> None:
    async def nested() -> str:
        inner = _add(1, 2)
        try:
            bridge.run(inner)
        except BridgeError as exc:
            return str(exc)
        return "no error"

    assert "loop thread" in bridge.run(nested())


def test_one_thread_reused_across_many_calls_and_threads(bridge: LoopBridge) -> None:
    bridge.run(_add(0, 0))
    before = threading.active_count()
    for i in range(500):
        assert bridge.run(_add(i, 1)) == i + 1
    callers = [threading.Thread(target=lambda: bridge.run(_add(1, 1))) for _ in range(8)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert threading.active_count() == before
    assert bridge.loops_started == 1


def test_loop_thread_is_daemon(bridge: LoopBridge) -> None:
    bridge.run(_add(0, 0))
    loop_threads = [t for t in threading.enumerate() if t.name == "zerorename-loop"]
    assert loop_threads and all(t.daemon for t in loop_threads)


def test_resources_created_once_per_key_and_closed_in_reverse(bridge: LoopBridge) -> None:
    events: list[str] = []

    def factory(name: str):  # type: ignore[no-untyped-def]
        @asynccontextmanager
        async def cm() -> AsyncIterator[str]:
            events.append(f"open {name}")
            yield name.upper()
            events.append(f"close {name}")

        return cm()

    assert bridge.resource("a", lambda: factory("a")) == "A"
    assert bridge.resource("a", lambda: factory("a")) == "A"
    assert bridge.resource("b", lambda: factory("b")) == "B"
    assert bridge.resource_count() == 2
    bridge.close()
    assert events == ["open a", "open b", "close b", "close a"]
    assert not bridge.is_running()
    # usable again after close: a fresh loop
    assert bridge.run(_add(1, 2)) == 3
    assert bridge.resource_count() == 0


def test_resources_shared_between_threads(bridge: LoopBridge) -> None:
    opened: list[int] = []

    @asynccontextmanager
    async def cm() -> AsyncIterator[object]:
        await asyncio.sleep(0.05)
        opened.append(1)
        yield object()

    got: list[object] = []
    threads = [
        threading.Thread(target=lambda: got.append(bridge.resource("k", cm))) for _ in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(opened) == 1
    assert len({id(x) for x in got}) == 1


def test_close_is_idempotent_and_survives_failing_resource(bridge: LoopBridge) -> None:
    @asynccontextmanager
    async def bad() -> AsyncIterator[int]:
        yield 1
        raise RuntimeError("close failed")

    bridge.resource("bad", bad)
    bridge.close()
    bridge.close()
    assert not bridge.is_running()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_gets_a_fresh_loop_in_the_child() -> None:
    from zerorename.spark_adapter.bridge import get_bridge

    b = get_bridge()
    parent_thread = b.run(_thread_ident())
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: the parent's loop thread does not exist here
        code = 1
        try:
            child_thread = b.run(_thread_ident(), timeout=10)
            ok = b.run(_add(20, 22), timeout=10) == 42 and b.loops_started == 1
            os.write(w, f"{child_thread} {int(ok)}".encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    out = os.read(r, 100).decode().split()
    os.close(r)
    assert os.waitstatus_to_exitcode(status) == 0
    assert out[1] == "1"
    assert b.run(_thread_ident()) == parent_thread  # parent untouched


async def _thread_ident() -> int:
    return threading.get_ident() ^ os.getpid()


def test_process_exits_promptly_and_closes_resources(tmp_path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "closed"
    script = textwrap.dedent(
        f"""
        import asyncio
        from contextlib import asynccontextmanager
        from zerorename.spark_adapter.bridge import get_bridge

        @asynccontextmanager
        async def res():
            yield 1
            await asyncio.sleep(0.1)
            open({str(marker)!r}, "w").write("closed")

        async def forever():
            await asyncio.sleep(3600)

        b = get_bridge()
        b.resource("r", res)
        b.loop.call_soon_threadsafe(lambda: b.loop.create_task(forever()))
        print("ok")
        """
    )
    # the forever task sleeps an hour: an exit that waited for it would hit this guard (a
    # hang guard, far above any machine's start-up time, not a measurement)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
    assert marker.read_text() == "closed"


def test_engines_per_config_reused_and_bounded(bridge: LoopBridge) -> None:
    from zerorename.engine import EngineConfig
    from zerorename.spark_adapter import bridge as bridge_mod

    a = bridge.engine(EngineConfig(endpoint_url="http://127.0.0.1:9", region="us-east-1"))
    again = bridge.engine(EngineConfig(endpoint_url="http://127.0.0.1:9", region="us-east-1"))
    assert a is again and bridge.resource_count() == 1
    engines = [
        bridge.engine(EngineConfig(endpoint_url=f"http://127.0.0.1:{port}", region="us-east-1"))
        for port in range(10, 10 + bridge_mod.MAX_ENGINES + 3)
    ]
    assert bridge.resource_count() == bridge_mod.MAX_ENGINES
    assert engines[-1] is bridge.engine(engines[-1].config)
