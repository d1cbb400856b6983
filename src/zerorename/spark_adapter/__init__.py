"""PySpark integration: the event-loop bridge and the ``zerorename`` data source.

    from zerorename.spark_adapter import register, read_success
    register(spark)
    df.write.format("zerorename").mode("overwrite").option("partitionBy", "day") \\
        .save("s3://bucket/table")
    read_success("s3://bucket/table")       # files, bytes, rows, commit duration
    df.writeStream.format("zerorename").option("checkpointLocation", ckpt).start(uri)
    read_stream_log(uri, ckpt)               # the stream's committed batches

Importing this package imports neither pyspark nor the engine: each name loads its module
on first use, so each of Spark's Python processes loads only what its step needs.

Where the parts are: :mod:`.datasource` (Spark's entry), :mod:`.options` and
:mod:`.commitopts` (the writer's options, parsed once), :mod:`.write` (the committer side
of a write: job setup, the task writer, the job commit), :mod:`.rdd`, :mod:`.success`;
``files/`` turns a task's rows into file bytes; ``stream/`` is the streaming sink;
:mod:`.bridge`, :mod:`.daemon` and :mod:`.workerpython` concern Spark's Python processes.
The flat module names of before (``streamlog``, ``jobs``, ``router``, ...) still import:
each is the moved module itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zerorename.spark_adapter.errors import (
    BridgeError,
    ClusterError,
    CommitMessageError,
    DemoError,
    OptionError,
    SparkAdapterError,
    StreamLogError,
)

if TYPE_CHECKING:
    from zerorename.spark_adapter.bridge import LoopBridge, get_bridge
    from zerorename.spark_adapter.datasource import (
        ZeroRenameCommitMessage,
        ZeroRenameDataSource,
        ZeroRenameWriter,
        activate,
        register,
    )
    from zerorename.spark_adapter.files.router import BatchRouter
    from zerorename.spark_adapter.options import WriteOptions, options_table
    from zerorename.spark_adapter.rdd import OutputFiles, write_partitions
    from zerorename.spark_adapter.stream.log import StreamLog
    from zerorename.spark_adapter.stream.read import Snapshot, committed_files
    from zerorename.spark_adapter.stream.sink import read_stream_log
    from zerorename.spark_adapter.stream.writer import ZeroRenameStreamWriter
    from zerorename.spark_adapter.success import SuccessInfo, read_success

_LAZY = {
    "LoopBridge": "zerorename.spark_adapter.bridge",
    "get_bridge": "zerorename.spark_adapter.bridge",
    "ZeroRenameDataSource": "zerorename.spark_adapter.datasource",
    "ZeroRenameWriter": "zerorename.spark_adapter.datasource",
    "ZeroRenameCommitMessage": "zerorename.spark_adapter.datasource",
    "BatchRouter": "zerorename.spark_adapter.files.router",
    "register": "zerorename.spark_adapter.datasource",
    "activate": "zerorename.spark_adapter.datasource",
    "WriteOptions": "zerorename.spark_adapter.options",
    "options_table": "zerorename.spark_adapter.options",
    "OutputFiles": "zerorename.spark_adapter.rdd",
    "write_partitions": "zerorename.spark_adapter.rdd",
    "SuccessInfo": "zerorename.spark_adapter.success",
    "read_success": "zerorename.spark_adapter.success",
    "ZeroRenameStreamWriter": "zerorename.spark_adapter.stream.writer",
    "StreamLog": "zerorename.spark_adapter.stream.log",
    "read_stream_log": "zerorename.spark_adapter.stream.sink",
    "Snapshot": "zerorename.spark_adapter.stream.read",
    "committed_files": "zerorename.spark_adapter.stream.read",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "BatchRouter",
    "BridgeError",
    "ClusterError",
    "CommitMessageError",
    "DemoError",
    "LoopBridge",
    "OptionError",
    "OutputFiles",
    "Snapshot",
    "SparkAdapterError",
    "StreamLog",
    "StreamLogError",
    "SuccessInfo",
    "WriteOptions",
    "ZeroRenameCommitMessage",
    "ZeroRenameDataSource",
    "ZeroRenameStreamWriter",
    "ZeroRenameWriter",
    "activate",
    "committed_files",
    "get_bridge",
    "options_table",
    "read_stream_log",
    "read_success",
    "register",
    "write_partitions",
]
