"""``zerorename perf``: the benchmark harness as a subcommand (see perf.harness)."""

from __future__ import annotations

import argparse
from typing import Any

from zerorename.perf import harness


def add_subcommands(sub: Any) -> None:
    perf = sub.add_parser(
        "perf",
        help="benchmarks against moto, Ceph RGW, a sink or your S3 endpoint: upload, many, "
        "commit, sweep, spark",
        description=harness.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harness.build_parser(perf)
