"""A Spark Connect client (``SparkSession.builder.remote("local[2]")``) that registers the
data source, writes a batch with partitionBy and a stream, reads the stream's log and prints
what it saw as one JSON line. Run in its own process by test_spark_connect.py (a Connect
session and the suite's classic session do not share a process)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    args = json.loads(sys.argv[1])
    from pyspark.sql import SparkSession

    from zerorename.spark_adapter import read_stream_log, read_success, register

    spark = (
        SparkSession.builder.remote("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    out: dict[str, object] = {"connect": type(spark).__module__}
    try:
        register(spark)
        opts, reader = args["options"], args["reader"]
        df = spark.range(0, 300, 1, 3).selectExpr("id", "CAST(id % 3 AS STRING) AS day")
        (
            df.write.format("zerorename")
            .mode("overwrite")
            .options(**opts)
            .option("partitionBy", "day")
            .option("commitConcurrency", "4")
            .save(args["batch"])
        )
        info = read_success(args["batch"], **reader)
        out["batch"] = {"files": info.files, "rows": info.rows, "committer": info.committer}
        src, ckpt = Path(args["src"]), args["ckpt"]
        for n in range(2):
            rows = "".join(json.dumps({"id": n * 10 + i}) + "\n" for i in range(10))
            (src / f"f{n}.json").write_text(rows)
        stream = spark.readStream.schema("id LONG").option("maxFilesPerTrigger", 1).json(str(src))
        q = (
            stream.writeStream.format("zerorename")
            .options(**opts)
            .option("checkpointLocation", ckpt)
            .trigger(availableNow=True)
            .start(args["stream"])
        )
        try:
            q.awaitTermination()
        finally:
            q.stop()
        log = read_stream_log(args["stream"], ckpt, **reader)
        out["stream"] = {"batches": log.batches, "last": log.last_batch, "rows": log.rows}
    finally:
        spark.stop()
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
