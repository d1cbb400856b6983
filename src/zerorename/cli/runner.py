"""How every `zerorename` command runs once parsed (:func:`run_parsed`): logging with secrets
masked, each error one line on stderr, exit codes 0 / 1 / 2 / 130. Used by the entry point
(:mod:`zerorename.cli`) for every command, ``zerorename perf`` included, before the
command's own code is imported; stdlib imports only, so ``--help`` pays nothing for it.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable

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
        from zerorename import aio

        aio.cleanup_interrupted.set(_cleanup_notice())
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


def _cleanup_notice() -> Callable[[], None]:
    """What the CLI does when Ctrl-C finds a clean-up (a rollback, an abort) running or
    starts one: say once, on stderr, why it does not stop yet and how to stop now (the
    second Ctrl-C raises KeyboardInterrupt at once: asyncio.Runner's rule). Only for a
    real Ctrl-C: another cancel (a task group's) prints nothing."""
    said = False

    def notice() -> None:
        nonlocal said
        if said or not _interrupted():
            return
        said = True
        print(
            "zerorename: interrupted: finishing the clean-up first, so nothing is left "
            "half done; press Ctrl-C again to stop at once",
            file=sys.stderr,
            flush=True,
        )

    return notice


def _interrupted() -> bool:
    """Whether this process's asyncio.Runner got a Ctrl-C (its SIGINT handler, a partial
    of the runner's own method, counts them); False when that cannot be told."""
    import asyncio

    handler = signal.getsignal(signal.SIGINT)
    runner = getattr(getattr(handler, "func", None), "__self__", None)
    return isinstance(runner, asyncio.Runner) and getattr(runner, "_interrupt_count", 0) > 0


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
