"""A streaming ``zerorename`` sink that fails on purpose, for the streaming tests.

Options: ``fault`` (commit: raise after the sink committed the batch, before Spark
records it | task: raise in a task after its attempt committed | commitexit, taskexit:
the Python worker exits there instead), ``faultbatch`` (the
batch id), ``faultonce`` (a local file: the fault fires only while it does not exist, and
creates it). ``fault=sleep`` (speculation): the attempts ``faultattempts`` (comma-separated)
of partition ``faultpartition`` in batch ``faultbatch`` sleep ``faultseconds`` after their
task commit, and write their rows with the partition column ``faultrelabel`` (if given) set
to ``loser`` (another directory, so their files are told apart from the winner's);
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
from zerorename.spark_adapter.streaming import ZeroRenameStreamWriter

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
        if column and tc is not None:
            batch = int(tc.getLocalProperty("streaming.sql.batchId") or -1)
            if self._slow(batch, tc.partitionId(), tc.attemptNumber()):
                iterator = (_relabel(b, column) for b in iterator)
        return super().write(iterator)

    def checkpoint(self, stage: str, batch_id: int, partition: int, attempt: int) -> None:
        f = self.fault
        if stage == "committed" and f.get("faultmark"):
            self._mark(f["faultmark"], f"b{batch_id}-p{partition}-a{attempt}-committed")
        if stage == "committed" and self._slow(batch_id, partition, attempt):
            time.sleep(float(f.get("faultseconds", "20")))
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

    def _mark(self, uri: str, name: str) -> None:
        """Record that an attempt reached a stage (an empty object at ``uri``)."""
        from zerorename.committers import Destination
        from zerorename.spark_adapter.bridge import get_bridge
        from zerorename.spark_adapter.jobs import engine_for

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
