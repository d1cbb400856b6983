"""The rename baseline's options (``renameConcurrency``, ``copyThreshold``,
``copyPartSize``): binary sizes as everywhere (``16m`` is 16 MiB), and anything else is
one OptionError, never another exception."""

# ruff: noqa: E402 (the imports after need_module() need what it checks)
from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from needs import need_module  # skipped, or failed under CI=true

need_module("pyspark")
need_module("pyarrow")

from zerorename.perf.scenarios.rename_baseline import RenameSettings
from zerorename.spark_adapter import OptionError
from zerorename.units import MiB


def test_options_are_taken_out_and_sizes_are_binary() -> None:
    options = {"copyThreshold": "16m", "copyPartSize": "32MiB", "renameConcurrency": "4", "x": "y"}
    got = RenameSettings.pop_from(options)
    assert got == RenameSettings(concurrency=4, copy_threshold=16 * MiB, copy_part_size=32 * MiB)
    assert options == {"x": "y"}
    assert RenameSettings.pop_from({}) == RenameSettings()


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"copythreshold": "16q"}, "copythreshold"),
        ({"renameConcurrency": "x"}, "renameConcurrency must be an integer"),
        ({"renameConcurrency": "0"}, "renameConcurrency must be >= 1"),
        ({"copyPartSize": "1m"}, "copyPartSize must be between"),
    ],
)
def test_a_bad_option_is_one_line_naming_it(options: dict[str, str], words: str) -> None:
    with pytest.raises(OptionError) as info:
        RenameSettings.pop_from(options)
    assert words in str(info.value) and "\n" not in str(info.value)


@given(st.sampled_from(["copyThreshold", "copyPartSize", "renameConcurrency"]), st.text())
def test_any_text_parses_or_is_an_option_error(key: str, text: str) -> None:
    with contextlib.suppress(OptionError):
        RenameSettings.pop_from({key: text})
