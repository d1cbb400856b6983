"""Options the ``zerorename`` commands share: sizes (the one syntax of
:mod:`zerorename.units`), ``--json``, ``--quiet``/``--progress``, and the engine's
endpoint and credentials (:func:`add_engine_options` and :func:`engine_config`, the one
builder of both for every command that talks to S3); and :class:`LazyParser`, a
subcommand whose arguments are defined when it is used. A leaf of stdlib and light
modules: ``zerorename --help`` and a usage error load no engine."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, get_args

from zerorename.cli.progress import Bar, open_bar
from zerorename.units import format_size, parse_size

if TYPE_CHECKING:
    from zerorename.engine import EngineConfig

__all__ = [
    "ENDPOINT_ENV",
    "PUT_DIR_DEFAULTS",
    "LazyParser",
    "add_engine_options",
    "add_json_option",
    "add_progress_options",
    "endpoint_from",
    "engine_config",
    "fill_all",
    "lazy_subparser",
    "open_progress",
    "part_size_arg",
    "size_arg",
]

#: ``put``'s directory-only options and their defaults (a file refuses any other value)
PUT_DIR_DEFAULTS: dict[str, Any] = {"conflict": "append", "skip_unsupported": False, "files": 8}


def size_arg(text: str) -> int:
    """An argparse type for a size option: :func:`zerorename.units.parse_size` (bytes, or a
    binary suffix), the parser the harness and the Spark options use; a bad value is one
    usage line (exit 2)."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def part_size_arg(text: str) -> int:
    """``--part-size``: a size within S3's part limits. Plain digits are bytes, so the
    old ``--part-size 16`` (MiB) is refused with the suffixed size it most likely meant."""
    from zerorename.engine.planning import MAX_PART_SIZE, MIN_PART_SIZE  # only when given

    size = size_arg(text)
    if size < MIN_PART_SIZE and text.strip().isdigit():
        raise argparse.ArgumentTypeError(
            f"{text.strip()} is {size} bytes, below S3's 5MiB part minimum: sizes are bytes "
            f"or take a binary suffix (did you mean {text.strip()}m?)"
        )
    if not MIN_PART_SIZE <= size <= MAX_PART_SIZE:
        raise argparse.ArgumentTypeError(
            f"{text.strip()} ({format_size(size)}) is outside S3's part sizes (5MiB..5GiB)"
        )
    return size


#: the environment variables botocore reads an S3 endpoint from, the first set one winning
ENDPOINT_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def add_engine_options(p: argparse.ArgumentParser) -> None:
    """The options of every command that talks to S3 (credentials: the AWS chain); read
    back by :func:`engine_config`."""
    # the engine's choices, from a light module the demo's parser loads too (not at import:
    # ``zerorename perf`` loads this module and no engine module)
    from zerorename.engine.config import AddressingStyle

    p.add_argument(
        "--endpoint-url",
        help="S3 endpoint (default: $AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else AWS)",
    )
    p.add_argument("--region", help="region (default: from the AWS config)")
    p.add_argument("--profile", help="AWS profile name (default: the default chain)")
    p.add_argument(
        "--addressing-style",
        choices=get_args(AddressingStyle),
        default="auto",
        help="bucket addressing (default: auto)",
    )


def endpoint_from(given: str | None, environ: Mapping[str, str]) -> str | None:
    """The endpoint a command uses: ``--endpoint-url``, else the first of
    :data:`ENDPOINT_ENV` that is set and not empty."""
    return given or next((environ[name] for name in ENDPOINT_ENV if environ.get(name)), None)


def engine_config(args: argparse.Namespace, **overrides: Any) -> EngineConfig:
    """The engine's config from :func:`add_engine_options`'s options (and the command's
    own ``overrides``). The endpoint from the environment is given to the engine rather
    than left to botocore, so the engine's rule checks it too: an endpoint holding
    credentials, a query or a fragment is refused before any request, wherever it came
    from."""
    from zerorename.engine import EngineConfig  # only when a command runs

    return EngineConfig(
        endpoint_url=endpoint_from(args.endpoint_url, os.environ),
        region=args.region,
        profile=args.profile,
        addressing_style=args.addressing_style,
        **overrides,
    )


def add_json_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout (schema: README, CLI); errors stay on stderr",
    )


def add_progress_options(p: argparse.ArgumentParser) -> None:
    """``--quiet`` / ``--progress``: override the default (a live display on stderr when
    stdout and stderr are terminals, nothing otherwise)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--quiet", action="store_true", help="no progress and no summary line (errors still)"
    )
    g.add_argument(
        "--progress",
        action="store_true",
        help="show progress even when output is not a terminal (a plain line every 5 s)",
    )


def open_progress(args: argparse.Namespace, label: str, total: int | None, unit: str) -> Bar:
    """The progress display a command asked for (see :mod:`zerorename.cli.progress`)."""
    mode = "off" if getattr(args, "quiet", False) else "auto"
    if getattr(args, "progress", False):
        mode = "on"
    return open_bar(mode, label, total, unit)


class LazyParser(argparse.ArgumentParser):
    """A parser whose arguments a ``fill`` function adds the first time it parses or
    formats its help or usage: a command's parent lists it (name and help) without
    importing what defines its arguments. Without ``fill`` it is a plain parser."""

    def __init__(
        self, *args: Any, fill: Callable[[argparse.ArgumentParser], None] | None = None, **kw: Any
    ) -> None:
        super().__init__(*args, **kw)
        self._fill = fill

    def filled(self) -> LazyParser:
        """This parser with its arguments defined (``fill`` runs once)."""
        fill, self._fill = self._fill, None
        if fill is not None:
            fill(self)
        return self

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.filled()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self.filled()
        return super().format_usage()

    def format_help(self) -> str:
        self.filled()
        return super().format_help()


def lazy_subparser(
    sub: Any, name: str, fill: Callable[[argparse.ArgumentParser], None], **kw: Any
) -> argparse.ArgumentParser:
    """Add subcommand ``name`` to ``sub`` (an argparse subparsers object); ``fill`` adds
    its arguments when it is used if ``sub`` makes :class:`LazyParser`, else at once."""
    p: argparse.ArgumentParser = sub.add_parser(name, **kw)
    if isinstance(p, LazyParser):
        p._fill = fill
    else:
        fill(p)
    return p


def fill_all(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with every lazy subcommand's arguments defined, at any depth (for a
    caller that walks all of them)."""
    if isinstance(parser, LazyParser):
        parser.filled()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                fill_all(sub)
    return parser
