"""A measure function (``perf_clients:measure_each``) for tests/spark/test_perf_spark.py:
the spark scenario's ``measure`` for several runs one after the other in one harness child
(each its own SparkSession, stopped at its end; pyspark keeps its JVM across sessions, so
the runs share one JVM start). Metrics come back keyed ``<client>:<metric>``."""

from __future__ import annotations

from typing import Any

from zerorename.perf.model import Target
from zerorename.perf.scenarios.spark import measure


def measure_each(target: Target, params: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for run in params["runs"]:
        metrics = measure(target, run)
        out |= {f"{run['client']}:{k}": v for k, v in metrics.items()}
    return out
