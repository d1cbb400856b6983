"""Options the ``zerorename`` commands share: sizes (the one syntax of
:mod:`zerorename.units`), ``--json`` and ``--quiet``/``--progress``."""

from __future__ import annotations

import argparse

from zerorename.cliprogress import Bar, open_bar
from zerorename.engine.planning import MAX_PART_SIZE, MIN_PART_SIZE
from zerorename.units import format_size, parse_size

__all__ = [
    "add_json_option",
    "add_progress_options",
    "open_progress",
    "part_size_arg",
    "size_arg",
]


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
    """The progress display a command asked for (see :mod:`zerorename.cliprogress`)."""
    mode = "off" if getattr(args, "quiet", False) else "auto"
    if getattr(args, "progress", False):
        mode = "on"
    return open_bar(mode, label, total, unit)
