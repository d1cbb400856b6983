"""LoopPortal, the one way across threads: one loop per process, reused across calls and
threads, fresh after fork, closed at exit; errors come back unchanged (no server)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from zerorename.errors import ZeroRenameError
from zerorename.portal import LoopPortal, PortalError, process_portal


@pytest.fixture
def portal() -> Iterator[LoopPortal]:
    p = LoopPortal(name="test-portal")
    yield p
    p.close()


async def _loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


async def _thread() -> threading.Thread:
    return threading.current_thread()


def test_same_loop_and_thread_across_calls_and_threads(portal: LoopPortal) -> None:
    loop = portal.run(_loop())
    thread = portal.run(_thread())
    seen: list[tuple[asyncio.AbstractEventLoop, threading.Thread]] = []

    def caller() -> None:
        seen.append((portal.run(_loop()), portal.call(_thread)))

    callers = [threading.Thread(target=caller) for _ in range(6)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert seen == [(loop, thread)] * 6
    assert loop is portal.loop
    assert thread.name == "test-portal" and thread.daemon
    assert portal.loops_started == 1


def test_uvloop_unless_turned_off() -> None:
    uvloop = pytest.importorskip("uvloop")
    on, off = LoopPortal(), LoopPortal(use_uvloop=False)
    try:
        assert isinstance(on.loop, uvloop.Loop)
        assert not isinstance(off.loop, uvloop.Loop)
    finally:
        on.close()
        off.close()


def test_the_coroutine_error_comes_back_unchanged(portal: LoopPortal) -> None:
    original = KeyError("the very one")

    async def boom() -> None:
        await asyncio.sleep(0)
        raise original

    with pytest.raises(KeyError) as caught:
        portal.run(boom())
    assert caught.value is original
    with pytest.raises(KeyError) as again:
        portal.call(boom)
    assert again.value is original
    assert portal.run(_loop()) is portal.loop  # the loop survives


def test_waiting_on_the_loop_from_the_loop_is_refused(portal: LoopPortal) -> None:
    async def nested() -> str:
        assert portal.in_loop_thread()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the refused coroutine is closed, not leaked
            try:
                portal.run(_loop())
            except PortalError as exc:
                return str(exc)
        return "no error"

    assert "loop thread" in portal.run(nested())
    assert not portal.in_loop_thread()
    assert issubclass(PortalError, ZeroRenameError)


def test_close_closes_resources_newest_first_and_restarts_on_use(portal: LoopPortal) -> None:
    events: list[str] = []

    def res(name: str):  # type: ignore[no-untyped-def]
        @asynccontextmanager
        async def cm() -> AsyncIterator[str]:
            events.append(f"open {name}")
            yield name
            events.append(f"close {name}")

        return cm()

    assert portal.resource("a", lambda: res("a")) == "a"
    assert portal.resource("a", lambda: res("a")) == "a"
    portal.resource("b", lambda: res("b"))
    assert portal.resource_keys() == ["a", "b"]
    first = portal.loop
    portal.close()
    portal.close()  # idempotent
    assert events == ["open a", "open b", "close b", "close a"]
    assert not portal.is_running() and first.is_closed()
    assert portal.run(_loop()) is not first
    assert portal.loops_started == 2 and portal.resource_count() == 0


async def test_attach_runs_on_a_loop_someone_else_runs() -> None:
    """An async program's own loop: threads cross into it; closing the portal closes its
    resources but leaves the loop running."""
    loop = asyncio.get_running_loop()
    portal = LoopPortal.attach(loop)
    assert portal.in_loop_thread()
    with pytest.raises(PortalError, match="loop thread"):
        portal.run(_loop())
    closed: list[bool] = []

    @asynccontextmanager
    async def res() -> AsyncIterator[int]:
        yield 7
        closed.append(True)

    assert await asyncio.to_thread(portal.run, _loop()) is loop
    assert await asyncio.to_thread(portal.resource, "r", res) == 7
    await asyncio.to_thread(portal.close)
    assert closed == [True] and not loop.is_closed()
    assert portal.loops_started == 0  # it never made a loop of its own


def _script(body: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )


def test_a_forked_child_gets_its_own_loop(tmp_path: Path) -> None:
    """The parent's loop thread does not exist in the child: the child starts a fresh
    loop on first use (even while the parent's loop was busy at fork time) and the parent
    keeps its own."""
    proc = _script(
        """
        import asyncio, os, threading
        from zerorename.portal import process_portal

        async def ident():
            return (os.getpid(), threading.current_thread(), asyncio.get_running_loop())

        p = process_portal()
        parent = p.run(ident())  # kept alive: the child's loop cannot take its id
        busy = p.start(asyncio.sleep(0.5))  # the parent's loop is busy at fork time
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                child = p.run(ident(), timeout=20)
                ok = (
                    child[0] == os.getpid()
                    and child[1] is not parent[1]
                    and child[2] is not parent[2]
                    and p.loops_started == 1
                )
                os.write(w, b"child-ok" if ok else repr(child).encode())
                p.close(timeout=10)
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        _, status = os.waitpid(pid, 0)
        print(os.read(r, 200).decode(), os.waitstatus_to_exitcode(status))
        busy.result(10)
        print("parent-ok" if p.run(ident()) == parent and p.loops_started == 1 else "parent-bad")
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["child-ok", "0", "parent-ok"]


def test_exit_closes_the_process_portal_without_hanging(tmp_path: Path) -> None:
    """A program that never closes the portal still exits (the loop thread is a daemon)
    and its resources are closed at exit, even with a task still pending on the loop."""
    proc = _script(
        """
        import asyncio
        from contextlib import asynccontextmanager
        from zerorename.portal import process_portal

        @asynccontextmanager
        async def res():
            yield 1
            await asyncio.sleep(0.1)
            open("closed", "w").write("closed")

        async def forever():
            await asyncio.sleep(3600)

        p = process_portal()
        p.resource("r", res)
        pending = p.start(forever())
        print("ok")
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
    assert (tmp_path / "closed").read_text() == "closed"


def test_the_process_portal_is_shared_by_spark_and_the_sync_committer() -> None:
    """get_bridge() and SyncCommitter cross on the same loop: one loop thread per process,
    one engine cache (a facade's engine is the bridge's for its configuration), and a
    facade's hold on it is a portal resource closed with the facade."""
    from zerorename.committers.sync import SyncCommitter
    from zerorename.engine import EngineConfig
    from zerorename.spark_adapter.bridge import get_bridge

    cfg = EngineConfig(endpoint_url="http://127.0.0.1:9", region="us-east-1")
    with SyncCommitter("magic", "s3://bucket/table", cfg) as c:
        assert c.run(_loop()) is get_bridge().loop is process_portal().loop
        assert sum(k[0] == "SyncCommitter" for k in process_portal().resource_keys()) == 1
        assert c.engine is get_bridge().engine(cfg)
    assert all(k[0] != "SyncCommitter" for k in process_portal().resource_keys())
    assert process_portal().is_running()  # the loop stays for the process's other users
