"""``zerorename perf``: the benchmark harness as a subcommand (see perf.harness).

:func:`parser` is the same command standing alone: ``zerorename perf ...`` is parsed by it
(zerorename.cli), so the harness starts without the engine, the committers or the other
commands. In the full parser (``zerorename --help``) the command adds ``perf`` as a lazy
subcommand filled by :func:`define`, with :data:`HELP` and :data:`FORMAT`, so the harness
and its scenarios are imported only if ``perf`` is parsed there."""

from __future__ import annotations

import argparse
from typing import Any

from zerorename.perf import SCENARIO_NAMES

PROG = "zerorename perf"
#: the parser's settings (the harness's description is laid out by hand)
FORMAT: dict[str, Any] = {"formatter_class": argparse.RawDescriptionHelpFormatter}
#: ``perf``'s line in ``zerorename --help``: its scenarios, from the one list of them
HELP = "benchmarks against moto, Ceph RGW, a sink or your S3 endpoint: " + ", ".join(SCENARIO_NAMES)


def define(parser: argparse.ArgumentParser) -> None:
    """The harness's description and arguments on ``parser``."""
    from zerorename.perf import harness

    parser.description = harness.__doc__
    harness.build_parser(parser)


def parser() -> argparse.ArgumentParser:
    """``zerorename perf`` alone: the parser the subcommand's is (same prog, options, help)."""
    p = argparse.ArgumentParser(prog=PROG, **FORMAT)
    define(p)
    return p
