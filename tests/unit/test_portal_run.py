"""A second Ctrl-C that lands inside a clean-up's task group (the first started the
clean-up) ends the run with one KeyboardInterrupt and no traceback: at shutdown asyncio
would log the clean-up task, ended by a BaseExceptionGroup of that KeyboardInterrupt, as
"unhandled exception during asyncio.run() shutdown" with its whole traceback (seen once in
ten runs of tests/integration/test_cli_interrupt_cleanup.py under load)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from zerorename.portal import interrupt_only

SCRIPT = """
import asyncio, sys
import anyio
from zerorename.engine import run

async def main():
    async def hit():  # the second Ctrl-C, raised inside one of the clean-up's tasks
        await asyncio.sleep(0)
        raise KeyboardInterrupt

    async def clean_up():
        async with anyio.create_task_group() as tg:
            tg.start_soon(hit)
            await anyio.sleep(60)

    asyncio.ensure_future(clean_up())
    await asyncio.sleep(60)

try:
    run(main())
except KeyboardInterrupt:
    print("zerorename: interrupted", file=sys.stderr)
    sys.exit(130)
"""


def test_a_ctrl_c_inside_a_task_group_at_shutdown_logs_no_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines() == ["zerorename: interrupted"], done.stderr


@pytest.mark.parametrize(
    ("exc", "quiet"),
    [
        (KeyboardInterrupt(), True),
        (BaseExceptionGroup("g", [KeyboardInterrupt()]), True),
        (BaseExceptionGroup("g", [KeyboardInterrupt(), asyncio.CancelledError()]), True),
        (BaseExceptionGroup("g", [BaseExceptionGroup("h", [KeyboardInterrupt()])]), True),
        (BaseExceptionGroup("g", [asyncio.CancelledError()]), False),
        (BaseExceptionGroup("g", [KeyboardInterrupt(), ValueError("x")]), False),
        (ValueError("x"), False),
        (None, False),
    ],
)
def test_only_a_ctrl_c_is_kept_quiet(exc: BaseException | None, quiet: bool) -> None:
    assert interrupt_only(exc) is quiet
