"""``many``: many objects of one size (count x size), zerorename next to boto3/s3transfer
(one TransferManager, as ``aws s3 cp --recursive`` does) and obstore.

Reports objects/s, MB/s, client CPU ms per object and peak RSS. Every object is listed and
checked after the run, then deleted (untimed).
"""

from __future__ import annotations

import argparse

from zerorename.perf.model import Run, Sample, Target, positive_int
from zerorename.perf.scenarios import upload as upload_scenario
from zerorename.units import format_size, parse_size

NAME = "many"
HELP = "many objects (count x size): objects/s and MB/s, next to boto3 and obstore"
OURS = upload_scenario.OURS
#: the upload's clients but the floor (measured for one large object only)
CLIENTS = tuple(c for c in upload_scenario.CLIENTS if c != "floor")
DEFAULT_CLIENTS = tuple(c for c in upload_scenario.DEFAULT_CLIENTS if c != "floor")
PAIRS = upload_scenario.PAIRS
RATIO_METRICS = ("objects_s", "mb_s", "cpu_ms_per_object", "peak_rss_mib")

_FUNCS = {
    "zerorename": "zerorename.perf.clients:many_zerorename",
    "zerorename-matched": "zerorename.perf.clients:many_zerorename",
    "boto3-default": "zerorename.perf.clients:many_boto3_default",
    "boto3-matched": "zerorename.perf.clients:many_boto3_matched",
    "boto3-when-required": "zerorename.perf.clients:many_boto3_when_required",
    "obstore": "zerorename.perf.clients:many_obstore",
    "awscrt": "zerorename.perf.crt:many_awscrt",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    upload_scenario.add_transfer_arguments(p, size="256KiB", part="16MiB")
    p.add_argument(
        "--count", type=positive_int, default=2000, help="objects per run (default: 2000)"
    )
    p.add_argument(
        "--clients",
        default=",".join(DEFAULT_CLIENTS),
        help="comma-separated subset of " + ", ".join(CLIENTS) + " (default: all but "
        "boto3-when-required; obstore and awscrt only when installed)",
    )


def plan(args: argparse.Namespace, target: Target) -> list[Run]:
    size = parse_size(args.size)
    base = {
        "count": args.count,
        "size": size,
        "part_size": parse_size(args.part_size),
        "concurrency": args.concurrency,
        "pool": args.pool or args.concurrency,
        "checksum": args.checksum,
        "matched_checksum": upload_scenario.matched_checksum(args.checksum),
    }
    group = f"{args.count}x{format_size(size)}"
    runs = []
    for client in upload_scenario.select_clients(args.clients, args.checksum, CLIENTS):
        params = dict(base)
        if client == "zerorename-matched":
            params["checksum"] = params["matched_checksum"]
        runs.append(Run(client, _FUNCS[client], params, group))
    return runs


def notes(samples: list[Sample], args: argparse.Namespace) -> list[str]:
    return upload_scenario.notes(samples, args)
