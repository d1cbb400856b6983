"""The old paths of moved modules (issue 21), one table (``zerorename._moved.MOVED``): every
old path imports as the moved module itself (so a test that patches a name through an old
path patches the module the code runs), the table holds exactly the moved ones (no old path
is a file, every new one is), what other code still imports by an old path gives the same
objects, nothing Spark pickles or the harness starts names an old path, and ``python -m``
runs a moved package by either path."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from needs import need_module
from zerorename._moved import MOVED

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT = SRC / "zerorename"


def _needs_for(new: str) -> None:
    """Skip (or fail under CI=true) a moved module whose import needs an extra."""
    if new.startswith("zerorename.spark_adapter.files."):
        need_module("pyarrow")
    elif new in ("zerorename.spark_adapter.stream.writer", "zerorename.spark_adapter.stream.task"):
        need_module("pyspark")


def _file_of(module: str) -> Path | None:
    """The file (or package folder) that is ``module`` in src/, else None."""
    path = SRC.joinpath(*module.split("."))
    if (path / "__init__.py").is_file():
        return path
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


def test_the_table_lists_exactly_the_moved_modules() -> None:
    """An old path is no file (a file there would be hidden by the table, or be a second
    copy), every new path is one, and no row leads to another old path."""
    assert MOVED
    assert all(old.startswith("zerorename.") for old in MOVED)
    files = sorted(old for old in MOVED if _file_of(old) is not None)
    assert not files, f"old paths that are files (delete them): {files}"
    missing = sorted(new for new in MOVED.values() if _file_of(new) is None)
    assert not missing, f"rows leading to no module: {missing}"
    assert not set(MOVED.values()) & set(MOVED), "a row leads to another old path"


def _row_of_alias(path: Path) -> str:
    """The row of the table that replaces an alias file of the old form (``from new.pkg
    import mod as _moved`` ... ``sys.modules[__name__] = _moved``)."""
    parts = path.relative_to(SRC).with_suffix("").parts
    old = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    body = ast.parse(path.read_text()).body
    bound = next(
        ast.unparse(s.value)
        for s in body
        if isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == "sys.modules[__name__]"
    )
    for node in body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == bound:
                    return f'    "{old}": "{node.module}.{alias.name}",'
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname == bound:
                    return f'    "{old}": "{alias.name}",'
    return f'    "{old}": "?",'


def test_no_module_stands_for_another() -> None:
    """No module of src/ is the old form of an alias (``sys.modules[__name__] = moved``): an
    old path is a row of the table, nothing else. (The failure lists the rows to add to
    ``MOVED`` before deleting those files.)"""
    found = sorted(
        path
        for path in ROOT.rglob("*.py")
        if re.search(r"^sys\.modules\[__name__\]\s*=", path.read_text(), re.M)
    )
    rows = "\n".join(_row_of_alias(path) for path in found)
    assert not found, f"alias files: delete them, and add to zerorename/_moved.py:\n{rows}"


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_path_is_the_moved_module(old: str, new: str) -> None:
    _needs_for(new)
    moved = importlib.import_module(new)
    assert importlib.import_module(old) is moved
    assert sys.modules[old] is moved
    parent, _, leaf = old.rpartition(".")
    assert getattr(importlib.import_module(parent), leaf) is moved  # the package's attribute
    assert moved.__name__ == new
    namespace: dict[str, Any] = {}
    exec(f"from {old} import *", namespace)  # as old code wrote it, too
    public = getattr(moved, "__all__", [n for n in vars(moved) if not n.startswith("_")])
    assert public
    for name in public:
        assert namespace[name] is getattr(moved, name), name


def test_a_submodule_of_a_moved_package_is_the_moved_one() -> None:
    """``zerorename.testing.sink`` moved as a package: its modules follow it (one copy)."""
    from zerorename.servers.sink import server

    assert importlib.import_module("zerorename.testing.sink.server") is server
    assert server.__name__ == "zerorename.servers.sink.server"


def test_a_patch_through_an_old_path_reaches_the_moved_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What tests do with ``monkeypatch.setattr("zerorename.committers.<old>.X", ...)``."""
    from zerorename.committers.commit import window

    marker = object()
    monkeypatch.setattr("zerorename.committers.window.CompletionWindow", marker)
    assert window.CompletionWindow is marker


def test_the_old_committers_paths_that_other_code_imports_give_the_same_objects() -> None:
    """What the CLI (committers/cli.py, cmdclaim.py), testing/s3acrash.py and the tests still
    import by the old paths, private names included."""
    from zerorename.committers.commitlock import LockLost, held_by_job
    from zerorename.committers.jobcommit import CommitProgress, JobCommitRun
    from zerorename.committers.records import PendingRecord, SuccessData, read_pendingset
    from zerorename.committers.s3ajobs import list_s3a_jobs
    from zerorename.committers.s3alayout import S3AJobLayout, s3a_id_problem
    from zerorename.committers.spool import PendingSetCache
    from zerorename.committers.validate import Fields, load_json

    from zerorename.committers.codec import pending, validate
    from zerorename.committers.commit import lock, run, spool
    from zerorename.committers.s3a import jobs, layout

    pairs = [
        (LockLost, lock.LockLost),
        (held_by_job, lock.held_by_job),
        (CommitProgress, run.CommitProgress),
        (JobCommitRun, run.JobCommitRun),
        (PendingRecord, pending.PendingRecord),
        (SuccessData, pending.SuccessData),
        (read_pendingset, pending.read_pendingset),
        (list_s3a_jobs, jobs.list_s3a_jobs),
        (S3AJobLayout, layout.S3AJobLayout),
        (s3a_id_problem, layout.s3a_id_problem),
        (PendingSetCache, spool.PendingSetCache),
        (Fields, validate.Fields),
        (load_json, validate.load_json),
    ]
    assert all(old is new for old, new in pairs)


def test_the_old_spark_adapter_paths_that_other_code_imports_give_the_same_objects() -> None:
    """What perf, sim and BENCHMARKS.md still import by the old paths."""
    need_module("pyarrow")
    from zerorename.spark_adapter.jobs import TaskResult, engine_for, task_id_for
    from zerorename.spark_adapter.router import BatchRouter
    from zerorename.spark_adapter.streamjobs import stream_job_action, stream_job_ids
    from zerorename.spark_adapter.streamlog import KEEP, LOG_NAME, STREAMS_DIR, StreamLog
    from zerorename.spark_adapter.streamsink import STREAM_COMMIT, StreamSink, ensure_job

    from zerorename.spark_adapter import write
    from zerorename.spark_adapter.files import router
    from zerorename.spark_adapter.stream import jobs, log, sink

    pairs = [
        (BatchRouter, router.BatchRouter),
        (TaskResult, write.TaskResult),
        (engine_for, write.engine_for),
        (task_id_for, write.task_id_for),
        (stream_job_action, jobs.stream_job_action),
        (stream_job_ids, jobs.stream_job_ids),
        (KEEP, log.KEEP),
        (LOG_NAME, log.LOG_NAME),
        (STREAMS_DIR, log.STREAMS_DIR),
        (StreamLog, log.StreamLog),
        (STREAM_COMMIT, sink.STREAM_COMMIT),
        (StreamSink, sink.StreamSink),
        (ensure_job, sink.ensure_job),
    ]
    assert all(old is new for old, new in pairs)


def test_the_old_names_that_tests_and_users_import_give_the_same_objects() -> None:
    from zerorename.testing.faultproxy import FaultProxy as OldFaultProxy
    from zerorename.testing.servers import MotoServer as OldMotoServer
    from zerorename.testing.servers import RgwServer as OldRgwServer
    from zerorename.testing.sink import SinkServer as OldSinkServer
    from zerorename.testing.targets import S3Target

    from zerorename import servers, testing
    from zerorename.servers.errors import RgwNotInstalled, ServerStartError, TestingError
    from zerorename.servers.faultproxy import FaultProxy
    from zerorename.servers.servers import MotoServer, RgwServer
    from zerorename.servers.sink import SinkServer
    from zerorename.servers.targets import Target

    pairs = [
        (OldFaultProxy, FaultProxy),
        (OldMotoServer, MotoServer),
        (OldRgwServer, RgwServer),
        (OldSinkServer, SinkServer),
        (S3Target, Target),
        (testing.TestingError, TestingError),
        (testing.ServerStartError, ServerStartError),
        (testing.RgwNotInstalled, RgwNotInstalled),
        (servers.TestingError, TestingError),
    ]
    assert all(old is new for old, new in pairs)


def test_the_package_exports_load_from_the_new_paths() -> None:
    """``from zerorename.committers import X`` (the README's imports) loads X's module by its
    new path: the lazy table names no old path."""
    import zerorename.committers as committers

    lazy: dict[str, str] = vars(committers)["_LAZY"]
    assert not {f"zerorename.committers.{m}" for m in lazy.values()} & set(MOVED)
    for name, module in sorted(lazy.items()):
        assert getattr(committers, name) is getattr(
            importlib.import_module(f"zerorename.committers.{module}"), name
        ), name


def test_the_perf_children_are_started_by_the_new_paths() -> None:
    """Every module named in a string in perf/ (a measure function ``module:function`` run
    in a child, ``python -m module``) is a path that exists as a module, and none is an
    old path: the child imports the module itself, and runs its main."""
    named = set()
    for path in sorted((ROOT / "perf").rglob("*.py")):
        named |= set(re.findall(r"[\"'](zerorename\.perf[\w.]*)[:\"']", path.read_text()))
    assert named, "no module named by a string in perf/"
    old = sorted(named & set(MOVED))
    assert not old, f"old paths named: {old}"
    for module in sorted(named):
        assert importlib.import_module(module).__name__ == module


def _pickled(obj: Any) -> bytes:
    from pyspark import cloudpickle

    blob: bytes = cloudpickle.dumps(obj)
    return blob


def _old_paths_in(blob: bytes) -> list[str]:
    return [old for old in MOVED if re.search(re.escape(old.encode()) + rb"(?!\w)", blob)]


def test_what_spark_pickles_names_the_new_paths() -> None:
    """The batch writer and its messages, the stream writer and its messages, and the RDD
    API's task function, pickled as Spark pickles them (cloudpickle; the writers through
    their guarded ``__reduce__``, whose payload holds the class by reference): a worker
    unpickles a class by its module path, so none may be an old one."""
    need_module("pyspark")
    need_module("pyarrow")
    from pyspark.sql.types import LongType, StructField, StructType

    from zerorename.spark_adapter.datasource import (
        ZeroRenameCommitMessage,
        ZeroRenameDataSource,
        ZeroRenameWriter,
    )
    from zerorename.spark_adapter.options import WriteOptions
    from zerorename.spark_adapter.rdd import _task_fn
    from zerorename.spark_adapter.stream.writer import StreamCommitMessage
    from zerorename.spark_adapter.write import TaskResult

    opts = WriteOptions.parse({"path": "s3://bucket/t"})
    result = TaskResult(0, 0, 0, rows=5, files=1, bytes=10, summary=None)
    schema = StructType([StructField("id", LongType())])
    stream_writer = ZeroRenameDataSource(
        {"path": "s3://bucket/t", "checkpointLocation": "/tmp/ck"}
    ).streamWriter(schema, False)

    def write(index: int, rows: Any, out: Any) -> None:
        pass

    shipped = {
        "the batch writer": (ZeroRenameWriter(opts, "job"), "datasource"),
        "a task's message": (ZeroRenameCommitMessage(result), "write"),
        "the stream writer": (stream_writer, "stream.writer"),
        "a stream task's message": (StreamCommitMessage(result, "q", 3, "j"), "stream.writer"),
        "the RDD API's task": (_task_fn(opts, "job", write), "write"),
    }
    for what, (obj, module) in shipped.items():
        blob = _pickled(obj)
        assert f"zerorename.spark_adapter.{module}".encode() in blob, what
        assert _old_paths_in(blob) == [], what


def test_what_the_committers_ship_to_spark_names_no_old_path() -> None:
    """The batch writer with a replace, a task's message and the stream writer, pickled as
    Spark pickles them: no committers path of before appears."""
    need_module("pyspark")
    need_module("pyarrow")
    from pyspark.sql.types import LongType, StructField, StructType

    from zerorename.spark_adapter.datasource import (
        ZeroRenameCommitMessage,
        ZeroRenameDataSource,
        ZeroRenameWriter,
    )
    from zerorename.spark_adapter.options import WriteOptions
    from zerorename.spark_adapter.write import TaskResult

    opts = WriteOptions.parse({"path": "s3://bucket/t", "conflict": "replace"})
    result = TaskResult(0, 0, 0, rows=5, files=1, bytes=10, summary=None)
    schema = StructType([StructField("id", LongType())])
    stream_writer = ZeroRenameDataSource(
        {"path": "s3://bucket/t", "checkpointLocation": "/tmp/ck"}
    ).streamWriter(schema, False)
    for obj in (ZeroRenameWriter(opts, "job"), ZeroRenameCommitMessage(result), stream_writer):
        assert _old_paths_in(_pickled(obj)) == [], type(obj).__name__


@pytest.mark.parametrize("module", ["zerorename.servers.sink", "zerorename.testing.sink"])
def test_python_m_runs_the_sink_by_either_path(module: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "usage: python -m zerorename.servers.sink" in out.stdout
