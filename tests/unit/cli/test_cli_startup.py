"""The ``zerorename`` command loads what the command it runs needs, and no more (each probe
a fresh interpreter running the entry point): ``--help``, ``-h`` of a subcommand,
``--version`` and a usage error load no event loop, HTTP stack, engine, committer,
benchmark, Spark or testing code beyond the argument definitions; ``uploads list`` loads
the engine and the committers' listing code but no job machinery, benchmark, Spark or
testing code; ``put`` of a file loads no committer. Plus the lazy subcommand parser the
entry point builds them with."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zerorename import cli
from zerorename.cli import jobargs as cliargs
from zerorename.cli import jobs as committer_cli
from zerorename.cli.options import LazyParser, fill_all, lazy_subparser

SRC = str(Path(__file__).resolve().parents[3] / "src")

_PROBE = """
import json, sys
from zerorename.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:  # argparse: --help, --version, a usage error
    code = exc.code
print("\\n" + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

#: third-party stacks a command that sends no request has no use for
HTTP_STACK = ("aiobotocore", "botocore", "aiohttp", "boto3")
EVENT_LOOP = ("asyncio", "anyio", "uvloop")
#: the argument definitions the parser is built from, in packages whose other modules run
#: commands (perf.harness, spark_adapter.*, ...)
ARGUMENT_MODULES = frozenset(
    {
        "zerorename.perf.cli",
        "zerorename.spark_adapter.errors",
    }
)


def run_cli(*argv: str) -> tuple[int, str, str, set[str]]:
    """``zerorename argv`` in a fresh interpreter: exit code, stdout, stderr, and every
    module it had loaded at the end."""
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update(AWS_ACCESS_KEY_ID="probe", AWS_SECRET_ACCESS_KEY="probe", AWS_REGION="us-east-1")
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    head, _, last = proc.stdout.rstrip("\n").rpartition("\n")
    assert proc.returncode == 0 and last.startswith("{"), proc.stderr
    got = json.loads(last)
    return got["code"], head, proc.stderr, set(got["modules"])


#: the command's modules that run commands (cli/: the engine's, the committers', the
#: directory upload, the command claims), by their paths and by the old ones
COMMAND_CODE = frozenset(
    {
        "zerorename.cli.commands",
        "zerorename.cli.dirupload",
        "zerorename.cli.jobs",
        "zerorename.cli.claims",
        "zerorename.commands",
        "zerorename.dirupload",
    }
)


def product_code(modules: set[str], package: str) -> set[str]:
    """The modules of ``zerorename.<package>`` loaded, beyond argument definitions."""
    prefix = f"zerorename.{package}."
    return {m for m in modules if m.startswith(prefix) and m not in ARGUMENT_MODULES}


def third_party(modules: set[str], names: tuple[str, ...]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in names}


def assert_arguments_only(modules: set[str]) -> None:
    assert not third_party(modules, HTTP_STACK + EVENT_LOOP), third_party(
        modules, HTTP_STACK + EVENT_LOOP
    )
    for package in ("committers", "perf", "spark_adapter", "servers", "testing", "sim"):
        assert not product_code(modules, package), (package, product_code(modules, package))
    loaded = {m for m in modules if m.startswith("zerorename.")}
    assert not loaded & (COMMAND_CODE | {"zerorename.portal"})
    assert not {m for m in loaded if m.startswith("zerorename.engine.")} - {
        "zerorename.engine.config",  # the demo's endpoint rule
        "zerorename.engine.errors",
        "zerorename.engine.planning",  # --part-size's limits
    }


@pytest.mark.parametrize(
    ("argv", "code", "shown"),
    [
        (["--help"], 0, "usage: zerorename [-h] [--version] [-v] COMMAND ..."),
        (["--version"], 0, "zerorename "),
        (["put", "-h"], 0, "usage: zerorename put [-h]"),
        (["uploads", "list", "--help"], 0, "usage: zerorename uploads list [-h]"),
        (["jobs", "-h"], 0, "usage: zerorename jobs [-h]"),
        (["inspect", "-h"], 0, "usage: zerorename inspect [-h]"),
        (["demo", "-h"], 0, "usage: zerorename demo [-h]"),
        ([], 2, "usage: zerorename [-h]"),
        (["bogus"], 2, "invalid choice: 'bogus'"),
        (["put"], 2, "the following arguments are required: source, dest"),
        (["put", "f", "s3://bucket/k", "--part-size", "8"], 2, "did you mean 8m?"),
        (["uploads", "list", "s3://bucket/p", "--older-than", "zz"], 2, "is not an age"),
        (["jobs", "frob", "s3://bucket/d"], 2, "argument action: invalid choice"),
    ],
)
def test_help_version_and_usage_errors_load_only_argument_definitions(
    argv: list[str], code: int, shown: str
) -> None:
    got, out, err, modules = run_cli(*argv)
    assert got == code, err
    assert shown in out + err
    assert_arguments_only(modules)


def test_perf_help_loads_no_engine_committer_or_other_command() -> None:
    """``perf``'s help is the harness's own parser: its scenarios, no engine or committer."""
    code, out, err, modules = run_cli("perf", "upload", "-h")
    assert code == 0 and "usage: zerorename perf upload" in out, err
    assert "zerorename.perf.harness" in modules  # what defines its arguments
    assert not third_party(modules, HTTP_STACK)
    assert not {
        m for m in modules if m.startswith(("zerorename.engine.", "zerorename.committers."))
    }
    assert not COMMAND_CODE & modules
    assert "zerorename.servers.faultproxy" not in modules  # what a --latency-ms run uses


def test_uploads_list_loads_the_listing_and_engine_but_no_jobs_benchmark_spark_or_testing() -> None:
    # a bucket name S3 refuses: the command runs, its engine refuses before any request
    code, _, err, modules = run_cli("uploads", "list", "s3://b/prefix")
    assert code == 1 and "invalid bucket name 'b'" in err, err
    assert {"zerorename.cli.jobs", "botocore"} <= modules  # it did run
    jobs_only = {"committer", "commit.lock", "commit.run", "s3a.jobs", "s3a.read", "tasks"}
    assert not {f"zerorename.committers.{m}" for m in jobs_only} & modules
    assert "zerorename.cli.claims" not in modules
    for package in ("perf", "spark_adapter", "servers", "testing", "sim"):
        assert not product_code(modules, package), (package, product_code(modules, package))
    assert "zerorename.cli.commands" not in modules and "pyspark" not in modules


def test_put_of_a_file_loads_the_engine_and_no_committer(tmp_path: Path) -> None:
    source = tmp_path / "f.txt"
    source.write_text("x")
    code, _, err, modules = run_cli("put", str(source), "s3://b/k")
    assert code == 1 and "invalid bucket name 'b'" in err, err
    assert {"zerorename.cli.commands", "zerorename.engine.core", "aiobotocore"} <= modules
    for package in ("committers", "perf", "spark_adapter", "servers", "testing", "sim"):
        assert not product_code(modules, package), (package, product_code(modules, package))
    assert "zerorename.cli.dirupload" not in modules and "zerorename.cli.jobs" not in modules


# --- the lazy parser (no subprocess) -----------------------------------------------------


def _parent() -> tuple[argparse.ArgumentParser, list[str]]:
    """A parser with one lazy subcommand ``late``; the list records each fill."""
    fills: list[str] = []

    def fill(p: argparse.ArgumentParser) -> None:
        fills.append("late")
        p.add_argument("--flag", type=int)

    parser = argparse.ArgumentParser(prog="x")
    sub = parser.add_subparsers(dest="command", parser_class=LazyParser)
    lazy_subparser(sub, "late", fill, help="a lazy one")
    sub.add_parser("plain", help="a plain one")
    return parser, fills


def test_a_lazy_subcommand_is_listed_unfilled_and_filled_once_when_parsed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser, fills = _parent()
    assert "a lazy one" in parser.format_help() and fills == []
    assert parser.parse_args(["plain"]).command == "plain" and fills == []
    assert parser.parse_args(["late", "--flag", "3"]).flag == 3
    assert parser.parse_args(["late", "--flag", "4"]).flag == 4
    assert fills == ["late"]
    parser, fills = _parent()
    with pytest.raises(SystemExit):
        parser.parse_args(["late", "-h"])
    assert fills == ["late"] and "--flag FLAG" in capsys.readouterr().out


def test_fill_all_defines_every_lazy_subcommand_and_a_plain_parent_fills_at_once() -> None:
    parser, fills = _parent()
    fill_all(parser)
    assert fills == ["late"]
    plain = argparse.ArgumentParser(prog="y")
    filled: list[str] = []
    lazy_subparser(plain.add_subparsers(), "now", lambda p: filled.append("now"))
    assert filled == ["now"]


def test_the_lazy_and_the_whole_parser_give_every_command_the_same_help() -> None:
    """What ``main`` parses with (lazy) is the parser ``build_parser()`` gives whole."""

    def helps(parser: argparse.ArgumentParser) -> dict[str, str]:
        out = {parser.prog: parser.format_help()}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    out |= helps(child)
        return out

    lazy, whole = cli.build_parser(lazy=True), cli.build_parser()
    assert helps(fill_all(lazy)) == helps(whole)
    assert "zerorename perf commit" in helps(whole)


def test_every_committer_command_has_its_handler() -> None:
    assert set(committer_cli.COMMANDS) == set(cliargs.COMMAND_NAMES)
