"""Benchmark: job commit of many deferred uploads in many pendingsets, with peak RSS.

    python -m zerorename.perf.commit_bench --uploads 100000 --pendingsets 1000

Against a moto server started as a subprocess by default (its memory is not ours), or
``--endpoint-url`` (credentials from the AWS environment). Preparing the uploads runs in
this process; the job commit runs in a fresh child process, so its peak RSS
(``ru_maxrss``) is the commit's alone. Prints one JSON report; exit 1 when the peak RSS
is over ``--max-rss-mib``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from zerorename.committers import CommitOptions, MagicCommitter, TaskCommitSummary
from zerorename.engine import EngineConfig, UploadEngine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peak_rss_mib() -> float:
    """This process's peak RSS: VmHWM (reset by exec, unlike ru_maxrss, which a child
    inherits from the process it was forked from), else ru_maxrss."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _engine_config(args: argparse.Namespace) -> EngineConfig:
    keys: dict[str, Any] = {}
    if args.moto:
        keys = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    return EngineConfig(
        endpoint_url=args.endpoint_url,
        region=args.region,
        addressing_style="path",
        checksum="none",
        part_size=5 * 1024 * 1024,
        batch_concurrency=args.concurrency,
        **keys,
    )


async def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Set up a job and commit ``pendingsets`` tasks holding ``uploads`` uploads in all."""
    per_task = [
        args.uploads // args.pendingsets + (i < args.uploads % args.pendingsets)
        for i in range(args.pendingsets)
    ]
    t0 = time.monotonic()
    async with UploadEngine(_engine_config(args)) as eng:
        if args.create_bucket:
            import boto3

            boto3.client(
                "s3",
                endpoint_url=args.endpoint_url,
                region_name=args.region,
                aws_access_key_id="testing" if args.moto else None,
                aws_secret_access_key="testing" if args.moto else None,
            ).create_bucket(Bucket=args.bucket)
        committer = MagicCommitter(
            eng, f"s3://{args.bucket}/{args.dest}", options=CommitOptions(pending_records=False)
        )
        job = await committer.setup_job()
        sem = asyncio.Semaphore(args.prepare_tasks)
        summaries: list[TaskCommitSummary] = []

        async def task(t: int) -> None:
            async with sem:
                ta = job.task_attempt(t, 0)
                await ta.setup()
                for f in range(per_task[t]):
                    async with ta.open(f"part-{t:05d}-{f:04d}.bin") as out:
                        await out.write(b"x")
                summaries.append(await ta.commit())

        await asyncio.gather(*(task(t) for t in range(args.pendingsets)))
    args.prepared = sorted(summaries, key=lambda s: s.task_id)
    return {"job_id": job.job_id, "prepare_seconds": round(time.monotonic() - t0, 1)}


async def commit(args: argparse.Namespace, summaries: list[TaskCommitSummary]) -> dict[str, Any]:
    """Commit the prepared job (in a fresh process: this RSS is the commit's)."""
    rss_start = peak_rss_mib()
    ticks: list[float] = []
    async with UploadEngine(_engine_config(args)) as eng:
        committer = MagicCommitter(
            eng, f"s3://{args.bucket}/{args.dest}", options=CommitOptions(window=args.window)
        )
        job = await committer.open_job(args.job_id)
        t0 = time.monotonic()
        result = await job.commit(summaries, progress=lambda p: ticks.append(p.elapsed))
        seconds = time.monotonic() - t0
        requests = eng.stats.requests
    peak = peak_rss_mib()
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    return {
        "files": result.files,
        "pendingsets": result.pendingsets,
        "commit_seconds": round(seconds, 1),
        "completes_per_second": round(result.files / seconds, 1) if seconds else None,
        "peak_rss_mib": round(peak, 1),
        "rss_before_commit_mib": round(rss_start, 1),
        "progress_reports": len(ticks),
        "max_progress_gap_seconds": round(max(gaps), 2) if gaps else None,
        "requests": requests,
        "retries": result.retries,
        "throttles": result.throttles,
    }


def _start_moto() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import logging,sys;logging.getLogger('werkzeug').setLevel(logging.ERROR);"
            "from moto.server import ThreadedMotoServer as S;"
            f"s=S(ip_address='127.0.0.1', port={port}, verbose=False);s.start();"
            "sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("moto server did not start")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="commit_bench", description=__doc__.split("\n")[0])
    p.add_argument("phase", nargs="?", default="run", choices=["run", "prepare", "commit"])
    p.add_argument("--uploads", type=int, default=100_000)
    p.add_argument("--pendingsets", type=int, default=1_000)
    p.add_argument("--endpoint-url", default=None)
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--bucket", default=None)
    p.add_argument("--dest", default="bench/commit")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--window", type=int, default=8)
    p.add_argument("--prepare-tasks", type=int, default=32)
    p.add_argument("--max-rss-mib", type=float, default=200.0)
    p.add_argument("--job-id", default=None)
    p.add_argument("--summaries", default=None)
    p.add_argument("--moto", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--create-bucket", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.phase == "commit":
        text = Path(args.summaries).read_text(encoding="utf-8")
        summaries = [TaskCommitSummary.from_json(line) for line in text.splitlines()]
        print(json.dumps(asyncio.run(commit(args, summaries))))
        return 0
    moto = None
    if args.endpoint_url is None:
        moto, args.endpoint_url = _start_moto()
        args.moto = args.create_bucket = True
    args.bucket = args.bucket or f"zr-bench-{uuid.uuid4().hex[:12]}"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            args.summaries = args.summaries or str(Path(tmp) / "summaries.jsonl")
            report: dict[str, Any] = {
                "uploads": args.uploads,
                "pendingsets": args.pendingsets,
                "endpoint": "moto" if args.moto else args.endpoint_url,
            }
            report.update(asyncio.run(prepare(args)))
            Path(args.summaries).write_text(
                "".join(s.to_json() + "\n" for s in args.prepared), encoding="utf-8"
            )
            if args.phase == "prepare":
                print(json.dumps(report))
                return 0
            cmd = [
                sys.executable,
                "-m",
                "zerorename.perf.commit_bench",
                "commit",
                "--endpoint-url",
                args.endpoint_url,
                "--region",
                args.region,
                "--bucket",
                args.bucket,
                "--dest",
                args.dest,
                "--job-id",
                report["job_id"],
                "--summaries",
                args.summaries,
                "--concurrency",
                str(args.concurrency),
                "--window",
                str(args.window),
            ] + (["--moto"] if args.moto else [])
            out = subprocess.run(
                cmd, check=True, capture_output=True, text=True, env=dict(os.environ)
            )
            report.update(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        if moto is not None:
            moto.kill()
            moto.wait()
    report["rss_ok"] = report["peak_rss_mib"] < args.max_rss_mib
    print(json.dumps(report, indent=1))
    return 0 if report["rss_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
