"""A streaming ``zerorename`` sink that fails on purpose, for the streaming tests.

Options: ``fault`` (commit: raise after the sink committed the batch, before Spark
records it | task: raise in a task after its attempt committed | commitexit, taskexit:
the Python worker exits there instead), ``faultbatch`` (the
batch id), ``faultonce`` (a local file: the fault fires only while it does not exist, and
creates it). Pickled by value (not importable in Spark's Python workers).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from pyspark import cloudpickle

from zerorename.spark_adapter.datasource import ZeroRenameDataSource
from zerorename.spark_adapter.streaming import ZeroRenameStreamWriter

FAULT_KEYS = ("fault", "faultbatch", "faultonce", "faultpartition")


class FaultyStreamWriter(ZeroRenameStreamWriter):
    fault: dict[str, str]

    def checkpoint(self, stage: str, batch_id: int, partition: int, attempt: int) -> None:
        f = self.fault
        fault = f.get("fault", "commit")
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
