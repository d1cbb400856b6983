"""Driver program for the speculation test (run in its own process: one SparkContext
per process, and the test session already has one).

argv: master URL, JSON of data source options, destination URI, marker URI.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faulty
from speculative_session import speculative_session

master, options, dest, marks = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
spark = speculative_session(master, "zerorename-speculation")
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
