"""The command's folder (issue 21): ``zerorename.cli``, now the package, gives every name it
gave as a module (its own, and those of the engine commands it forwarded), and stays the
entry point (``zerorename.cli:main``, ``python -m zerorename.cli``). Its modules' old paths:
test_moved_paths.py."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[3] / "src"
ROOT = SRC / "zerorename"

#: what ``from zerorename.cli import X`` gave before the move (cli.py's own names, then the
#: commands module's it forwarded), -> the object it is, by where it is defined now
CLI_NAMES = {
    "main": "zerorename.cli.entry:main",
    "build_parser": "zerorename.cli.entry:build_parser",
    "add_engine_options": "zerorename.cli.options:add_engine_options",
    "INTERRUPTED": "zerorename.cli.runner:INTERRUPTED",
    "missing_extra": "zerorename.cli.runner:missing_extra",
    "one_line": "zerorename.cli.runner:one_line",
    "run_parsed": "zerorename.cli.runner:run_parsed",
    "CliError": "zerorename.cli.commands:CliError",
    "parse_s3_url": "zerorename.cli.commands:parse_s3_url",
    "engine_config": "zerorename.cli.options:engine_config",
    "put": "zerorename.cli.commands:put",
    "finish": "zerorename.cli.commands:finish",
    "PUT_DIR_DEFAULTS": "zerorename.cli.options:PUT_DIR_DEFAULTS",
    "open_progress": "zerorename.cli.options:open_progress",
    "Bar": "zerorename.cli.progress:Bar",
    "NullBar": "zerorename.cli.progress:NullBar",
    "clijson": "zerorename.cli.json",
    "EngineConfig": "zerorename.engine:EngineConfig",
    "PendingUpload": "zerorename.engine:PendingUpload",
    "UploadEngine": "zerorename.engine:UploadEngine",
    "errors": "zerorename.engine.errors",
    "run": "zerorename.engine:run",
    "BytesSent": "zerorename.engine.events:BytesSent",
    "UploadCompleted": "zerorename.engine.events:UploadCompleted",
    "ZeroRenameError": "zerorename.errors:ZeroRenameError",
}


def _object(spec: str) -> Any:
    module, _, name = spec.partition(":")
    obj = importlib.import_module(module)
    return getattr(obj, name) if name else obj


@pytest.mark.parametrize(("name", "spec"), sorted(CLI_NAMES.items()))
def test_zerorename_cli_gives_every_name_it_gave(name: str, spec: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f"from zerorename.cli import {name}", namespace)
    assert namespace[name] is _object(spec)


def test_a_module_of_the_folder_is_never_taken_for_a_name_of_the_commands() -> None:
    """``from zerorename.cli import jobs`` is the module (the package's ``__getattr__``
    forwards other names to the commands module, which must not shadow one)."""
    import zerorename.cli as cli

    folder = {p.stem for p in (ROOT / "cli").glob("*.py")} - {"__init__", "__main__"}
    assert folder == cli.SUBMODULES
    for name in sorted(folder):
        namespace: dict[str, Any] = {}
        exec(f"from zerorename.cli import {name}", namespace)
        assert namespace[name] is importlib.import_module(f"zerorename.cli.{name}"), name


def test_the_entry_point_is_the_packages_main() -> None:
    from zerorename.cli import entry

    (script,) = importlib.metadata.entry_points(group="console_scripts", name="zerorename")
    assert script.value == "zerorename.cli:main"
    assert script.load() is entry.main


@pytest.mark.parametrize("module", ["zerorename", "zerorename.cli"])
def test_python_m_runs_the_command(module: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", module, "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("zerorename "), proc.stderr
