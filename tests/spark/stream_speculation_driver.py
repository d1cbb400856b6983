"""Driver program for the streaming speculation test (its own process: one SparkContext per
process, and the test session already has one).

A stream of two micro-batches (one source file each, 4 tasks, partitionBy p) on a
standalone cluster with speculation on: in batch 0 the first attempt of partition 1 sleeps
after its task commit and writes its rows under ``p=loser``, so its speculative copy (on
the other worker) is the attempt Spark accepts.

argv: master URL, JSON of data source options, destination URI, marker URI, source
directory, checkpoint directory.
"""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import streaming_faulty

master, options, dest, marks, src, ckpt = sys.argv[1], json.loads(sys.argv[2]), *sys.argv[3:7]
builder = (
    SparkSession.builder.master(master)
    .appName("zerorename-stream-speculation")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.executor.cores", "1")
    .config("spark.cores.max", "2")
    .config("spark.executor.memory", "512m")
    .config("spark.sql.shuffle.partitions", "4")
    .config("spark.pyspark.python", sys.executable)
    .config("spark.speculation", "true")
    .config("spark.speculation.interval", "200ms")
    .config("spark.speculation.multiplier", "1.5")
    .config("spark.speculation.quantile", "0.5")
    .config("spark.speculation.minTaskRuntime", "500ms")
    .config("spark.task.maxFailures", "1")  # a failure would end the query: only speculation
)
for key in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
    if key in os.environ:
        builder = builder.config(f"spark.executorEnv.{key}", os.environ[key])
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
streaming_faulty.register_faulty_stream(spark)
df = (
    spark.readStream.schema("id LONG, s STRING")
    .option("maxFilesPerTrigger", 1)
    .json(src)
    .selectExpr("id", "s", "CAST(id % 3 AS STRING) AS p")
    .repartition(4)
)
query = (
    df.writeStream.format("zerorename_faulty_stream")
    .options(**options)
    .option("partitionBy", "p")
    .option("fault", "sleep")
    .option("faultbatch", "0")
    .option("faultpartition", "1")
    .option("faultattempts", "0")
    .option("faultseconds", "20")
    .option("faultrelabel", "p")
    .option("faultmark", marks)
    .option("checkpointLocation", ckpt)
    .outputMode("append")
    .trigger(availableNow=True)
    .start(dest)
)
try:
    query.awaitTermination()
finally:
    query.stop()
spark.stop()
print("DRIVER-OK")
