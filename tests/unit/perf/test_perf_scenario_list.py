"""The scenarios ``zerorename --help`` and perf's docstring name are the harness's, all of
them, from one list (``zerorename.perf.SCENARIO_NAMES``): they named five of seven (tune
and stream were missing) when each was written out by hand. The harness's registry is built
from that list too."""

from __future__ import annotations

import zerorename.perf
from zerorename.cli import build_parser
from zerorename.perf import cli as perf_cli
from zerorename.perf import harness


def test_the_list_is_the_harness_scenarios_in_their_order() -> None:
    assert list(zerorename.perf.SCENARIO_NAMES) == list(harness.SCENARIOS)


def test_the_harness_finds_each_scenario_by_its_name() -> None:
    """The registry is built from the list (issue 21): each name is the module at
    perf/scenarios/NAME.py or perf/scenarios/NAME/scenario.py, whose NAME it is."""
    for name, module in harness.SCENARIOS.items():
        assert name == module.NAME
        assert module.__name__ in (
            f"zerorename.perf.scenarios.{name}",
            f"zerorename.perf.scenarios.{name}.scenario",
        )


def test_zerorename_help_lists_every_scenario() -> None:
    text = " ".join(build_parser(lazy=True).format_help().split())  # unwrapped
    assert "endpoint: " + ", ".join(harness.SCENARIOS) in text
    assert perf_cli.HELP.endswith(": " + ", ".join(harness.SCENARIOS))


def test_perfs_docstring_lists_every_scenario() -> None:
    doc = zerorename.perf.__doc__ or ""
    assert "Scenarios: " + ", ".join(f"``{n}``" for n in harness.SCENARIOS) in doc
    assert "SCENARIO_NAMES" not in doc  # filled in
