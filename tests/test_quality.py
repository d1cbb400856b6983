"""The code standards hold: ruff clean (lint and format) everywhere, mypy strict on src."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "cmd",
    [
        ["ruff", "check", "--no-cache", "src", "tests"],
        ["ruff", "format", "--no-cache", "--check", "src", "tests"],
        ["mypy"],
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict"],
)
def test_standards(cmd: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", *cmd],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
