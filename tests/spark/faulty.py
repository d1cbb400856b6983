"""A `zerorename` data source that misbehaves on purpose, for the fault tests.

Options: ``fault`` (raise | exit | sleep), ``faultstage`` (batch | files_closed |
committed), ``faultpartition`` (partition index), ``faultattempts`` (comma-separated
attempt numbers, or ``all``), ``faultseconds`` (for sleep). The classes are pickled by
value (this module is not importable in Spark's Python workers).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from pyspark import cloudpickle

from zerorename.spark_adapter.datasource import ZeroRenameDataSource, ZeroRenameWriter
from zerorename.spark_adapter.options import WriteOptions

FAULT_KEYS = ("fault", "faultstage", "faultpartition", "faultattempts", "faultseconds", "faultmark")


class FaultyWriter(ZeroRenameWriter):
    fault: dict[str, str]

    def checkpoint(self, stage: str, partition: int, attempt: int) -> None:
        f = self.fault
        if f.get("faultmark") and stage in ("files_closed", "committed"):
            self._mark(f["faultmark"], f"p{partition}-a{attempt}-{stage}")
        if stage != f.get("faultstage", "files_closed"):
            return
        if partition != int(f.get("faultpartition", "1")):
            return
        attempts = f.get("faultattempts", "0")
        if attempts != "all" and str(attempt) not in attempts.split(","):
            return
        action = f.get("fault", "raise")
        if action == "raise":
            raise RuntimeError(f"injected failure: partition {partition} attempt {attempt}")
        if action == "exit":
            os._exit(3)  # killed hard: no finally, no abort
        if action == "sleep":
            time.sleep(float(f.get("faultseconds", "10")))

    def _mark(self, uri: str, name: str) -> None:
        """Record that an attempt reached a stage (an object next to the destination)."""
        from zerorename.committers import Destination
        from zerorename.spark_adapter.bridge import get_bridge
        from zerorename.spark_adapter.write import engine_for

        dest = Destination.parse(uri)
        get_bridge().run(engine_for(self.opts).put_object(dest.bucket, dest.key(name), b""))


class FaultyDataSource(ZeroRenameDataSource):
    @classmethod
    def name(cls) -> str:
        return "zerorename_faulty"

    def writer(self, schema: Any, overwrite: bool) -> ZeroRenameWriter:
        fault = {k: self.options[k] for k in FAULT_KEYS if k in self.options}
        for k in FAULT_KEYS:
            self.options.pop(k, None)
        w = super().writer(schema, overwrite)
        faulty = FaultyWriter(w.opts, w.job_id)
        faulty.fault = fault
        return faulty


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def register_faulty(spark: Any) -> None:
    spark.dataSource.register(FaultyDataSource)


__all__ = ["FaultyDataSource", "WriteOptions", "register_faulty"]
