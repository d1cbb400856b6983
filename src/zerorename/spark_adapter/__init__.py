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
    from zerorename.spark_adapter.options import WriteOptions, options_table
    from zerorename.spark_adapter.rdd import OutputFiles, write_partitions
    from zerorename.spark_adapter.router import BatchRouter
    from zerorename.spark_adapter.streaming import ZeroRenameStreamWriter
    from zerorename.spark_adapter.streamlog import StreamLog
    from zerorename.spark_adapter.streamread import Snapshot, committed_files
    from zerorename.spark_adapter.streamsink import read_stream_log
    from zerorename.spark_adapter.success import SuccessInfo, read_success

_LAZY = {
    "LoopBridge": "zerorename.spark_adapter.bridge",
    "get_bridge": "zerorename.spark_adapter.bridge",
    "ZeroRenameDataSource": "zerorename.spark_adapter.datasource",
    "ZeroRenameWriter": "zerorename.spark_adapter.datasource",
    "ZeroRenameCommitMessage": "zerorename.spark_adapter.datasource",
    "BatchRouter": "zerorename.spark_adapter.router",
    "register": "zerorename.spark_adapter.datasource",
    "activate": "zerorename.spark_adapter.datasource",
    "WriteOptions": "zerorename.spark_adapter.options",
    "options_table": "zerorename.spark_adapter.options",
    "OutputFiles": "zerorename.spark_adapter.rdd",
    "write_partitions": "zerorename.spark_adapter.rdd",
    "SuccessInfo": "zerorename.spark_adapter.success",
    "read_success": "zerorename.spark_adapter.success",
    "ZeroRenameStreamWriter": "zerorename.spark_adapter.streaming",
    "StreamLog": "zerorename.spark_adapter.streamlog",
    "read_stream_log": "zerorename.spark_adapter.streamsink",
    "Snapshot": "zerorename.spark_adapter.streamread",
    "committed_files": "zerorename.spark_adapter.streamread",
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
