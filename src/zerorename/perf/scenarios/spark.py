"""The ``spark`` perf scenario: DataFrame writes end to end, job commit time vs output size.

Each run is one local Spark job (``local[2]``, its own SparkSession in a fresh child
process) writing the demo's generated dataset (``id, key, value, payload, day``; about
``--sizes-mb`` MB of snappy Parquet, Hive-partitioned by ``--partition-by``) to a fresh
prefix through one client:

- ``magic`` / ``directory``: the ``zerorename`` data source with that committer (through
  ``zerorename_timed``: the same writer, with its commits timed);
- ``rename``: :mod:`zerorename.perf.scenarios.rename_baseline`, Hadoop FileOutputCommitter v1 on S3
  (copy + delete renames at task and job commit), writing the same files;
- ``spark``: Spark's own Parquet writer to the local disk (``partitionBy``, no S3), the
  reference for how many files a partitioned write makes (it sorts each task's rows by
  the partition columns).

``--order random`` gives the partition column its values in random order (``rand(3)``)
instead of sorted by ``id``: with more values than ``maxOpenFiles`` the zerorename writer
spills the rows of partitions it has no open file for and still writes one file per
partition per task. ``peak_rss_mb``: the peak RSS of the processes that ran the tasks (the
Python workers for zerorename, the JVM for Spark's writer).

Metrics: ``commit_s`` (the whole driver-side ``DataSourceWriter.commit``), ``write_s``
(wall time of ``save()``, commit included), ``task_commit_s`` (task commits summed over
tasks), ``output_mb`` and ``files`` (data files under the destination), ``verified`` (1
when the listing matches what the commit reported, nothing is left under ``_temporary``
or ``__magic*``, no upload is pending and, except on the sink, which discards data, the
Parquet files read back hold every generated row). The prefix is deleted afterwards
(untimed).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from typing import Any

from zerorename.perf.model import Run, Sample, Target

NAME = "spark"
HELP = (
    "Spark DataFrame writes: job commit time vs output size, zerorename magic/directory "
    "vs a rename-based (FileOutputCommitter v1) baseline"
)
CLIENTS = ("magic", "directory", "rename", "spark")
#: the clients run unless --clients says otherwise
DEFAULT_CLIENTS = ("magic", "directory", "rename")
ORDERS = ("sorted", "random")
FUNC = "zerorename.perf.scenarios.spark:measure"
#: Parquet bytes per generated row (snappy), to size the output
PARQUET_ROW_BYTES = 77
#: commit time may grow this much from the smallest to the largest size and still be "flat"
FLAT_RATIO = 1.5
#: the product goal: the magic commit this many times faster than the rename baseline
GOAL_SPEEDUP = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sizes-mb",
        default="100,1000",
        help="output sizes in MB of Parquet, comma-separated (default: 100,1000)",
    )
    parser.add_argument(
        "--clients",
        default=",".join(DEFAULT_CLIENTS),
        help=f"clients to compare, among {','.join(CLIENTS)} (spark: Spark's own Parquet "
        f"writer to local disk) (default: {','.join(DEFAULT_CLIENTS)})",
    )
    parser.add_argument(
        "--order",
        choices=ORDERS,
        default="sorted",
        help="rows in partition-column order (sorted, by id) or in random order (default: sorted)",
    )
    parser.add_argument(
        "--max-open-files",
        type=int,
        default=16,
        help="the zerorename writers' maxOpenFiles (default: 16)",
    )
    parser.add_argument(
        "--partitions", type=int, default=8, help="Spark partitions (tasks) writing (default: 8)"
    )
    parser.add_argument(
        "--partition-by",
        default="day",
        help="partition column of the generated data, or 'none' (default: day)",
    )
    parser.add_argument(
        "--days", type=int, default=8, help="distinct values of the day column (default: 8)"
    )
    parser.add_argument(
        "--part-size", default="16m", help="multipart part size, all clients (default: 16m)"
    )
    parser.add_argument(
        "--rename-concurrency",
        type=int,
        default=16,
        help="copy requests in flight in the rename baseline's commits (default: 16)",
    )
    parser.add_argument(
        "--copy-threshold",
        default="128m",
        help="rename baseline: objects this large or larger are copied in parts "
        "(UploadPartCopy), smaller ones with one CopyObject; S3A's "
        "fs.s3a.multipart.threshold (default: 128m)",
    )
    parser.add_argument(
        "--copy-part-size",
        default="64m",
        help="rename baseline: part size of multipart copies; S3A's fs.s3a.multipart.size "
        "(default: 64m)",
    )
    parser.add_argument("--spark-memory", default="2g", help="Spark driver memory (default: 2g)")


def _sizes(text: str) -> list[int]:
    sizes = sorted({int(s) for s in text.split(",") if s.strip()})
    if not sizes or sizes[0] < 1:
        raise ValueError(f"--sizes-mb needs positive integers, got {text!r}")
    return sizes


def _clients(text: str) -> list[str]:
    clients = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in clients if c not in CLIENTS]
    if bad or not clients:
        raise ValueError(f"--clients must be among {', '.join(CLIENTS)}; got {text!r}")
    return clients


def plan(args: argparse.Namespace, target: Target) -> list[Run]:
    partition_by = "" if args.partition_by.lower() in ("", "none") else args.partition_by
    runs: list[Run] = []
    for size in _sizes(args.sizes_mb):
        for client in _clients(args.clients):
            params: dict[str, Any] = {
                "client": client,
                "size_mb": size,
                "partitions": args.partitions,
                "partition_by": partition_by,
                "days": args.days,
                "part_size": args.part_size,
                "rename_concurrency": args.rename_concurrency,
                "copy_threshold": args.copy_threshold,
                "copy_part_size": args.copy_part_size,
                "spark_memory": args.spark_memory,
                "order": args.order,
                "max_open_files": args.max_open_files,
            }
            runs.append(Run(client=client, func=FUNC, params=params, group=f"{size}MB"))
    return runs


# ---------------------------------------------------------------- one run (in a child)


def rows_for(size_mb: float) -> int:
    return max(int(size_mb * 1e6 / PARQUET_ROW_BYTES), 1)


def _spark(memory: str) -> Any:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("zerorename-perf-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", memory)
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _child_env(target: Target) -> None:
    """Set before the JVM starts: Spark's Python workers inherit it (over HTTPS with a
    private CA, ``AWS_CA_BUNDLE`` too: the writers' engines and the rename baseline's boto3
    verify with it)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if target.ca_bundle:
        os.environ["AWS_CA_BUNDLE"] = target.ca_bundle
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if target.access_key is not None and target.secret_key is not None:
        # executors use the standard AWS chain; this child is throwaway
        os.environ["AWS_ACCESS_KEY_ID"] = target.access_key
        os.environ["AWS_SECRET_ACCESS_KEY"] = target.secret_key
        os.environ.pop("AWS_SESSION_TOKEN", None)
        os.environ.pop("AWS_PROFILE", None)


def _writer_options(target: Target, params: dict[str, Any], timing_file: str) -> dict[str, str]:
    opts = {
        "partSize": str(params.get("part_size", "16m")),
        "addressingStyle": target.addressing_style,
        "region": target.region,
        "perfTimingFile": timing_file,
    }
    if target.endpoint_url:
        opts["endpoint"] = target.endpoint_url
    if params.get("partition_by"):
        opts["partitionBy"] = str(params["partition_by"])
    if params.get("max_open_files"):
        opts["maxOpenFiles"] = str(params["max_open_files"])
    if params["client"] == "rename":
        opts["renameConcurrency"] = str(params.get("rename_concurrency", 16))
        opts["copyThreshold"] = str(params.get("copy_threshold", "128m"))
        opts["copyPartSize"] = str(params.get("copy_part_size", "64m"))
    else:
        opts["committer"] = str(params["client"])
    return opts


def _dataset(spark: Any, rows: int, partitions: int, days: int, order: str) -> Any:
    """The demo's rows; ``order`` random: the day column in random order (``rand(3)``)."""
    from zerorename.spark_adapter.demodata import DAY0, dataset

    df = dataset(spark, rows, partitions, days)
    if order == "random":
        day = f"CAST(date_add(DATE'{DAY0.isoformat()}', CAST(rand(3) * {days} AS INT)) AS STRING)"
        df = df.selectExpr("id", "key", "value", "payload", f"{day} AS day")
    return df


def _peak_rss_mb(pid: int) -> float:
    """The peak RSS (VmHWM) of process ``pid`` in MB (0 where /proc has none)."""
    try:
        for line in open(f"/proc/{pid}/status").read().splitlines():  # noqa: SIM115
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return 0.0


def measure_spark_local(params: dict[str, Any]) -> dict[str, float]:
    """Spark's own Parquet writer, partitioned the same way, to a local directory."""
    import pyarrow.dataset as ds

    rows = rows_for(float(params["size_mb"]))
    partitions = int(params.get("partitions", 8))
    days = int(params.get("days", 8))
    order = str(params.get("order", "sorted"))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    with tempfile.TemporaryDirectory(prefix="zr-perf-spark-local-") as tmp:
        out = os.path.join(tmp, "out")
        spark = _spark(str(params.get("spark_memory", "2g")))
        try:
            pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
            writer = _dataset(spark, rows, partitions, days, order).write.mode("append")
            if params.get("partition_by"):
                writer = writer.partitionBy(str(params["partition_by"]))
            t0 = time.perf_counter()
            writer.parquet(out)
            write_s = time.perf_counter() - t0
            peak = _peak_rss_mb(pid)
        finally:
            spark.stop()
        paths = [
            os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs if f.endswith(".parquet")
        ]
        table = ds.dataset(paths, format="parquet").to_table(columns=["id"])
        ids = table.column("id")
        ok = len(ids) == rows and sum(ids.to_pylist()) == rows * (rows - 1) // 2
        return {
            "write_s": write_s,
            "output_mb": sum(os.path.getsize(p) for p in paths) / 1e6,
            "files": float(len(paths)),
            "peak_rss_mb": peak,
            "verified": 1.0 if ok else 0.0,
        }


def measure(target: Target, params: dict[str, Any]) -> dict[str, float]:
    """One write of ``params["size_mb"]`` MB through ``params["client"]``; metrics."""
    from zerorename.perf.scenarios import rename_baseline

    client = str(params["client"])
    if client not in CLIENTS:
        raise ValueError(f"unknown client {client!r}")
    if client == "spark":
        return measure_spark_local(params)
    rows = rows_for(float(params["size_mb"]))
    partitions = int(params.get("partitions", 8))
    days = int(params.get("days", 8))
    order = str(params.get("order", "sorted"))
    run_id = str(params.get("run_id") or f"{client}-{params['size_mb']}MB-{uuid.uuid4().hex[:8]}")
    prefix = target.key("spark", run_id)
    uri = f"s3://{target.bucket}/{prefix}"
    _child_env(target)
    fmt = rename_baseline.NAME if client == "rename" else rename_baseline.TIMED_NAME
    # moto gives a copy of a multipart object the source's composite checksum as if it
    # were a whole-object one, which botocore's response validation rejects; the bytes are
    # checked by reading the rows back instead
    s3 = target.plain_boto3_client(response_checksum_validation="when_required")
    try:
        with tempfile.TemporaryDirectory(prefix="zr-perf-spark-") as tmp:
            timing_file = os.path.join(tmp, "commit.json")
            spark = _spark(str(params.get("spark_memory", "2g")))
            try:
                rename_baseline.register(spark)
                df = _dataset(spark, rows, partitions, days, order)
                writer = (
                    df.write.format(fmt)
                    .mode("append")
                    .options(**_writer_options(target, params, timing_file))
                )
                t0 = time.perf_counter()
                writer.save(uri)
                write_s = time.perf_counter() - t0
            finally:
                spark.stop()
            timing = rename_baseline.CommitTiming.load(timing_file)
        check = verify(s3, target, prefix, client, rows, timing)
    finally:
        if not params.get("keep"):
            delete_prefix(s3, target.bucket, prefix + "/")
    if check["problems"]:
        print(f"spark {client}: verification failed: {check['problems']}", file=sys.stderr)
    return {
        "commit_s": timing.commit_s,
        "write_s": write_s,
        "task_commit_s": timing.task_commit_s,
        "output_mb": check["bytes"] / 1e6,
        "files": float(check["files"]),
        "peak_rss_mb": timing.task_peak_rss_mb,
        "verified": 0.0 if check["problems"] else 1.0,
    }


def verify(
    s3: Any, target: Target, prefix: str, client: str, rows: int, timing: Any
) -> dict[str, Any]:
    """Check the destination against the commit's report (see the module docstring)."""
    import pyarrow.parquet as pq

    from zerorename.committers import SuccessData

    lp = prefix + "/"
    data: dict[str, int] = {}
    problems: list[str] = []
    has_success = False
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=target.bucket, Prefix=lp):
        for o in page.get("Contents", []):
            rel = o["Key"][len(lp) :]
            if rel == "_SUCCESS":
                has_success = True
            elif rel.endswith(".parquet") and not any(
                c.startswith(("_temporary", "__magic")) for c in rel.split("/")
            ):
                data[rel] = int(o["Size"])
            else:
                problems.append(f"left over: {rel}")
    if not has_success:
        problems.append("no _SUCCESS")
    files, nbytes = timing.files, timing.bytes
    if client != "rename" and has_success:
        body = s3.get_object(Bucket=target.bucket, Key=lp + "_SUCCESS")["Body"].read()
        m = SuccessData.from_json(body).metrics
        files, nbytes = int(m.get("files", -1)), int(m.get("bytes", -1))
    if len(data) != files or sum(data.values()) != nbytes:
        problems.append(
            f"listing has {len(data)} files, {sum(data.values())} bytes; the commit "
            f"reported {files} files, {nbytes} bytes"
        )
    if timing.rows != rows:
        problems.append(f"tasks wrote {timing.rows} rows, not {rows}")
    try:
        pending = s3.list_multipart_uploads(Bucket=target.bucket, Prefix=lp).get("Uploads", [])
        if pending:
            problems.append(f"{len(pending)} uploads pending, e.g. {pending[0]['Key']}")
    except Exception as exc:  # a store without upload listing (e.g. a minimal sink)
        if target.name != "sink":
            problems.append(f"could not list uploads: {exc}")
    if target.name != "sink":
        count = id_sum = 0
        for rel in sorted(data):
            body = s3.get_object(Bucket=target.bucket, Key=lp + rel)["Body"].read()
            # no Arrow thread pools: their threads can abort the process at exit
            # (apache/arrow#34314)
            table = pq.read_table(
                io.BytesIO(body), columns=["id"], use_threads=False, pre_buffer=False
            )
            ids = table.column("id")
            count += len(ids)
            id_sum += sum(ids.to_pylist())
        if count != rows or id_sum != rows * (rows - 1) // 2:
            problems.append(f"read back {count} rows (id sum {id_sum}); expected {rows}")
    return {"files": len(data), "bytes": sum(data.values()), "problems": problems}


def delete_prefix(s3: Any, bucket: str, prefix: str) -> None:
    """Abort pending uploads and delete every object under ``prefix`` (ends with '/')."""
    from zerorename.perf.scenarios.rename_baseline import delete_keys

    try:
        for up in s3.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", []):
            s3.abort_multipart_upload(Bucket=bucket, Key=up["Key"], UploadId=up["UploadId"])
    except Exception:  # stores without upload listing
        pass
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    delete_keys(s3, bucket, keys)


# ---------------------------------------------------------------- report


def _by_client_size(samples: list[Sample], metric: str) -> dict[str, dict[int, list[float]]]:
    out: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        if metric in s.metrics:
            out[s.client][int(s.params["size_mb"])].append(float(s.metrics[metric]))
    return out


def _order(clients: Any) -> list[str]:
    return sorted(clients, key=lambda c: (CLIENTS.index(c) if c in CLIENTS else 99, c))


def _layout_notes(samples: list[Sample], args: argparse.Namespace) -> list[str]:
    """Files written, whole-write seconds and peak task RSS per client and size, and the
    bound Spark's writer holds: at most one file per partition value per task."""
    files = _by_client_size(samples, "files")
    if not files:
        return []
    write = _by_client_size(samples, "write_s")
    peak = _by_client_size(samples, "peak_rss_mb")
    tasks = int(getattr(args, "partitions", 0) or 0)
    days = int(getattr(args, "days", 0) or 0)
    order = str(getattr(args, "order", "sorted"))
    lines = [f"files, write seconds and peak task RSS ({order} order), medians:"]
    for c in _order(files):
        for z in sorted(files[c]):
            n = statistics.median(files[c][z])
            cell = f"  {c:<9} {z} MB: {n:.0f} files"
            if write.get(c, {}).get(z):
                cell += f", write {statistics.median(write[c][z]):.2f} s"
            if peak.get(c, {}).get(z):
                cell += f", peak RSS {statistics.median(peak[c][z]):.0f} MB"
            if tasks and days:
                cell += f" (bound {tasks} tasks x {days} values = {tasks * days})"
            lines.append(cell)
    if "spark" in files:
        for c in (x for x in _order(files) if x not in ("spark", "rename")):
            for z in sorted(set(files[c]) & set(files["spark"])):
                ours, theirs = statistics.median(files[c][z]), statistics.median(files["spark"][z])
                w = write.get(c, {}).get(z)
                ws = write.get("spark", {}).get(z)
                ratio = (
                    f", write time x{statistics.median(w) / statistics.median(ws):.2f}"
                    if w and ws
                    else ""
                )
                lines.append(
                    f"{c} / Spark's own writer at {z} MB: files {ours:.0f} / {theirs:.0f}{ratio}"
                )
    return lines


def notes(samples: list[Sample], args: argparse.Namespace) -> list[str]:
    """Flatness (commit time at the largest size over the smallest) and the speed-up of
    each zerorename committer over the rename baseline at each size."""
    lines = _layout_notes(samples, args)
    commit = _by_client_size(samples, "commit_s")
    if not commit:
        return lines
    med = {c: {z: statistics.median(v) for z, v in by.items()} for c, by in commit.items()}
    lines.append("job commit, median seconds by output size:")
    for c in _order(med):
        sizes = sorted(med[c])
        cells = ", ".join(f"{z} MB {med[c][z]:.3f} s" for z in sizes)
        line = f"  {c:<9} {cells}"
        if len(sizes) > 1 and med[c][sizes[0]] > 0:
            ratio = med[c][sizes[-1]] / med[c][sizes[0]]
            flat = "flat" if ratio <= FLAT_RATIO else "grows"
            line += f"  ({sizes[-1]}/{sizes[0]} MB: x{ratio:.2f}, {flat})"
        lines.append(line)
    if "rename" in med:
        for c in (x for x in _order(med) if x != "rename"):
            sizes = sorted(set(med[c]) & set(med["rename"]))
            cells = ", ".join(
                f"{z} MB x{med['rename'][z] / med[c][z]:.1f}" for z in sizes if med[c][z] > 0
            )
            lines.append(f"rename baseline / {c} commit time: {cells}")
        if "magic" in med:
            sizes = sorted(set(med["magic"]) & set(med["rename"]))
            if sizes:
                big, small = sizes[-1], sizes[0]
                speedup = med["rename"][big] / med["magic"][big] if med["magic"][big] else 0.0
                flat_ratio = med["magic"][big] / med["magic"][small] if med["magic"][small] else 0.0
                goal_speed = "met" if speedup >= GOAL_SPEEDUP else "NOT met"
                goal = (
                    f"goal: magic >= {GOAL_SPEEDUP:.0f}x faster than rename at {big} MB "
                    f"(x{speedup:.1f}: {goal_speed})"
                )
                if len(sizes) > 1:
                    goal_flat = "met" if flat_ratio <= FLAT_RATIO else "NOT met"
                    goal += (
                        f"; flat from {small} to {big} MB "
                        f"(x{flat_ratio:.2f} <= {FLAT_RATIO}: {goal_flat})"
                    )
                else:
                    goal += "; flatness needs two --sizes"
                lines.append(goal)
    unverified = [s for s in samples if s.metrics.get("verified", 1.0) != 1.0]
    if unverified:
        lines.append(f"WARNING: {len(unverified)} runs failed verification")
    target = str(getattr(args, "target", "") or "")
    if target == "moto":
        lines.append(
            "moto completes large multipart uploads slowly (it joins the parts in memory): "
            "there every commit grows with the bytes (on RGW ours do not)"
        )
    elif target == "rgw" and "rename" in med:
        lines.append(
            "RGW copies a whole object (CopyObject) without moving its bytes, but copies "
            "UploadPartCopy parts: the baseline's cost there depends on --copy-threshold"
        )
    return lines


def plot(samples: list[Sample], args: argparse.Namespace, path: str) -> None:
    """Commit seconds vs output size (log y), one line per client; write time beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    panels = (("commit_s", "job commit (s)", True), ("write_s", "whole write (s)", False))
    for ax, (metric, label, logy) in zip(axes, panels, strict=True):
        data = _by_client_size(samples, metric)
        for c in _order(data):
            sizes = sorted(data[c])
            mids = [statistics.median(data[c][z]) for z in sizes]
            lo = [m - min(data[c][z]) for m, z in zip(mids, sizes, strict=True)]
            hi = [max(data[c][z]) - m for m, z in zip(mids, sizes, strict=True)]
            ax.errorbar(sizes, mids, yerr=[lo, hi], marker="o", capsize=3, label=c)
        ax.set_xlabel("output size (MB of Parquet)")
        ax.set_ylabel(label)
        ax.set_xscale("log")
        ticks = sorted({z for by in data.values() for z in by})
        ax.set_xticks(ticks, [str(z) for z in ticks])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        if logy:
            ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    axes[0].set_title("job commit time vs output size")
    axes[1].set_title("write time (save(), commit included)")
    fig.suptitle("zerorename perf spark: median, min-max bars")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
