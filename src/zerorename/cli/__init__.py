"""The ``zerorename`` command: its entry point (``zerorename.cli:main``, ``python -m
zerorename``, ``python -m zerorename.cli``) and every command it runs.

- :mod:`.entry`: :func:`main` and :func:`build_parser` (every command's arguments, from
  light modules; each command's code is imported when it runs)
- :mod:`.runner`: how a parsed command runs (logging, one-line errors, exit codes)
- :mod:`.options`: the options commands share (sizes, ``--json``, progress, the engine's
  endpoint and credentials) and the lazy subcommand parser
- :mod:`.json`, :mod:`.progress`: ``--json`` documents and the progress display
- :mod:`.commands`: ``put``, ``complete``, ``abort``; :mod:`.dirupload`: ``put`` of a
  directory as one job
- :mod:`.jobargs`: the arguments of ``uploads``, ``jobs``, ``inspect``; :mod:`.jobs` runs
  them; :mod:`.claims`: the command claims of ``jobs resume|abort``
- :mod:`.demo`: ``zerorename demo``, the README's main job (a local Spark write through
  the magic committer, on moto unless given an endpoint)

Importing this package stays cheap (the entry point and stdlib only), so ``--help`` and a
Ctrl-C while modules load cost nothing. The attributes of :mod:`.commands`
(``parse_s3_url``, ``engine_config``, ``CliError``, ...) are reachable here as before.
"""

from __future__ import annotations

import importlib
from typing import Any

from zerorename.cli.entry import build_parser as build_parser
from zerorename.cli.entry import main as main
from zerorename.cli.options import add_engine_options as add_engine_options
from zerorename.cli.runner import INTERRUPTED as INTERRUPTED
from zerorename.cli.runner import missing_extra as missing_extra
from zerorename.cli.runner import one_line as one_line
from zerorename.cli.runner import run_parsed as run_parsed

#: this package's modules: ``from zerorename.cli import jobs`` imports the module, never
#: :mod:`.commands` on the way (see ``__getattr__``)
SUBMODULES = frozenset(
    {
        "claims",
        "commands",
        "demo",
        "dirupload",
        "entry",
        "jobargs",
        "jobs",
        "json",
        "options",
        "progress",
        "runner",
    }
)


def __getattr__(name: str) -> Any:
    """A module of this package, else an attribute of :mod:`.commands` (imported on first
    use: it loads the engine)."""
    if name.startswith("__"):  # the import system asks for __path__, __spec__, ...
        raise AttributeError(name)
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    from zerorename.cli import commands

    return getattr(commands, name)
