"""Driver program for the speculation test (run in its own process: one SparkContext
per process, and the test session already has one).

argv: master URL, JSON of data source options, destination URI, marker URI.
"""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faulty

master, options, dest, marks = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
builder = (
    SparkSession.builder.master(master)
    .appName("zerorename-speculation")
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
    .config("spark.task.maxFailures", "1")  # a failure would end the job: only speculation
)
for key in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
    if key in os.environ:
        builder = builder.config(f"spark.executorEnv.{key}", os.environ[key])
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
faulty.register_faulty(spark)
df = spark.range(0, 4000, 1, 4).selectExpr("id", "repeat('x', 100) AS pad")
(
    df.write.format("zerorename_faulty")
    .mode("append")
    .options(**options)
    .option("fault", "sleep")
    .option("faultseconds", "25")
    .option("faultstage", "files_closed")
    .option("faultpartition", "1")
    .option("faultattempts", "0")
    .option("faultmark", marks)
    .save(dest)
)
spark.stop()
print("DRIVER-OK")
