"""``zerorename perf``: the benchmark harness as a subcommand (see perf.harness).

:func:`parser` is the same command standing alone: ``zerorename perf ...`` is parsed by it
(zerorename.cli), so the harness starts without the engine, the committers or the other
commands; :func:`add_subcommands` puts it in the full parser (``zerorename --help``), where
the harness and its scenarios are imported only if ``perf`` is parsed there."""

from __future__ import annotations

import argparse
from typing import Any

from zerorename.cliopts import lazy_subparser

PROG = "zerorename perf"
_FORMAT: dict[str, Any] = {"formatter_class": argparse.RawDescriptionHelpFormatter}


def _define(parser: argparse.ArgumentParser) -> None:
    """The harness's description and arguments on ``parser``."""
    from zerorename.perf import harness

    parser.description = harness.__doc__
    harness.build_parser(parser)


def add_subcommands(sub: Any) -> None:
    lazy_subparser(
        sub,
        "perf",
        _define,
        help="benchmarks against moto, Ceph RGW, a sink or your S3 endpoint: upload, many, "
        "commit, sweep, spark",
        **_FORMAT,
    )


def parser() -> argparse.ArgumentParser:
    """``zerorename perf`` alone: the parser the subcommand's is (same prog, options, help)."""
    p = argparse.ArgumentParser(prog=PROG, **_FORMAT)
    _define(p)
    return p
