"""``zerorename perf``: the benchmark harness as a subcommand (see perf.harness).

:func:`parser` is the same command standing alone: ``zerorename perf ...`` is parsed by it
(zerorename.cli), so the harness starts without the engine, the committers or the other
commands; :func:`add_subcommands` puts it in the full parser (``zerorename --help``)."""

from __future__ import annotations

import argparse
from typing import Any

from zerorename.perf import harness

PROG = "zerorename perf"
_OPTIONS: dict[str, Any] = {
    "description": harness.__doc__,
    "formatter_class": argparse.RawDescriptionHelpFormatter,
}


def add_subcommands(sub: Any) -> None:
    perf = sub.add_parser(
        "perf",
        help="benchmarks against moto, Ceph RGW, a sink or your S3 endpoint: upload, many, "
        "commit, sweep, spark",
        **_OPTIONS,
    )
    harness.build_parser(perf)


def parser() -> argparse.ArgumentParser:
    """``zerorename perf`` alone: the parser the subcommand's is (same prog, options, help)."""
    return harness.build_parser(argparse.ArgumentParser(prog=PROG, **_OPTIONS))
