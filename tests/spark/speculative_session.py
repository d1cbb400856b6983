"""The Spark session the speculation drivers run in (their own processes): a standalone
cluster of two one-core workers with speculation eager enough that a sleeping attempt gets
a copy, and task retries off so only speculation makes a second attempt."""

from __future__ import annotations

import os
import sys
from typing import Any

from pyspark.sql import SparkSession


def speculative_session(master: str, app: str, conf: dict[str, str] | None = None) -> Any:
    """A session on ``master`` with speculation on, plus ``conf``."""
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.executor.memory", "512m")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.speculation", "true")
        .config("spark.speculation.interval", "200ms")
        .config("spark.speculation.multiplier", "1.5")
        .config("spark.speculation.quantile", "0.5")
        .config("spark.speculation.minTaskRuntime", "500ms")
        .config("spark.task.maxFailures", "1")  # a failure ends the job: only speculation
    )
    # the executors run with the drivers' JVM options (C1 only, serial GC, the run's class
    # archive: tests/jvm_archive.py); without them the four executors of the speculation tests
    # spent 67 CPU-s in C2 compiles and GC threads
    if os.environ.get("SPARK_SUBMIT_OPTS"):
        builder = builder.config("spark.executor.extraJavaOptions", os.environ["SPARK_SUBMIT_OPTS"])
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    for key in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        if key in os.environ:
            builder = builder.config(f"spark.executorEnv.{key}", os.environ[key])
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
