"""The arguments of the committer commands (``uploads``, ``jobs``, ``inspect``), apart from
the code that runs them (:mod:`zerorename.cli.jobs`): the standard library and the light
:mod:`zerorename.cli.options` only, so ``zerorename --help``, ``uploads list --help`` or a
usage error loads no committer, engine or HTTP stack. The caller says what runs each parsed
command (``run``): the ``zerorename`` command imports the handlers only once a command
runs; :mod:`zerorename.cli.jobs` passes its own."""

from __future__ import annotations

import argparse
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from zerorename.cli.options import add_engine_options

if TYPE_CHECKING:
    from zerorename.committers.paths import Destination
    from zerorename.engine import UploadEngine
    from zerorename.spark_adapter.stream.jobs import StreamJobReply

#: the commands :func:`add_subcommands` defines, by the name ``run`` is given
COMMAND_NAMES = ("uploads list", "uploads abort", "jobs", "inspect")

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


#: ``(engine, destination, job id, action) -> reply``, or None when the job is no stream's:
#: the ``zerorename`` command passes the streaming sink's (``spark_adapter.stream.jobs``),
#: which keeps a query's log and its destination consistent (this layer knows no streams)
StreamJobs = Callable[["UploadEngine", "Destination", str, str], Awaitable["StreamJobReply | None"]]
#: the ids of every streaming query's batch jobs at a destination (``jobs list``'s kind)
StreamJobIds = Callable[["UploadEngine", "Destination"], Awaitable[frozenset[str]]]


class Bar(Protocol):
    """A progress display (the ``zerorename`` command's, :mod:`zerorename.cli.progress`)."""

    def advance(self, n: int) -> None: ...

    def update(self, done: int, total: int | None = None) -> None: ...

    def close(self) -> None: ...


#: ``(args, label, total or None, unit) -> Bar``: opens the display a command asked for
Progress = Callable[[argparse.Namespace, str, "int | None", str], Bar]
#: a parsed command's name (one of :data:`COMMAND_NAMES`) -> what runs it
Run = Callable[[str], Callable[[argparse.Namespace], int]]


def parse_age(text: str) -> float:
    """``90``, ``45s``, ``30m``, ``2h``, ``1d``, ``1w`` -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not an age like 90s, 30m, 2h or 1d")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def add_subcommands(
    sub: Any,
    *,
    run: Run,
    stream_jobs: StreamJobs | None = None,
    stream_ids: StreamJobIds | None = None,
    progress: Progress | None = None,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> None:
    """Add ``uploads``, ``jobs`` and ``inspect`` to an argparse subparsers object; ``run``
    gives what runs each (by its name in :data:`COMMAND_NAMES`); ``stream_jobs``: the hook
    ``jobs show|resume|abort`` run for a streaming query's batch job (without it such a
    job is treated as any other); ``stream_ids``: the hook that names such jobs for ``jobs
    list`` (kind ``stream``); ``progress``: the display of ``uploads abort`` and ``jobs
    resume|abort`` (the ``zerorename`` command's), with ``options`` adding its flags."""
    up = sub.add_parser("uploads", help="list or abort pending multipart uploads under a prefix")
    upsub = up.add_subparsers(dest="uploads_command", metavar="ACTION", required=True)
    for name, text in (("list", "list pending uploads"), ("abort", "abort pending uploads")):
        p = upsub.add_parser(name, help=text)
        p.add_argument(
            "prefix",
            help="s3://bucket/prefix (taken as a directory; empty components are refused)",
        )
        p.add_argument(
            "--older-than",
            type=parse_age,
            metavar="AGE",
            help="only uploads initiated longer ago (90s, 30m, 2h, 1d)",
        )
        if name == "list":
            p.add_argument(
                "--json", action="store_true", help="one JSON document (schema: README, CLI)"
            )
            p.set_defaults(func=run("uploads list"))
        else:
            p.add_argument("--dry-run", action="store_true", help="only print what would go")
            p.add_argument(
                "--json", action="store_true", help="one JSON document (schema: README, CLI)"
            )
            p.add_argument(
                "--all-of-bucket",
                action="store_true",
                help="PREFIX is a whole bucket (s3://bucket) and every pending upload in it, "
                "any job's or writer's, is to be aborted; without it a whole bucket is refused "
                "(so an unset variable in s3://bucket/$PREFIX never widens to the bucket)",
            )
            p.set_defaults(func=run("uploads abort"), progress_hook=progress)
            if options is not None:
                options(p)
        add_engine_options(p)

    jobs = sub.add_parser("jobs", help="jobs under a destination: list, show, resume, abort")
    jobs.add_argument("action", choices=["list", "show", "resume", "abort"])
    jobs.add_argument("dest", help="s3://bucket/destination")
    jobs.add_argument("job_id", nargs="?", metavar="JOB_ID")
    jobs.add_argument("--json", action="store_true", help="one JSON document (schema: README, CLI)")
    add_engine_options(jobs)
    if options is not None:
        options(jobs)
    jobs.set_defaults(
        func=run("jobs"),
        stream_jobs=stream_jobs,
        stream_ids=stream_ids,
        progress_hook=progress,
    )

    ins = sub.add_parser(
        "inspect", help="show a _SUCCESS, .pending or .pendingset record (zerorename's or S3A's)"
    )
    ins.add_argument("uri", help="s3://bucket/key, or a local file copied out of a store")
    ins.add_argument("--json", action="store_true")
    ins.add_argument(
        "--max-commits",
        type=int,
        default=20,
        help="commits of a pendingset to show (all are counted)",
    )
    add_engine_options(ins)
    ins.set_defaults(func=run("inspect"))
