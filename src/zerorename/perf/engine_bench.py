"""Engine benchmarks: peak memory of a streamed upload, and throughput next to boto3.

    python -m zerorename.perf.engine_bench memory --endpoint-url URL --bucket B \
        [--size-mib 2048 --part-mib 8 --concurrency 8]
    python -m zerorename.perf.engine_bench compare --endpoint-url URL --bucket B \
        [--size-mib 1024 --part-mib 16 --concurrency 16 --runs 3]

Both print one JSON document. ``memory`` measures this process: RSS once the engine is
open (the baseline) and the peak RSS (ru_maxrss) after streaming ``size`` bytes from a
generator. ``compare`` alternates the engine and boto3's ``upload_fileobj`` (same part size
and concurrency) on the same data in one run, and reports each one's MiB/s and client CPU
seconds per GiB, with ratios against boto3 as users run it (the baseline).
Credentials come from the AWS chain.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

from zerorename.engine import EngineConfig, UploadEngine
from zerorename.engine.planning import MiB
from zerorename.engine.runner import run

_BLOCK = 1 << 20


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss_bytes() -> int:
    """Peak RSS of this process image: VmHWM. (ru_maxrss is not used: Linux carries it over
    fork and exec, so a child started by a big parent would report the parent's peak.)"""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _blocks(total: int) -> Iterator[bytes]:
    """``total`` bytes in 1 MiB blocks, each a fresh object (as a real producer makes)."""
    seed = os.urandom(_BLOCK)
    sent = 0
    i = 0
    while sent < total:
        n = min(_BLOCK, total - sent)
        block = bytearray(seed[:n])
        block[:8] = i.to_bytes(8, "little")
        yield bytes(block)
        sent += n
        i += 1


def _config(args: argparse.Namespace) -> EngineConfig:
    return EngineConfig(
        endpoint_url=args.endpoint_url,
        region=args.region,
        addressing_style="path",
        part_size=args.part_mib * MiB,
        max_concurrency=args.concurrency,
    )


def memory(args: argparse.Namespace) -> dict[str, Any]:
    """Stream ``size`` bytes from a generator (deferred, then aborted) and report RSS."""
    size = args.size_mib * MiB

    async def main() -> dict[str, Any]:
        async with UploadEngine(_config(args)) as engine:
            await engine.put_object(args.bucket, "zerorename-bench/warmup", b"w")
            baseline = _rss_bytes()
            peak_before = _peak_rss_bytes()
            t0 = time.perf_counter()
            pending = await engine.upload(
                args.bucket, "zerorename-bench/stream-memory.bin", _blocks(size), defer=True
            )
            seconds = time.perf_counter() - t0
            await engine.abort(pending)
            await engine.delete_objects(args.bucket, ["zerorename-bench/warmup"])
        peak = _peak_rss_bytes()
        bound = (args.concurrency + 2) * args.part_mib * MiB + 64 * MiB
        return {
            "bytes": size,
            "part_size": args.part_mib * MiB,
            "concurrency": args.concurrency,
            "baseline_rss_mib": round(baseline / MiB, 1),
            "peak_rss_mib": round(peak / MiB, 1),
            "peak_before_upload_mib": round(peak_before / MiB, 1),
            "growth_mib": round((peak - baseline) / MiB, 1),
            "bound_growth_mib": round(bound / MiB, 1),
            "within_bound": peak - baseline < bound,
            "seconds": round(seconds, 2),
            "mib_per_s": round(size / MiB / seconds, 1),
        }

    return run(main())


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _boto3_client(args: argparse.Namespace, unsigned: bool) -> Any:
    import boto3
    from botocore.config import Config

    s3: dict[str, Any] = {"addressing_style": "path"}
    if unsigned:
        s3["payload_signing_enabled"] = False
    return boto3.client(
        "s3",
        endpoint_url=args.endpoint_url,
        region_name=args.region,
        config=Config(s3=s3, max_pool_connections=args.concurrency + 4),
    )


def compare(args: argparse.Namespace) -> dict[str, Any]:
    """Alternate engine and boto3 uploads of the same bytes; medians of each."""
    from boto3.s3.transfer import TransferConfig

    size = args.size_mib * MiB
    data = os.urandom(size)
    transfer = TransferConfig(
        multipart_threshold=args.part_mib * MiB,
        multipart_chunksize=args.part_mib * MiB,
        max_concurrency=args.concurrency,
        use_threads=True,
    )
    clients = {"boto3": _boto3_client(args, False), "boto3_unsigned": _boto3_client(args, True)}
    results: dict[str, list[tuple[float, float]]] = {"engine": [], **{k: [] for k in clients}}
    key = "zerorename-bench/compare.bin"

    async def engine_upload() -> None:
        async with UploadEngine(_config(args)) as engine:
            await engine.upload(args.bucket, key, data)

    for _ in range(args.runs):
        for name in ["engine", *clients]:
            c0, t0 = _cpu(), time.perf_counter()
            if name == "engine":
                run(engine_upload())
            else:
                clients[name].upload_fileobj(io.BytesIO(data), args.bucket, key, Config=transfer)
            secs, cpu = time.perf_counter() - t0, _cpu() - c0
            results[name].append((size / MiB / secs, cpu / (size / (1024 * MiB))))
    clients["boto3"].delete_object(Bucket=args.bucket, Key=key)
    summary: dict[str, Any] = {
        "bytes": size,
        "part_size": args.part_mib * MiB,
        "concurrency": args.concurrency,
        "runs": args.runs,
    }
    base = statistics.median(r[0] for r in results["boto3"])
    base_cpu = statistics.median(r[1] for r in results["boto3"])
    for name, rows in results.items():
        mibs = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        summary[name] = {
            "mib_per_s": round(mibs, 1),
            "cpu_s_per_gib": round(cpu, 3),
            "speed_vs_boto3": round(mibs / base, 2),
            "cpu_vs_boto3": round(cpu / base_cpu, 2),
            "all_mib_per_s": [round(r[0], 1) for r in rows],
        }
    return summary


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(
        prog="python -m zerorename.perf.engine_bench", description=__doc__.split("\n")[0]
    )
    sub = p.add_subparsers(dest="bench", required=True)
    for name, size, part, conc, text in (
        ("memory", 2048, 8, 8, "peak RSS of a generator-fed deferred upload"),
        ("compare", 1024, 16, 16, "engine vs boto3 upload_fileobj, alternated"),
    ):
        sp = sub.add_parser(name, help=text)
        sp.add_argument(
            "--endpoint-url",
            default=os.environ.get("AWS_ENDPOINT_URL"),
            help="S3 endpoint (default: $AWS_ENDPOINT_URL or AWS)",
        )
        sp.add_argument(
            "--region",
            default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
            help="region (default: $AWS_DEFAULT_REGION or us-east-1)",
        )
        sp.add_argument("--bucket", required=True, help="an existing bucket to write into")
        sp.add_argument("--size-mib", type=int, default=size, help=f"MiB (default: {size})")
        sp.add_argument(
            "--part-mib", type=int, default=part, help=f"part size in MiB (default: {part})"
        )
        sp.add_argument(
            "--concurrency", type=int, default=conc, help=f"parts in flight (default: {conc})"
        )
        if name == "compare":
            sp.add_argument(
                "--runs", type=int, default=3, help="alternated runs of each client (default: 3)"
            )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = memory(args) if args.bench == "memory" else compare(args)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
