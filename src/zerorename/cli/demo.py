"""``zerorename demo``: a local Spark job writing through the magic committer, end to end.

Starts an embedded S3 server (moto; ``--endpoint-url`` for a real store), a local Spark
session, generates a dataset of about ``--size`` bytes
(:mod:`zerorename.spark_adapter.demodata`), writes it as Parquet
partitioned by day through ``format("zerorename")``, reads every file back with pyarrow
and checks the rows and their checksums, then prints what it did: files, bytes, write
time, job commit time and where ``_SUCCESS`` is.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import io
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from zerorename.engine.config import endpoint_problem
from zerorename.logsafe import redact_url
from zerorename.spark_adapter.errors import DemoError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--size",
        default="256MB",
        help="approximate raw size of the generated data (default: 256MB)",
    )
    p.add_argument(
        "--endpoint-url", help="a real S3 endpoint (default: start an embedded moto server)"
    )
    p.add_argument("--region", default=None, help="S3 region (default: the AWS chain)")
    p.add_argument("--profile", default=None, help="AWS profile for a real endpoint")
    p.add_argument(
        "--bucket",
        default="zerorename-demo",
        help="bucket (created on the embedded server; must exist elsewhere)",
    )
    p.add_argument("--prefix", default=None, help="key prefix (default: demo-<random>)")
    p.add_argument("--committer", default="magic", choices=["magic", "directory", "partitioned"])
    p.add_argument("--tasks", type=int, default=8, help="Spark tasks writing (default: 8)")
    p.add_argument("--days", type=int, default=8, help="Hive partitions day=... (default: 8)")
    p.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    p.add_argument("--part-size", default="16m", help="multipart part size (default: 16m)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def add_subcommand(subparsers: Any) -> None:
    """Plug ``demo`` into the ``zerorename`` command."""
    p = subparsers.add_parser(
        "demo",
        help="run a local Spark job writing to S3 through the magic committer",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    p.set_defaults(func=run)


@dataclass
class DemoSummary:
    destination: str
    committer: str
    rows: int
    files: int
    bytes: int
    write_seconds: float
    commit_seconds: float
    total_seconds: float
    success_uri: str
    verified: bool
    endpoint: str
    checks: dict[str, Any] = field(default_factory=dict)
    #: what bounds the write time (see :func:`write_bound`): the demo measures no upload speed.
    write_bound: str = ""

    def text(self) -> str:
        mb = self.bytes / 1e6
        return "\n".join(
            [
                f"zerorename demo: {self.destination} ({self.committer} committer)",
                f"  rows        {self.rows:,}",
                f"  files       {self.files:,}",
                f"  bytes       {self.bytes:,} ({mb:.1f} MB)",
                f"  write time  {self.write_seconds:.2f} s  "
                f"(end to end, bound by {self.write_bound})",
                f"  job commit  {self.commit_seconds:.3f} s  (completing {self.files} uploads)",
                f"  _SUCCESS    {self.success_uri}",
                f"  verified    {'yes' if self.verified else 'NO'}: rows, ids, partitions and "
                "per-row SHA-256 payloads read back from the store",
                f"  upload      {PERF_HINT}",
            ]
        )


#: where the demo's reader finds figures of zerorename's own speed.
PERF_HINT = (
    "speed not measured by the demo: `zerorename perf upload|commit|spark --target ...` "
    "measures zerorename's uploads and job commits against your store (README section 5)"
)


def write_bound(master: str, tasks: int, endpoint_url: str | None) -> str:
    """What the demo's write time measures: Spark making the rows (a SHA-256 payload each)
    and encoding Parquet on the local cores, with the embedded server on the same cores."""
    store = (
        "the store at --endpoint-url"
        if endpoint_url
        else "the embedded moto server sharing those cores"
    )
    return (
        f"Spark generating rows with SHA-256 payloads and encoding Parquet in {tasks} tasks "
        f"on {master}, uploading to {store}; not an upload speed"
    )


@contextlib.contextmanager
def _s3(args: argparse.Namespace) -> Iterator[tuple[str, str | None]]:
    """(endpoint URL, region): the embedded moto server, or the user's endpoint."""
    if args.endpoint_url:
        problem = endpoint_problem(args.endpoint_url)  # before Spark starts or anything prints
        if problem is not None:
            raise DemoError(f"--endpoint-url: {problem}")
        yield args.endpoint_url, args.region
        return
    try:
        from zerorename.servers.servers import MotoServer
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise DemoError(
            f"the embedded S3 server needs moto: pip install 'zerorename[demo]' ({exc})"
        ) from None
    with MotoServer() as server:
        # moto accepts any credentials; executors read them from the environment (the
        # standard AWS chain), which Spark's workers inherit when the JVM starts
        os.environ.setdefault("AWS_ACCESS_KEY_ID", server.access_key)
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", server.secret_key)
        import boto3

        boto3.client(
            "s3",
            endpoint_url=server.endpoint_url,
            region_name=server.region,
            aws_access_key_id=server.access_key,
            aws_secret_access_key=server.secret_key,
        ).create_bucket(Bucket=args.bucket)
        yield server.endpoint_url, args.region or server.region


def _spark(master: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("zerorename-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _verify(engine_opts: dict[str, str], uri: str, rows: int, days: int) -> dict[str, Any]:
    """Read every data file back and check each row against the generator."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from zerorename.committers import Destination
    from zerorename.spark_adapter.bridge import get_bridge
    from zerorename.spark_adapter.demodata import DAY0
    from zerorename.spark_adapter.options import WriteOptions
    from zerorename.spark_adapter.write import engine_for

    opts = WriteOptions.parse({"path": uri, **engine_opts})
    engine = engine_for(opts)
    bridge = get_bridge()
    dest = Destination.parse(uri)

    async def keys() -> list[str]:
        return [o.key async for o in engine.list_objects(dest.bucket, dest.list_prefix)]

    count = id_sum = id_sq = 0
    files = 0
    bad = 0
    for key in bridge.run(keys()):
        rel = dest.rel(key) or ""
        if not rel.endswith(".parquet"):
            continue
        files += 1
        day = rel.split("/")[0].removeprefix("day=")
        table = pq.read_table(io.BytesIO(bridge.run(engine.get_object(dest.bucket, key))))
        ids = table.column("id").to_pylist()
        count += len(ids)
        id_sum += sum(ids)
        id_sq += sum(i * i for i in ids)
        keys_ok = pc.all(
            pc.equal(table.column("key"), pc.cast(pc.remainder(table.column("id"), 1000), "int32"))
        )
        values_ok = pc.all(
            pc.equal(table.column("value"), pc.multiply(pc.cast(table.column("id"), "double"), 0.5))
        )
        if not (keys_ok.as_py() and values_ok.as_py()):
            bad += 1
        for i, payload in zip(ids, table.column("payload").to_pylist(), strict=True):
            if payload != hashlib.sha256(str(i).encode()).hexdigest():
                bad += 1
            if (DAY0 + dt.timedelta(days=i * days // rows)).isoformat() != day:
                bad += 1
    expected_sum = rows * (rows - 1) // 2
    expected_sq = (rows - 1) * rows * (2 * rows - 1) // 6
    ok = count == rows and id_sum == expected_sum and id_sq == expected_sq and bad == 0
    return {
        "ok": ok,
        "rows_read": count,
        "files_read": files,
        "bad_rows": bad,
        "ids_complete": id_sum == expected_sum and id_sq == expected_sq,
    }


def run(args: argparse.Namespace) -> int:
    """Run the demo; 0 when everything verified, 1 otherwise."""
    from zerorename.spark_adapter.datasource import register
    from zerorename.spark_adapter.demodata import ROW_BYTES, dataset
    from zerorename.spark_adapter.options import parse_size  # not at import: the CLI's parser
    from zerorename.spark_adapter.success import read_success

    size = parse_size(str(args.size), "--size")
    rows = max(size // ROW_BYTES, args.days)
    prefix = args.prefix or f"demo-{uuid.uuid4().hex[:8]}"
    uri = f"s3://{args.bucket}/{prefix.strip('/')}"
    t_start = time.monotonic()
    with _s3(args) as (endpoint, region):
        engine_opts = {"endpoint": endpoint, "partSize": str(args.part_size)}
        if region:
            engine_opts["region"] = region
        if args.profile:
            engine_opts["profile"] = args.profile
        if not args.endpoint_url:
            engine_opts["addressingStyle"] = "path"
        spark = _spark(args.master)
        try:
            register(spark)
            df = dataset(spark, rows, args.tasks, args.days)
            print(
                f"zerorename demo: writing ~{size / 1e6:.0f} MB ({rows:,} rows, "
                f"{args.tasks} tasks) to {uri} via {redact_url(endpoint)}",
                file=sys.stderr,
            )
            t0 = time.monotonic()
            (
                df.write.format("zerorename")
                .mode("overwrite")
                .option("partitionBy", "day")
                .option("committer", args.committer)
                .options(**engine_opts)
                .save(uri)
            )
            elapsed = time.monotonic() - t0
        finally:
            spark.stop()
        info = read_success(
            uri,
            endpoint=endpoint,
            region=region,
            profile=args.profile,
            addressing_style=engine_opts.get("addressingStyle", "auto"),
        )
        checks = _verify(engine_opts, uri, rows, args.days)
    summary = DemoSummary(
        destination=uri,
        committer=info.committer,
        rows=info.rows or 0,
        files=info.files,
        bytes=info.bytes,
        write_seconds=max(elapsed - info.duration_seconds, 0.0),
        commit_seconds=info.duration_seconds,
        total_seconds=time.monotonic() - t_start,
        success_uri=info.uri,
        verified=bool(checks["ok"]) and info.rows == rows,
        endpoint=endpoint if args.endpoint_url else "embedded moto",
        checks=checks,
        write_bound=write_bound(args.master, args.tasks, args.endpoint_url),
    )
    print(json.dumps(asdict(summary), indent=1) if args.json else summary.text())
    return 0 if summary.verified else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="zerorename demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except DemoError as exc:
        print(f"zerorename demo: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
