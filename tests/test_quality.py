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


def test_readme_python_examples_are_ruff_clean() -> None:
    """The README's Python examples are what users copy: ruff clean and formatted as the
    code is (``spark`` is predefined in the Spark examples, so F821 is not checked)."""
    import re

    fence = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)
    text = (ROOT / "README.md").read_text()
    bodies = [body for tag, body in fence.findall(text) if tag.strip().startswith("python")]
    assert len(bodies) >= 4
    for n, body in enumerate(bodies):
        for cmd in (
            ["ruff", "check", "--no-cache", "--ignore", "F821"],
            ["ruff", "format", "--no-cache", "--check"],
        ):
            out = subprocess.run(
                [sys.executable, "-m", *cmd, "--stdin-filename", "readme_example.py", "-"],
                cwd=ROOT,
                input=body,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert out.returncode == 0, f"README python block {n}: {out.stdout}{out.stderr}"


def test_every_test_module_has_its_own_basename() -> None:
    """pytest imports test modules by basename (rootdir-relative 'prepend' imports): a
    second tests/**/test_x.py fails the whole run's collection, which a run of one folder
    never shows (twice in one merge: tests/unit and tests/spark held the same name)."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
