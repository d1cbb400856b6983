"""zerorename.units: one meaning of a size everywhere (binary), one-line refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerorename.units import GiB, KiB, MiB, TiB, format_size, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        ("0", 0),
        ("4096b", 4096),
        ("16m", 16 * MiB),
        ("16M", 16 * MiB),
        ("16mb", 16 * MiB),
        ("16MB", 16 * MiB),
        ("16MiB", 16 * MiB),
        ("16mib", 16 * MiB),
        (" 16 m ", 16 * MiB),
        ("256k", 256 * KiB),
        ("256KiB", 256 * KiB),
        ("1g", GiB),
        ("1GiB", GiB),
        ("2t", 2 * TiB),
        ("1TiB", TiB),
        ("1.5g", 3 * GiB // 2),
        ("1_000", 1000),
        (5 * MiB, 5 * MiB),
    ],
)
def test_sizes_are_binary(text: str | int, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "m",
        "16x",
        "16 ib",
        "16ib",
        "-1",
        "-1m",
        "1.5",
        "0.1k",
        "1e6",
        "16 m b",
        "١٦",
        "nan",
        "1025t",
        True,
        1.5,
        None,
        -1,
    ],
)
def test_refusals_are_one_line_value_errors_naming_what(text: object) -> None:
    with pytest.raises(ValueError) as info:
        parse_size(text, "partSize")  # type: ignore[arg-type]
    message = str(info.value)
    assert "partSize" in message and "\n" not in message


def test_format_size() -> None:
    assert format_size(16 * MiB) == "16MiB"
    assert format_size(3 * GiB) == "3GiB"
    assert format_size(1536 * MiB) == "1536MiB"
    assert format_size(2 * TiB) == "2TiB"
    assert format_size(4097) == "4097B"
    assert format_size(0) == "0B"


@given(st.integers(min_value=0, max_value=1024**5))
def test_format_then_parse_round_trips(n: int) -> None:
    assert parse_size(format_size(n)) == n


@given(
    st.integers(min_value=0, max_value=1024),
    st.sampled_from(["", "b", "k", "kb", "kib", "m", "mb", "mib", "g", "gb", "gib", "t", "tib"]),
    st.booleans(),
)
def test_any_suffix_is_binary(count: int, unit: str, upper: bool) -> None:
    power = {"": 0, "b": 0, "k": 1, "m": 2, "g": 3, "t": 4}[unit.rstrip("ib") or unit[:1]]
    text = f"{count}{unit.upper() if upper else unit}"
    assert parse_size(text) == count * 1024**power


@given(st.text(max_size=20))
def test_any_text_parses_or_raises_value_error(text: str) -> None:
    try:
        value = parse_size(text, "what")
    except ValueError as exc:
        assert "what" in str(exc) and "\n" not in str(exc)
    else:
        assert 0 <= value <= 1024**5


@pytest.mark.parametrize("text", ["16m", "16mb", "16MiB", "1g", "100MB", "4096"])
def test_perf_and_spark_options_read_a_size_the_same_way(text: str) -> None:
    """The bug of issue 12: ``16m`` was 16,000,000 bytes to perf and 16 MiB to Spark."""
    from zerorename.perf.model import parse_size as perf_parse_size
    from zerorename.perf.model import size_arg
    from zerorename.spark_adapter.options import parse_size as option_size

    assert size_arg(text) == perf_parse_size(text) == option_size(text, "partSize")
    assert size_arg(text) == parse_size(text)


def test_each_boundary_keeps_its_own_error_type() -> None:
    import argparse

    from zerorename.perf.model import size_arg
    from zerorename.spark_adapter.errors import OptionError
    from zerorename.spark_adapter.options import WriteOptions
    from zerorename.spark_adapter.options import parse_size as option_size

    with pytest.raises(argparse.ArgumentTypeError, match="'16x'"):
        size_arg("16x")
    with pytest.raises(OptionError, match="partSize '16x' is not a size"):
        option_size("16x", "partSize")
    with pytest.raises(OptionError, match="partSize"):
        WriteOptions.parse({"path": "s3://b/p", "partsize": "lots"})
    assert WriteOptions.parse({"path": "s3://b/p", "partsize": "16mb"}).part_size == 16 * MiB
