"""One size syntax: the CLI's ``--part-size``, the harness's size options and the Spark
``partSize`` option read a size the same way (zerorename.units), and the CLI's help says
the unit (issue 25 item 2)."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerorename import cli
from zerorename.cli import options as cliopts
from zerorename.engine.planning import MAX_PART_SIZE, MIN_PART_SIZE
from zerorename.perf.model import size_arg as harness_size
from zerorename.spark_adapter.errors import OptionError
from zerorename.spark_adapter.options import parse_size as spark_size
from zerorename.units import MiB

UNITS = ["", "b", "k", "K", "kb", "KiB", "m", "M", "mb", "MiB", "mib", "g", "G", "GiB", "t"]

#: size-like text: a number (maybe fractional, maybe with _), a unit, stray spaces; and
#: arbitrary text, which must be refused the same way everywhere
size_text = st.one_of(
    st.builds(
        lambda n, frac, unit, sp: f"{sp}{n}{frac}{sp}{unit}{sp}",
        st.integers(0, 10**7),
        st.sampled_from(["", ".5", ".25", ".1", ".0"]),
        st.sampled_from(UNITS),
        st.sampled_from(["", " "]),
    ),
    st.text(max_size=12),
)


def _cli(text: str) -> int | None:
    try:
        return cliopts.size_arg(text)
    except argparse.ArgumentTypeError:
        return None


def _harness(text: str) -> int | None:
    try:
        return harness_size(text)
    except argparse.ArgumentTypeError:
        return None


def _spark(text: str) -> int | None:
    try:
        return spark_size(text, "partSize")
    except OptionError:
        return None


@settings(deadline=None)  # a loaded 2-core machine: no timing in tests
@given(size_text)
def test_cli_harness_and_spark_read_a_size_alike(text: str) -> None:
    cli, spark = _cli(text), _spark(text)
    assert cli == spark
    harness = _harness(text)  # the harness also refuses 0 bytes
    assert harness == (cli if cli else None)


@settings(deadline=None)  # a loaded 2-core machine: no timing in tests
@given(size_text)
def test_part_size_is_a_size_within_s3_limits_or_a_usage_error(text: str) -> None:
    parsed = _cli(text)
    try:
        got: int | None = cliopts.part_size_arg(text)
    except argparse.ArgumentTypeError as exc:
        assert "\n" not in str(exc)
        got = None
    if parsed is not None and MIN_PART_SIZE <= parsed <= MAX_PART_SIZE:
        assert got == parsed
    else:
        assert got is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8m", 8 * MiB), ("16MiB", 16 * MiB), ("5242880", 5 * MiB), ("1g", 1024 * MiB)],
)
def test_put_part_size_takes_the_one_syntax(text: str, expected: int) -> None:
    args = cli.build_parser().parse_args(["put", "f", "s3://b/k", "--part-size", text])
    assert args.part_size == expected


def test_a_bare_small_number_is_bytes_and_the_refusal_names_the_suffix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.build_parser().parse_args(["put", "f", "s3://b/k", "--part-size", "8"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "8 is 8 bytes" in err and "did you mean 8m?" in err


def test_help_states_the_unit(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["put", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--part-size SIZE" in out and "8m = 8MiB" in out and "bytes" in out
