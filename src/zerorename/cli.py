"""The `zerorename` command's entry point (``zerorename.cli:main``, ``python -m
zerorename``, ``python -m zerorename.cli``).

It imports nothing heavy itself: the commands (:mod:`zerorename.commands`, with the engine,
botocore and aiohttp behind them) are imported inside :func:`main`, so a Ctrl-C that lands
while they load is one line and exit code 130, never a traceback. Attributes of the
commands module (``parse_s3_url``, ``build_parser``, ...) are reachable here as before.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it


def main(argv: Sequence[str] | None = None) -> int:
    try:
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
