"""``zerorename perf``: the benchmarks as subcommands (each prints one JSON document)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from zerorename.perf import engine_bench


def _engine(args: argparse.Namespace) -> int:
    out = engine_bench.memory(args) if args.bench == "memory" else engine_bench.compare(args)
    print(json.dumps(out, indent=2))
    return 0


def _commit(args: argparse.Namespace) -> int:
    from zerorename.perf import commit_bench

    rest = [a for a in args.commit_args if a != "--"]
    return commit_bench.main(rest)


def add_subcommands(sub: Any) -> None:
    perf = sub.add_parser(
        "perf",
        help="benchmarks: upload memory, engine vs boto3, job commit at scale",
        description="Benchmarks against any S3 endpoint; each prints one JSON document.",
    )
    engine_bench.build_parser(perf)
    inner = next(a for a in perf._actions if isinstance(a, argparse._SubParsersAction))
    commit = inner.add_parser(
        "commit",
        help="job commit of N uploads in M pendingsets: time and peak RSS "
        "(arguments: see `python -m zerorename.perf.commit_bench --help`)",
    )
    commit.add_argument("commit_args", nargs=argparse.REMAINDER)
    perf.set_defaults(func=_engine)
    commit.set_defaults(func=_commit)
