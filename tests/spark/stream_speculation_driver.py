"""Driver program for the streaming speculation test (its own process: one SparkContext per
process, and the test session already has one).

A stream of two micro-batches (one source file each, 4 tasks, partitionBy p) on a
standalone cluster with speculation on: in batch 0 the first attempt of partition 1 waits
after its task commit until its speculative copy (on the other worker) committed too (at
most 150 s), and writes its rows under ``p=loser``, so the copy is the attempt Spark
accepts.

argv: master URL, JSON of data source options, destination URI, marker URI, source
directory, checkpoint directory.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import streaming_faulty
from speculative_session import speculative_session

master, options, dest, marks, src, ckpt = sys.argv[1], json.loads(sys.argv[2]), *sys.argv[3:7]
spark = speculative_session(
    master, "zerorename-stream-speculation", {"spark.sql.shuffle.partitions": "4"}
)
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
    .option("faultseconds", "150")
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
