"""The ``zerorename`` command without an optional dependency: its commands still parse,
and a command that needs the missing one fails in one line naming the extra to install
(each case in a fresh process where that module cannot be imported)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from zerorename.cli import missing_extra

_RUN = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # import name -> ModuleNotFoundError, as when not installed
from zerorename.cli import main
sys.exit(main(sys.argv[2:]))
"""


def cli_without(modules: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _RUN, modules, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("modules", "argv", "message"),
    [
        (
            "pyspark",
            ["demo", "--endpoint-url", "http://127.0.0.1:9", "--size", "1k"],
            "zerorename demo needs pyspark: pip install 'zerorename[demo]'",
        ),
        (
            "boto3",
            ["perf", "many", "--target", "http://127.0.0.1:9", "--bucket", "b", "--create-bucket"],
            "zerorename perf needs boto3: pip install 'zerorename[perf]'",
        ),
    ],
)
def test_a_missing_extra_is_one_line_naming_it(modules: str, argv: list[str], message: str) -> None:
    out = cli_without(modules, *argv)
    assert out.returncode == 1, out.stderr
    assert out.stderr == f"zerorename: error: {message}\n"
    assert "Traceback" not in out.stderr


def test_without_the_extras_the_commands_still_parse() -> None:
    out = cli_without("pyspark,pyarrow,boto3,moto,matplotlib,obstore,rich", "--help")
    assert out.returncode == 0, out.stderr
    for command in ("put", "uploads", "jobs", "demo", "perf"):
        assert command in out.stdout


def test_only_optional_modules_of_commands_with_an_extra_are_mapped() -> None:
    exc = ModuleNotFoundError("No module named 'pyspark.sql'", name="pyspark.sql")
    assert missing_extra("demo", exc) == (
        "zerorename demo needs pyspark: pip install 'zerorename[demo]'"
    )
    assert missing_extra("put", exc) is None  # put needs no extra: that would be a bug
    own = ModuleNotFoundError("No module named 'zerorename.x'", name="zerorename.x")
    assert missing_extra("perf", own) is None
    assert missing_extra(None, exc) is None
