"""The ``zerorename`` command's entry point (:func:`main`, which ``zerorename.cli:main``,
``python -m zerorename`` and ``python -m zerorename.cli`` run) and every command's
arguments (:func:`build_parser`).

It imports nothing heavy itself, and a command loads only what it runs: the parser is
built from light modules (:mod:`.options`, :mod:`.jobargs`, the demo's, and ``perf``'s
only once ``perf`` is parsed), and each command's code (:mod:`.commands` with the engine,
botocore and aiohttp behind it; :mod:`.jobs` with the committers; the streaming sink's
hooks) is imported by name when the command runs. So ``--help``, ``--version`` and a
usage error load no engine, committer, Spark or benchmark code, and a Ctrl-C that lands
while a command loads is one line and exit code 130, never a traceback. ``zerorename
perf`` is parsed by the harness's own parser (:func:`zerorename.perf.cli.parser`, the same
options and help as the subcommand). Every command's errors go through
:func:`zerorename.cli.runner.run_parsed`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from zerorename.cli.options import add_engine_options
from zerorename.cli.runner import INTERRUPTED, run_parsed

if TYPE_CHECKING:
    from zerorename.committers.paths import Destination
    from zerorename.engine import UploadEngine
    from zerorename.spark_adapter.stream.jobs import StreamJobReply


def main(argv: Sequence[str] | None = None) -> int:
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        if words[:1] == ["perf"]:
            from zerorename.perf import cli as perf_cli

            parser = perf_cli.parser()
            args = parser.parse_args(words[1:])
            args.command, args.verbose = "perf", False
            return run_parsed(parser, args)
        parser = build_parser(lazy=True)
        return run_parsed(parser, parser.parse_args(words))
    except KeyboardInterrupt:
        print("zerorename: interrupted", file=sys.stderr)
        return INTERRUPTED


# --- what runs each command, imported when it runs ---------------------------------------


def _put(args: argparse.Namespace) -> int:
    from zerorename.cli import commands

    return commands.put(args)


def _finish(args: argparse.Namespace) -> int:
    from zerorename.cli import commands

    return commands.finish(args)


def _committer_command(name: str) -> Callable[[argparse.Namespace], int]:
    """What runs committer command ``name`` (:data:`zerorename.cli.jobs.COMMANDS`)."""

    def run(args: argparse.Namespace) -> int:
        from zerorename.cli import jobs as committer_commands

        return committer_commands.COMMANDS[name](args)

    return run


async def _stream_jobs(
    eng: UploadEngine, dest: Destination, job_id: str, action: str
) -> StreamJobReply | None:
    """The streaming sink's hook of ``jobs show|resume|abort`` (see ``jobargs.StreamJobs``)."""
    from zerorename.spark_adapter.stream.jobs import stream_job_action

    return await stream_job_action(eng, dest, job_id, action)


async def _stream_ids(eng: UploadEngine, dest: Destination) -> frozenset[str]:
    """The streaming sink's hook of ``jobs list`` (see ``jobargs.StreamJobIds``)."""
    from zerorename.spark_adapter.stream.jobs import stream_job_ids

    return await stream_job_ids(eng, dest)


# --- the arguments ------------------------------------------------------------------------


def build_parser(*, lazy: bool = False) -> argparse.ArgumentParser:
    """Every command's arguments, defined from light modules; what runs a command is
    imported when it runs. ``lazy``: ``perf``'s arguments (the harness and its scenarios)
    are defined only if ``perf`` is parsed, as :func:`main` does; without it, all at once
    (for a caller that walks every option)."""
    from zerorename import __version__
    from zerorename.cli import demo, jobargs
    from zerorename.cli.options import (
        PUT_DIR_DEFAULTS,
        LazyParser,
        add_json_option,
        add_progress_options,
        fill_all,
        lazy_subparser,
        open_progress,
        part_size_arg,
    )
    from zerorename.perf import cli as perf_commands
    from zerorename.units import MiB

    parser = argparse.ArgumentParser(
        prog="zerorename",
        description="Zero-rename writes into S3: deferred multipart uploads, committed jobs.",
    )
    parser.add_argument("--version", action="version", version=f"zerorename {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=LazyParser)

    put = sub.add_parser(
        "put",
        help="upload a file (or - for stdin) as a multipart upload, or a directory as one job",
    )
    put.add_argument("source", help="local file path, - to read standard input, or a directory")
    put.add_argument("dest", help="s3://bucket/key (a directory: s3://bucket/prefix/)")
    put.add_argument(
        "--defer",
        metavar="RECORD.json",
        help="upload the parts but do not complete; write the record here",
    )
    put.add_argument(
        "--part-size",
        type=part_size_arg,
        default=16 * MiB,
        metavar="SIZE",
        help="part size: bytes, or a binary suffix: 8m = 8MiB, 16MiB, 1g "
        "(default: 16MiB; 5MiB..5GiB)",
    )
    put.add_argument("--concurrency", type=int, default=16, help="parts in flight (default: 16)")
    put.add_argument(
        "--checksum",
        choices=["none", "CRC32", "CRC32C", "SHA256"],
        default="CRC32C",
        help="per-part checksum (default: CRC32C)",
    )
    put.add_argument(
        "--conflict",
        choices=["fail", "append", "replace"],
        default=PUT_DIR_DEFAULTS["conflict"],
        help="a directory: what its job commit does with what is already under the prefix "
        "(as the committers; default: append)",
    )
    put.add_argument(
        "--files",
        type=int,
        default=PUT_DIR_DEFAULTS["files"],
        metavar="N",
        help="a directory: files uploading at once (default: 8)",
    )
    put.add_argument(
        "--skip-unsupported",
        action="store_true",
        help="a directory: leave out symlinks, special files and names S3 cannot hold "
        "(one line each) instead of refusing the upload",
    )
    add_json_option(put)
    add_progress_options(put)
    add_engine_options(put)
    put.set_defaults(func=_put)

    for name, text in (
        ("complete", "complete deferred uploads from record files"),
        ("abort", "abort deferred uploads from record files"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("records", nargs="+", metavar="RECORD.json")
        add_json_option(p)
        add_progress_options(p)
        add_engine_options(p)
        p.set_defaults(func=_finish)

    jobargs.add_subcommands(
        sub,
        run=_committer_command,
        stream_jobs=_stream_jobs,
        stream_ids=_stream_ids,
        progress=open_progress,
        options=add_progress_options,
    )
    demo.add_subcommand(sub)
    lazy_subparser(
        sub, "perf", perf_commands.define, help=perf_commands.HELP, **perf_commands.FORMAT
    )
    return parser if lazy else fill_all(parser)
