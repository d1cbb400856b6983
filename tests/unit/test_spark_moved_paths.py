"""The Spark adapter's folders (issue 21): every module path of before still imports, as the
moved module itself, and what Spark pickles names the new paths (a worker unpickles a class
by its module path, so a pickle naming an old path would tie the workers to the aliases)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from needs import need_module

PACKAGE = "zerorename.spark_adapter"
FOLDER = Path(__file__).resolve().parents[2] / "src" / "zerorename" / "spark_adapter"

#: old module (flat, before issue 21) -> where it lives now
MOVED = {
    "streaming": "stream.writer",
    "streamtask": "stream.task",
    "streamsink": "stream.sink",
    "streamlog": "stream.log",
    "streamread": "stream.read",
    "streamjobs": "stream.jobs",
    "router": "files.router",
    "spill": "files.spill",
    "partitioning": "files.partitioning",
    "formats": "files.formats",
    "csvformat": "files.csvformat",
    "jsonformat": "files.jsonformat",
    "javatext": "files.javatext",
    "jobs": "write",
}


def test_the_aliases_are_exactly_the_moved_modules() -> None:
    """A module of the folder that imports as another module is an alias: MOVED lists each."""
    need_module("pyspark")
    need_module("pyarrow")
    aliases = set()
    for path in sorted(FOLDER.glob("*.py")):
        if path.stem != "__init__":
            name = f"{PACKAGE}.{path.stem}"
            if importlib.import_module(name).__name__ != name:
                aliases.add(path.stem)
    assert aliases == set(MOVED)


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_path_is_the_moved_module(old: str, new: str) -> None:
    if new.startswith("files.") or new in ("stream.writer", "stream.task"):
        need_module("pyarrow" if new.startswith("files.") else "pyspark")
    moved = importlib.import_module(f"{PACKAGE}.{new}")
    assert importlib.import_module(f"{PACKAGE}.{old}") is moved
    assert moved.__name__ == f"{PACKAGE}.{new}"
    namespace: dict[str, Any] = {}
    exec(f"from {PACKAGE}.{old} import *", namespace)  # as old code wrote it, too
    public = getattr(moved, "__all__", [n for n in vars(moved) if not n.startswith("_")])
    assert public
    for name in public:
        assert namespace[name] is getattr(moved, name), name


def test_the_old_paths_that_other_code_imports_give_the_same_objects() -> None:
    """What perf, sim and BENCHMARKS.md still import by the old paths."""
    need_module("pyarrow")
    from zerorename.spark_adapter import write
    from zerorename.spark_adapter.files import router
    from zerorename.spark_adapter.jobs import TaskResult, engine_for, task_id_for
    from zerorename.spark_adapter.router import BatchRouter
    from zerorename.spark_adapter.stream import jobs, log, sink
    from zerorename.spark_adapter.streamjobs import stream_job_action, stream_job_ids
    from zerorename.spark_adapter.streamlog import KEEP, LOG_NAME, STREAMS_DIR, StreamLog
    from zerorename.spark_adapter.streamsink import STREAM_COMMIT, StreamSink, ensure_job

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


def _pickled(obj: Any) -> bytes:
    from pyspark import cloudpickle

    blob: bytes = cloudpickle.dumps(obj)
    return blob


def _old_paths_in(blob: bytes) -> list[str]:
    return [old for old in MOVED if f"{PACKAGE}.{old}".encode() in blob]


def test_what_spark_pickles_names_the_new_paths() -> None:
    """The batch writer and its messages, the stream writer and its messages, and the RDD
    API's task function, pickled as Spark pickles them (cloudpickle; the writers through
    their guarded ``__reduce__``, whose payload holds the class by reference)."""
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
        assert f"{PACKAGE}.{module}".encode() in blob, what
        assert _old_paths_in(blob) == [], what
