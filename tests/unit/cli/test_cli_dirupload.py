"""zerorename.dirupload on the in-memory store: the first walk's judgement of names (pure),
and a directory of 3,000 empty files committed as one job with bounded open files and
task records (issue 25 item 4). The CLI over HTTP: tests/integration/test_cli_dir.py."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerorename.cli.dirupload import (
    FILES_PER_TASK,
    DirectoryRefused,
    DirectoryUploadFailed,
    Entry,
    Problem,
    name_problem,
    upload_directory,
    walk,
)
from zerorename.committers import Destination, new_job_id
from zerorename.testing.memstore import MemoryState, MemoryStore

B = "bkt"
JOB = new_job_id()
DEST = Destination.parse(f"s3://{B}/up")


@settings(deadline=None)  # a loaded 2-core machine: no timing in tests
@given(st.text(max_size=40))
def test_a_name_is_judged_in_one_line_or_passes(rel: str) -> None:
    why = name_problem(rel, DEST, JOB)
    if why is None:
        rel.encode("utf-8")  # what passes is a valid key
        assert not any(ord(c) < 32 or ord(c) == 127 for c in rel)
        assert len(DEST.key(rel).encode()) + 37 <= 1024
    else:
        assert "\n" not in why and why


@pytest.mark.parametrize(
    ("rel", "said"),
    [
        ("a\x1bb", "control character"),
        ("a/\udcff.bin", "not UTF-8"),
        ("_SUCCESS", "reserved"),
        ("a/../b", "'..'"),
        ("x.pendingset", "record suffix"),
        ("d/" + "n" * 950, "too long"),
    ],
)
def test_names_s3_or_the_job_cannot_hold(rel: str, said: str) -> None:
    why = name_problem(rel, DEST, JOB)
    assert why is not None and said in why


def test_the_walk_names_what_is_not_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"abc")
    os.symlink("d/f", tmp_path / "link")
    os.mkfifo(tmp_path / "fifo")
    got = {(type(x).__name__, x.rel) for x in walk(tmp_path)}
    assert got == {("Entry", "d/f"), ("Problem", "link"), ("Problem", "fifo")}
    (entry,) = (x for x in walk(tmp_path) if isinstance(x, Entry))
    assert entry.size == 3


async def test_problems_refuse_before_any_request(tmp_path: Path) -> None:
    (tmp_path / "ok").write_bytes(b"x")
    os.mkfifo(tmp_path / "fifo")
    store = MemoryStore(MemoryState(B))
    lines: list[str] = []
    with pytest.raises(DirectoryRefused, match=r"1 entries .* nothing was uploaded"):
        await upload_directory(store, tmp_path, f"s3://{B}/up", report=lines.append)
    assert lines == ["fifo: a fifo, not a regular file"] and store.log == []


async def test_three_thousand_empty_files_are_one_job(tmp_path: Path) -> None:
    """Past one task's FILES_PER_TASK files and one listing page (1,000 keys each), over
    10 directories: one job of a task per 1,000 files, at most files_at_once open."""
    n = 3_000
    for d in range(10):
        (tmp_path / f"d{d}").mkdir()
        for i in range(n // 10):
            (tmp_path / f"d{d}" / f"e{i}").touch()
    store = MemoryStore(MemoryState(B))
    fds = len(os.listdir("/proc/self/fd"))
    most = 0
    done = False

    async def sample() -> None:
        nonlocal most
        while not done:
            most = max(most, len(os.listdir("/proc/self/fd")) - fds)
            await anyio.sleep(0.02)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        res = await upload_directory(store, tmp_path, f"s3://{B}/many", files_at_once=4)
        done = True
    assert (res.files, res.bytes, res.commit.files) == (n, 0, n)
    assert res.commit.pendingsets == n // FILES_PER_TASK  # a task's records, then the next
    keys = [o.key async for o in store.list_objects(B, "many/")]
    assert len(keys) == n + 1 and "many/_SUCCESS" in keys
    assert [u async for u in store.list_uploads(B, "many/")] == []
    assert most <= 4 + 4, most  # files open at once (and a directory iterator or so)


def test_problem_lines_are_one_inert_line() -> None:
    assert Problem("a\nb\x1b", "x").line() == "a\\x0ab\\x1b: x"


def test_a_key_past_1024_bytes_with_the_job_id() -> None:
    deep = Destination.parse(f"s3://{B}/" + "p" * 200)
    why = name_problem("n" * 850, deep, JOB)
    assert why is not None and "1024-byte limit" in why


async def test_a_failed_upload_aborts_the_job(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"f{i}").write_bytes(b"z" * i)
    store = MemoryStore(MemoryState(B))
    store.fail_at(20, OSError("connection reset"), op="UploadPart")
    with pytest.raises(DirectoryUploadFailed, match="was aborted: nothing is visible or pending"):
        await upload_directory(store, tmp_path, f"s3://{B}/up")
    assert [o.key async for o in store.list_objects(B, "")] == []
    assert [u async for u in store.list_uploads(B, "")] == []
