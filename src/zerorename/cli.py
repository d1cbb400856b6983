"""The `zerorename` command's entry point (``zerorename.cli:main``, ``python -m
zerorename``, ``python -m zerorename.cli``).

It imports nothing heavy itself: the commands (:mod:`zerorename.commands`, with the engine,
botocore and aiohttp behind them) are imported inside :func:`main`, so a Ctrl-C that lands
while they load is one line and exit code 130, never a traceback. ``zerorename perf`` is
parsed by the harness's own parser (:func:`zerorename.perf.cli.parser`, the same options
and help as the subcommand): the benchmark harness never loads the engine, the committers
or the other commands (~1.1 s of CPU at every start). Every command's errors go through
:func:`run_parsed`. Attributes of the commands module (``parse_s3_url``, ``build_parser``,
...) are reachable here as before.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from zerorename.clirun import INTERRUPTED as INTERRUPTED
from zerorename.clirun import missing_extra as missing_extra
from zerorename.clirun import one_line as one_line
from zerorename.clirun import run_parsed


def main(argv: Sequence[str] | None = None) -> int:
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        if words[:1] == ["perf"]:
            from zerorename.perf import cli as perf_cli

            parser = perf_cli.parser()
            args = parser.parse_args(words[1:])
            args.command, args.verbose = "perf", False
            return run_parsed(parser, args)
        from zerorename import commands

        return commands.main(argv)
    except KeyboardInterrupt:
        print("zerorename: interrupted", file=sys.stderr)
        return INTERRUPTED


def __getattr__(name: str) -> Any:
    if name.startswith("__"):  # the import system asks for __path__, __spec__, ...
        raise AttributeError(name)
    from zerorename import commands

    return getattr(commands, name)


if __name__ == "__main__":
    sys.exit(main())
