"""``upload``: one large object, zerorename next to boto3 (default and matched) and obstore.

Reports MB/s (10^6 bytes per second), client CPU seconds per GiB, peak RSS and its
growth over the RSS before the transfer. The data comes from one file written before the
first run (``--source file``, the default: every client reads the same file through the
page cache), is generated in memory by each run (``--source memory``), or streams from a
generator of 1 MiB blocks (``--source stream``: a non-seekable source, so the peak RSS
growth is each client's own buffering; the engine's bound is (concurrency + 2) x part
size).
"""

from __future__ import annotations

import argparse
import atexit
import os
import tempfile

from zerorename.perf import crt, floor
from zerorename.perf.clients import botocore_checksums, make_data
from zerorename.perf.model import (
    Run,
    Sample,
    Target,
    parse_list,
    positive_float,
    positive_int,
    size_arg,
)
from zerorename.perf.scenarios import upload_latency
from zerorename.units import format_size, parse_size

NAME = "upload"
HELP = "one large object: MB/s, client CPU s/GiB and peak RSS, next to boto3 and obstore"
OURS = ("zerorename", "zerorename-matched")
#: measured unless --clients says otherwise
DEFAULT_CLIENTS = (
    "zerorename",
    "zerorename-matched",
    "boto3-default",
    "boto3-matched",
    "obstore",
    "awscrt",
    "floor",
)
#: boto3-when-required: boto3's defaults but checksums only where S3 requires them, as
#: Ceph and MinIO users run boto3 >= 1.36 (its default trailing checksums over HTTPS are
#: refused by RGW pacific: MissingContentLength)
CLIENTS = (*DEFAULT_CLIENTS, "boto3-when-required")

#: the ratios shown: ours against users' default, the same settings, a native client
PAIRS = [
    ("zerorename", "boto3-default"),
    ("zerorename", "boto3-matched"),
    ("zerorename", "boto3-when-required"),
    ("zerorename-matched", "boto3-matched"),
    ("zerorename", "obstore"),
    ("zerorename", "awscrt"),
]
#: the metric the "x floor" column divides by the floor's (same group, same run)
FLOOR_METRIC = "cpu_s_per_gib"
RATIO_METRICS = ("mb_s", "cpu_s_per_gib", "peak_rss_mib")

_FUNCS = {
    "zerorename": "zerorename.perf.clients:upload_zerorename",
    "zerorename-matched": "zerorename.perf.clients:upload_zerorename",
    "boto3-default": "zerorename.perf.clients:upload_boto3_default",
    "boto3-matched": "zerorename.perf.clients:upload_boto3_matched",
    "boto3-when-required": "zerorename.perf.clients:upload_boto3_when_required",
    "obstore": "zerorename.perf.clients:upload_obstore",
    "awscrt": "zerorename.perf.crt:upload_awscrt",
    "floor": "zerorename.perf.floor:upload_floor",
}
_files: dict[int, str] = {}


def add_transfer_arguments(p: argparse.ArgumentParser, *, size: str, part: str) -> None:
    p.add_argument(
        "--size", type=size_arg, default=size, help=f"bytes per object (default: {size})"
    )
    p.add_argument(
        "--part-size", type=size_arg, default=part, help=f"multipart part size (default: {part})"
    )
    p.add_argument(
        "--concurrency", type=positive_int, default=16, help="requests in flight (default: 16)"
    )
    p.add_argument(
        "--pool",
        type=positive_int,
        default=None,
        help="HTTP connections in the pool, for every client (default: = concurrency)",
    )
    p.add_argument(
        "--checksum",
        default="CRC32C",
        choices=["CRC32C", "CRC32", "SHA256", "none"],
        help="zerorename's per-part checksum (default: CRC32C). boto3-matched uses the "
        "same one when botocore can compute it (CRC32C needs awscrt), else CRC32, and "
        "then zerorename-matched runs the engine with CRC32 too",
    )


def add_latency_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--latency-ms",
        type=positive_float,
        default=None,
        help="add this latency to every request, sent through the fault proxy (http "
        "targets): the store as if it were that far away (default: none: no proxy)",
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_transfer_arguments(p, size="1GiB", part="16MiB")
    add_latency_argument(p)
    p.add_argument(
        "--source",
        default="file",
        choices=["file", "memory", "stream"],
        help="where the bytes come from: a file written before the first run, bytes in "
        "memory, or a generator of 1 MiB blocks (non-seekable: memory is the client's own "
        "buffering) (default: file)",
    )
    p.add_argument(
        "--clients",
        default=",".join(DEFAULT_CLIENTS),
        help="comma-separated subset of " + ", ".join(CLIENTS) + " (default: all but "
        "boto3-when-required; zerorename-matched only when its settings differ from "
        "zerorename's, obstore and awscrt only when installed; floor: the least CPU that "
        "moves the same bytes, --source file only)",
    )


def data_file(size: int) -> str:
    """A file of ``size`` bytes written once per process (removed at exit)."""
    path = _files.get(size)
    if path is None:
        fd, path = tempfile.mkstemp(prefix="zr-perf-", suffix=".bin")
        with os.fdopen(fd, "wb") as f:
            chunk = make_data(min(size, 64 << 20))
            left = size
            while left > 0:
                f.write(chunk[: min(left, len(chunk))])
                left -= len(chunk)
        atexit.register(os.unlink, path)
        _files[size] = path
    return path


def matched_checksum(checksum: str) -> str:
    return checksum if checksum in botocore_checksums() else "CRC32"


def obstore_available() -> bool:
    try:
        import obstore  # noqa: F401
    except ImportError:
        return False
    return True


def select_clients(text: str, checksum: str, allowed: tuple[str, ...]) -> list[str]:
    chosen = parse_list(text)
    unknown = [c for c in chosen if c not in allowed]
    if unknown:
        raise SystemExit(f"unknown client(s) {', '.join(unknown)}; choose from {allowed}")
    if matched_checksum(checksum) == checksum and "zerorename-matched" in chosen:
        chosen.remove("zerorename-matched")  # zerorename already runs boto3-matched's settings
    if "obstore" in chosen and not obstore_available():
        chosen.remove("obstore")
    if "awscrt" in chosen and not crt.available():
        chosen.remove("awscrt")  # the notes say so (skipped(): not an error)
    return chosen


def skipped(text: str, source: str = "file") -> list[str]:
    """One line per asked-for client that does not run here, and why."""
    chosen = parse_list(text)
    out = []
    if "awscrt" in chosen and not crt.available():
        out.append("awscrt: not installed here (pip install awscrt): skipped")
    if "floor" in chosen and source != "file":
        out.append("floor: measured from a file only (--source file): skipped")
    return out


def plan(args: argparse.Namespace, target: Target) -> list[Run]:
    size, part = parse_size(args.size), parse_size(args.part_size)
    upload_latency.check_target(args.latency_ms, target)
    base = {
        "size": size,
        "part_size": part,
        "concurrency": args.concurrency,
        "pool": args.pool or args.concurrency,
        "source": args.source,
        "checksum": args.checksum,
        "matched_checksum": matched_checksum(args.checksum),
    }
    if args.source == "file":
        base["path"] = data_file(size)
    group = f"{format_size(size)}/{format_size(part)}x{args.concurrency}"
    runs = []
    for client in select_clients(args.clients, args.checksum, CLIENTS):
        if client == "floor" and args.source != "file":
            continue
        params = dict(base)
        if client == "zerorename-matched":
            params["checksum"] = params["matched_checksum"]
        func, params = upload_latency.wrap(_FUNCS[client], params, args.latency_ms)
        runs.append(Run(client, func, params, group))
    return runs


def notes(samples: list[Sample], args: argparse.Namespace) -> list[str]:
    out = upload_latency.note(getattr(args, "latency_ms", None))  # many shares these notes
    out += skipped(args.clients, getattr(args, "source", "file"))
    seen = {s.client for s in samples}
    out += [m.NOTE for m in (crt, floor) if m.NAME in seen]
    mc = matched_checksum(args.checksum)
    if mc != args.checksum:
        out.append(
            f"boto3-matched: unsigned payload, {mc} checksums (botocore needs awscrt for "
            f"{args.checksum}); zerorename-matched is the engine with the same settings."
        )
    if any(s.client == "boto3-default" for s in samples):
        out.append(
            "boto3-default: botocore's default config (SHA-256 payload signing over http, "
            "CRC32 when supported: a trailing checksum over https), TransferConfig with the "
            "same part size and concurrency, and a pool as large."
        )
    if any(s.client == "boto3-when-required" for s in samples):
        out.append(
            "boto3-when-required: boto3-default with request_checksum_calculation="
            "when_required (AWS_REQUEST_CHECKSUM_CALCULATION), as Ceph/MinIO users run boto3."
        )
    return out
