"""A streaming ``zerorename`` sink that fails on purpose, for the streaming tests.

Options: ``fault`` (commit: raise after the sink committed the batch, before Spark
records it | task: raise in a task after its attempt committed | commitexit, taskexit:
the Python worker exits there instead), ``faultbatch`` (the
batch id), ``faultonce`` (a local file: the fault fires only while it does not exist, and
creates it). ``fault=sleep`` (speculation): the attempts ``faultattempts`` (comma-separated)
of partition ``faultpartition`` in batch ``faultbatch`` wait after their task commit
until another attempt of the partition marked its commit (at most ``faultseconds``; a sleep
without ``faultmark``), and write their rows with the partition column ``faultrelabel``
(if given) set to ``loser`` (another directory, so their files are told apart from the winner's);
``faultmark`` (a destination URI): every attempt marks ``b<batch>-p<partition>-a<attempt>-
committed`` there after its task commit. Pickled by value (not importable in Spark's Python
workers).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from pyspark import cloudpickle

from zerorename.spark_adapter.datasource import ZeroRenameDataSource
from zerorename.spark_adapter.stream.writer import ZeroRenameStreamWriter

FAULT_KEYS = (
    "fault",
    "faultbatch",
    "faultonce",
    "faultpartition",
    "faultattempts",
    "faultseconds",
    "faultrelabel",
    "faultmark",
)


class FaultyStreamWriter(ZeroRenameStreamWriter):
    fault: dict[str, str]

    def _slow(self, batch_id: int, partition: int, attempt: int) -> bool:
        """Is this the attempt that sleeps (``fault=sleep``)?"""
        f = self.fault
        return (
            f.get("fault") == "sleep"
            and batch_id == int(f.get("faultbatch", "0"))
            and partition == int(f.get("faultpartition", "0"))
            and str(attempt) in f.get("faultattempts", "0").split(",")
        )

    def write(self, iterator: Iterator[Any]) -> Any:
        from pyspark import TaskContext

        column = self.fault.get("faultrelabel")
        tc = TaskContext.get()
        if tc is not None:
            batch = int(tc.getLocalProperty("streaming.sql.batchId") or -1)
            partition, attempt = tc.partitionId(), tc.attemptNumber()
            if column and self._slow(batch, partition, attempt):
                iterator = (_relabel(b, column) for b in iterator)
            elif self._slow(batch, partition, 0) and attempt != 0:
                # a copy of the slow attempt commits only after it did: both commit, and
                # the copy finishes first
                self._wait_for_a_copy(batch, partition, attempt)
        return super().write(iterator)

    def checkpoint(self, stage: str, batch_id: int, partition: int, attempt: int) -> None:
        f = self.fault
        if stage == "committed" and f.get("faultmark"):
            self._mark(f["faultmark"], f"b{batch_id}-p{partition}-a{attempt}-committed")
        if stage == "committed" and self._slow(batch_id, partition, attempt):
            self._wait_for_a_copy(batch_id, partition, attempt)
            return
        fault = f.get("fault", "commit")
        if fault == "sleep":
            return
        want = "committed" if fault.startswith("task") else "batch_committed"
        if stage != want or batch_id != int(f.get("faultbatch", "0")):
            return
        if stage == "committed" and partition != int(f.get("faultpartition", "0")):
            return
        once = f.get("faultonce")
        if once:
            try:
                fd = os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.close(fd)
        if fault.endswith("exit"):
            os._exit(3)  # the Python worker dies: no finally, no abort of its own
        raise RuntimeError(f"injected failure at {stage} of batch {batch_id}")

    def _wait_for_a_copy(self, batch_id: int, partition: int, attempt: int) -> None:
        """Return once another attempt of the partition committed its task (its mark is
        listed), or after ``faultseconds``. The slow attempt waits for its copy, and the
        copy (before it writes) for the slow attempt: both commit their tasks and Spark
        accepts the copy, however long the loaded machine takes to launch it."""
        from zerorename.committers import Destination
        from zerorename.spark_adapter.bridge import get_bridge
        from zerorename.spark_adapter.write import engine_for

        f = self.fault
        if not f.get("faultmark"):
            time.sleep(float(f.get("faultseconds", "20")))
            return
        dest = Destination.parse(f["faultmark"])
        prefix = dest.key(f"b{batch_id}-p{partition}-a")
        mine = dest.key(f"b{batch_id}-p{partition}-a{attempt}-committed")
        engine = engine_for(self.opts)

        async def copies() -> list[str]:
            return [
                o.key
                async for o in engine.list_objects(dest.bucket, prefix)
                if o.key != mine and o.key.endswith("-committed")
            ]

        deadline = time.monotonic() + float(f.get("faultseconds", "20"))
        while time.monotonic() < deadline and not get_bridge().run(copies()):
            time.sleep(0.5)

    def _mark(self, uri: str, name: str) -> None:
        """Record that an attempt reached a stage (an empty object at ``uri``)."""
        from zerorename.committers import Destination
        from zerorename.spark_adapter.bridge import get_bridge
        from zerorename.spark_adapter.write import engine_for

        dest = Destination.parse(uri)
        get_bridge().run(engine_for(self.opts).put_object(dest.bucket, dest.key(name), b""))


def _relabel(batch: Any, column: str) -> Any:
    """The record batch with ``column`` set to "loser" in every row."""
    import pyarrow as pa

    i = batch.schema.get_field_index(column)
    value = pa.array(["loser"] * batch.num_rows, batch.schema.field(i).type)
    return batch.set_column(i, batch.schema.field(i), value)


class FaultyStreamDataSource(ZeroRenameDataSource):
    @classmethod
    def name(cls) -> str:
        return "zerorename_faulty_stream"

    def streamWriter(self, schema: Any, overwrite: bool) -> ZeroRenameStreamWriter:
        fault = {k: self.options[k] for k in FAULT_KEYS if k in self.options}
        for k in FAULT_KEYS:
            self.options.pop(k, None)
        w = super().streamWriter(schema, overwrite)
        faulty = FaultyStreamWriter(w.opts)
        faulty.fault = fault
        return faulty


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def register_faulty_stream(spark: Any) -> None:
    spark.dataSource.register(FaultyStreamDataSource)
