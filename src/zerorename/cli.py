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

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it

log = logging.getLogger("zerorename.cli")

#: command -> the extra that installs its optional dependencies
_EXTRAS = {"demo": "demo", "perf": "perf"}
#: the optional dependencies (top-level module names) those extras bring
_OPTIONAL = frozenset(
    {
        "boto3",
        "cryptography",
        "matplotlib",
        "moto",
        "obstore",
        "psutil",
        "pyarrow",
        "pyinstrument",
        "pyspark",
        "rich",
    }
)


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


def run_parsed(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Run a parsed command (``args.func``, ``args.command``, ``args.verbose``): logging
    set up with secrets masked, every error one line on stderr (exit code 1)."""
    from zerorename import logsafe
    from zerorename.errors import ZeroRenameError

    logsafe.install()
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
        return code
    except ZeroRenameError as exc:  # the package's one root: CliError, engine, committers
        print(f"zerorename: error: {one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("zerorename: interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as exc:  # no traceback reaches a user: one line, the trace at -v
        log.debug("unexpected error", exc_info=True)
        extra = missing_extra(args.command, exc) if isinstance(exc, ModuleNotFoundError) else None
        if extra is not None:
            print(f"zerorename: error: {extra}", file=sys.stderr)
            return 1
        print(
            f"zerorename: error: unexpected {type(exc).__name__}: {one_line(exc)} "
            "(run with -v for details; please report it)",
            file=sys.stderr,
        )
        return 1


def missing_extra(command: str | None, exc: ModuleNotFoundError) -> str | None:
    """The one-line error for a command whose optional dependency is not installed, or
    None when ``exc`` is not that (a missing module of the product itself is a bug)."""
    module = (exc.name or "").partition(".")[0]
    extra = _EXTRAS.get(command or "")
    if extra is None or module not in _OPTIONAL:
        return None
    return f"zerorename {command} needs {module}: pip install 'zerorename[{extra}]'"


def one_line(exc: BaseException) -> str:
    """An error's message on one line, credential-shaped values masked."""
    from zerorename import logsafe

    text = " ".join(str(exc).split()) or type(exc).__name__
    return logsafe.scrub(text)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):  # the import system asks for __path__, __spec__, ...
        raise AttributeError(name)
    from zerorename import commands

    return getattr(commands, name)


if __name__ == "__main__":
    sys.exit(main())
