"""perf/scenarios/tune/grid.py and the ceilings of tune/model.py: bracketing the knee and which
bound decides (pure: made-up figures, no I/O)."""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerorename.errors import ConfigError
from zerorename.perf.scenarios.tune.grid import (
    MAX_EXTENSIONS,
    MAX_MEMORY,
    best_of,
    bracket,
    edge,
    extension,
)
from zerorename.perf.scenarios.tune.model import (
    MAX_CONCURRENCY,
    Probe,
    Setting,
    Spread,
    burst_rate,
    burst_time,
    choose,
    propose,
    server_ceiling,
)
from zerorename.perf.scenarios.tune.scenario import latency_list_arg
from zerorename.units import GiB, MiB

P8, P16 = 8 * MiB, 16 * MiB


def spreads(figures: dict[Setting, list[float]]) -> dict[Setting, Spread]:
    return {s: Spread.of(v) for s, v in figures.items()}


def curve(knee: int, rate: float = 100.0) -> Callable[[Setting], float]:
    """MB/s that grows with concurrency up to ``knee`` and stays flat after."""
    return lambda s: rate * min(s.concurrency, knee)


def measurer(
    f: Callable[[Setting], float], reps: int = 3, jitter: float = 0.01
) -> tuple[Callable[[Sequence[Setting]], dict[Setting, list[float]]], list[Setting]]:
    """A measure function over ``f`` with a small spread, and the log of what it ran."""
    log: list[Setting] = []

    def measure(settings: Sequence[Setting]) -> dict[Setting, list[float]]:
        log.extend(settings)
        return {s: [f(s) * (1 + jitter * (i - 1)) for i in range(reps)] for s in settings}

    return measure, log


def test_the_edge_is_the_top_corner_and_its_neighbours() -> None:
    grid = [Setting(c, p) for c in (2, 4, 8) for p in (P8, P16)]
    assert edge(grid) == [Setting(2, P16), Setting(4, P16), Setting(8, P8), Setting(8, P16)]
    assert edge([Setting(3, P8)]) == [Setting(3, P8)]
    with pytest.raises(ConfigError, match="empty grid"):
        edge([])


def test_a_best_at_the_largest_concurrency_that_beats_its_neighbour_extends() -> None:
    got = spreads({Setting(4, P16): [390, 400, 410], Setting(8, P16): [700, 720, 730]})
    ext = extension(got, GiB, tolerance=0.05)
    assert ext is not None and ext.settings == (Setting(16, P16),)
    assert "is the grid's largest concurrency and beats 4" in ext.why
    assert ext.why.endswith("measuring concurrency 16")


def test_an_edge_within_the_noise_of_its_neighbour_brackets() -> None:
    # 8 is the best but its runs overlap 4's, and 2 is measurably slower: bracketed
    slow = {Setting(2, P16): [300, 310, 320]}
    got = spreads({**slow, Setting(4, P16): [600, 700, 720], Setting(8, P16): [650, 710, 730]})
    assert extension(got, GiB, tolerance=0.05) is None
    # the best below the edge: bracketed whatever the spreads
    got = spreads({**slow, Setting(4, P16): [800, 810], Setting(8, P16): [500, 510]})
    assert extension(got, GiB, tolerance=0.05) is None


def test_a_pick_at_the_smallest_concurrency_measures_half_of_it() -> None:
    # 4 is within the noise of 8 and reaches 90% of it: would 2 do as well?
    got = spreads({Setting(4, P16): [600, 700, 720], Setting(8, P16): [650, 710, 730]})
    ext = extension(got, GiB, tolerance=0.05)
    assert ext is not None and ext.settings == (Setting(2, P16),)
    assert "(concurrency 4, parts 16MiB, 700 MB/s [600-720]) is the grid's smallest" in ext.why
    # nothing below 1, nor a setting whose runs failed before
    one = spreads({Setting(1, P16): [700], Setting(2, P16): [705]})
    assert extension(one, GiB, tolerance=0.05) is None
    assert extension(got, GiB, tolerance=0.05, tried={Setting(2, P16)}) is None


def test_a_step_up_stops_at_one_request_per_part() -> None:
    got = spreads({Setting(2, P16): [300, 310], Setting(3, P16): [450, 460]})
    ext = extension(got, 64 * MiB, tolerance=0.05)
    assert ext is not None and ext.settings == (Setting(4, P16),)
    assert ext.why.endswith("measuring concurrency 4")
    at_all = spreads({Setting(2, P16): [300, 310], Setting(4, P16): [450, 460]})
    ext = extension(at_all, 64 * MiB, tolerance=0.05)
    assert ext is not None and ext.settings == ()
    assert "concurrency 8 is more than the object's parts" in ext.why


def test_the_part_size_axis_extends_too_and_the_caps_stop_it() -> None:
    got = spreads({Setting(8, P8): [300, 310], Setting(8, P16): [600, 610]})
    ext = extension(got, GiB, tolerance=0.05)
    # up the part size, and down the concurrency (8 is the smallest measured at 16 MiB)
    assert ext is not None and ext.settings == (Setting(8, 32 * MiB), Setting(4, P16))
    # an object of 48 MiB has fewer than 2 parts of 32 MiB: said, not measured
    ext = extension(got, 48 * MiB, tolerance=0.05)
    assert ext is not None and ext.settings == ()
    assert "not extended: parts of 32MiB leave the object fewer than 2 parts" in ext.why
    top = spreads({Setting(32, P16): [300, 310], Setting(MAX_CONCURRENCY, P16): [600, 610]})
    ext = extension(top, 64 * GiB, tolerance=0.05)
    assert ext is not None and ext.settings == ()
    assert f"above the cap of {MAX_CONCURRENCY}" in ext.why
    ext = extension(got, GiB, tolerance=0.05, max_memory=200 * MiB)
    assert ext is not None and "needs 320MiB, above 200MiB" in ext.why


def test_bracketing_walks_up_to_the_knee_and_stops_there() -> None:
    measure, log = measurer(curve(knee=24))
    grid = [Setting(c, P8) for c in (1, 3, 6)]
    br = bracket(grid, measure, 4 * GiB, tolerance=0.05)
    # 6 beat 3, 12 beat 6, 24 beat 12, 48 did not beat 24: three extensions
    assert [s.concurrency for s in br.added] == [12, 24, 48]
    assert [s.concurrency for s in br.settings] == [1, 3, 6, 12, 24, 48]
    assert len(br.steps) == 3 and all("beyond the noise" in w for w in br.steps)
    # only the edge (here the whole line) and the extensions were measured, each once
    assert [s.concurrency for s in log] == [1, 3, 6, 12, 24, 48]


def test_a_grid_that_brackets_is_measured_at_its_edge_only() -> None:
    measure, log = measurer(curve(knee=2))
    grid = [Setting(c, p) for c in (1, 2, 4) for p in (P8, P16)]
    br = bracket(grid, measure, GiB, tolerance=0.05)
    assert br.added == () and br.steps == () and br.settings == tuple(sorted(grid))
    assert log == [Setting(1, P16), Setting(2, P16), Setting(4, P8), Setting(4, P16)]


def test_bracketing_walks_down_to_the_fewest_requests_that_do() -> None:
    measure, log = measurer(curve(knee=2))
    br = bracket([Setting(c, P8) for c in (4, 8, 16)], measure, GiB, tolerance=0.05)
    # 4 did as well as 16: 2 did too, 1 did not
    assert br.added == (Setting(2, P8), Setting(1, P8)) and len(br.steps) == 2
    assert [s.concurrency for s in log] == [4, 8, 16, 2, 1]


def test_bracketing_stops_after_the_most_extensions_and_says_so() -> None:
    measure, _ = measurer(lambda s: float(s.concurrency))
    br = bracket([Setting(1, P8), Setting(2, P8)], measure, 64 * GiB, tolerance=0.05)
    assert len(br.added) == MAX_EXTENSIONS
    assert br.steps[-1].startswith(f"stopped after {MAX_EXTENSIONS} extensions")


def test_an_extension_whose_runs_all_failed_is_left_out_and_not_retried() -> None:
    log: list[Setting] = []

    def measure(settings: Sequence[Setting]) -> dict[Setting, list[float]]:
        log.extend(settings)
        return {s: ([] if s.concurrency == 16 else [100.0 * s.concurrency]) for s in settings}

    br = bracket([Setting(c, P8) for c in (2, 4, 8)], measure, GiB, tolerance=0.05)
    assert Setting(16, P8) not in br.measured and br.added == ()
    assert Setting(16, P8) not in br.settings and log.count(Setting(16, P8)) == 1
    assert br.steps[-1] == "every run of concurrency 16, parts 8MiB failed: left out"


figures = st.lists(st.floats(min_value=1.0, max_value=5000.0), min_size=1, max_size=5)
grids = st.dictionaries(
    st.builds(Setting, st.integers(1, 64), st.sampled_from([5 * MiB, P8, P16, 64 * MiB])),
    figures,
    min_size=1,
    max_size=8,
)


@given(grids, st.integers(1, 64 * GiB), st.floats(0.0, 0.5))
def test_an_extension_only_steps_outward_from_the_best_within_the_caps(
    measured: dict[Setting, list[float]], size: int, tol: float
) -> None:
    got = spreads(measured)
    best, _same, cheapest, _floor = choose(got, tol)
    assert best == best_of(got)
    ext = extension(got, size, tol)
    if ext is None:
        return
    assert ext.why
    for s in ext.settings:
        assert s not in got
        parts = math.ceil(size / best.part_size)
        assert s in (
            Setting(2 * best.concurrency, best.part_size),
            Setting(min(2 * best.concurrency, parts), best.part_size),
            Setting(best.concurrency, 2 * best.part_size),
            Setting(max(1, cheapest.concurrency // 2), cheapest.part_size),
        )
        assert s.concurrency <= MAX_CONCURRENCY and s.memory() <= MAX_MEMORY
        assert 2 * s.part_size <= size and s.concurrency <= math.ceil(size / s.part_size)


@given(st.integers(1, 64), st.integers(1, 64))
def test_bracketing_any_curve_ends_bracketed_or_capped(proposed: int, knee: int) -> None:
    """The model's grid (half, the proposal, twice) on a curve flat after ``knee``."""
    concs = sorted({max(1, proposed // 2), proposed, min(MAX_CONCURRENCY, 2 * proposed)})
    measure, _ = measurer(curve(knee), jitter=0.0)
    br = bracket([Setting(c, P8) for c in concs], measure, 64 * GiB, tolerance=0.05)
    assert len(br.added) <= MAX_EXTENSIONS
    top = max(s.concurrency for s in br.settings)
    # bracketed: the largest measured concurrency is past the knee, or a cap stopped it
    assert top >= knee or top * 2 > MAX_CONCURRENCY or len(br.added) == MAX_EXTENSIONS


# --- the ceilings ------------------------------------------------------------------------


def probe(rtt_ms: float, mb_s: float, cpu: float, server: float | None = None) -> Probe:
    part = P16
    return Probe(rtt_ms / 1000, part, rtt_ms / 1000 + part / (mb_s * 1e6), cpu, server)


def test_a_burst_that_kept_the_client_busy_says_nothing_of_the_server() -> None:
    assert server_ceiling(GiB, 2.0, client_busy_s=1.9, expected_s=0.5) is None
    # a burst as fast as the round trips allow: no server ceiling either
    assert server_ceiling(GiB, 1.0, client_busy_s=0.2, expected_s=0.9) is None
    # the client idled and the burst was slow: the server's ceiling
    assert server_ceiling(GiB, 4.0, client_busy_s=1.0, expected_s=1.0) == GiB / 4.0


def test_the_model_aims_at_the_lower_ceiling_and_says_which() -> None:
    client = probe(0.5, 400, 1.0)  # ~1074 MB/s client ceiling
    slow = probe(0.5, 400, 1.0, server=150e6)
    assert client.ceiling_bps == client.client_bps and client.bound.startswith("client CPU")
    assert slow.ceiling_bps == 150e6 and slow.bound.startswith("server")
    assert probe(0.5, 400, 1.0, server=5e9).bound.startswith("client CPU (below the server")
    # a burst measured: its net rate is the ceiling, whoever limited it
    busy = dataclasses.replace(client, burst_bps=1.5e9)
    assert busy.ceiling_bps == 1.5e9 and busy.bound == "client (busy through the burst)"
    idle = dataclasses.replace(client, burst_bps=2e8, server_bps=2e8)
    assert idle.ceiling_bps == 2e8 and idle.bound.startswith("server")
    a, b = propose(client, GiB), propose(slow, GiB)
    assert b.setting.concurrency < a.setting.concurrency
    assert b.expected_bps <= 150e6
    assert "server ceiling 150 MB/s, ceiling 150 MB/s, bound: server" in b.why


def test_bad_burst_figures_are_refused_in_one_line() -> None:
    for args in ((0, 1.0, 0.1, 0.1), (GiB, 0.0, 0.1, 0.1), (GiB, 1.0, math.nan, 0.1)):
        with pytest.raises(ConfigError, match="a burst"):
            server_ceiling(*args)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="server_bps must be a finite number > 0"):
        probe(1, 100, 1, server=0.0)
    with pytest.raises(ConfigError, match="burst_bps must be a finite number > 0"):
        dataclasses.replace(probe(1, 100, 1), burst_bps=math.inf)


def test_a_bursts_net_rate_takes_out_its_round_trips() -> None:
    p = probe(20.0, 500, 1.0)
    # 32 parts of 8 MiB at 32 in flight: one wave, three round trips (60 ms) out of 0.31 s
    assert burst_rate(p, 256 * MiB, 32, P8, 0.31) == pytest.approx(256 * MiB / 0.25)
    # two waves at 16 in flight: four round trips; never more than 4x the gross rate
    assert burst_rate(p, 256 * MiB, 16, P8, 0.33) == pytest.approx(256 * MiB / 0.25)
    assert burst_rate(p, 256 * MiB, 32, P8, 0.05) == pytest.approx(256 * MiB / 0.0125)


@given(
    st.floats(0.01, 200.0),
    st.floats(10.0, 5000.0),
    st.floats(0.05, 20.0),
    st.floats(1e6, 1e10),
    st.integers(1, 4 * GiB),
    st.integers(1, 64),
)
def test_the_ceiling_is_never_above_either_bound(
    rtt: float, rate: float, cpu: float, server: float, size: int, conc: int
) -> None:
    p = probe(rtt, rate, cpu, server)
    assert p.ceiling_bps <= min(p.client_bps, server) * (1 + 1e-12)
    # a burst takes at least its round trips and what the client's CPU allows
    t = burst_time(p, size, conc, P8)
    assert t >= 3 * p.rtt_s and t >= size / p.client_bps * (1 - 1e-12)
    assert propose(p, size).expected_bps <= p.ceiling_bps * (1 + 1e-9)


@given(
    st.integers(1, 64 * GiB),
    st.floats(1e-3, 1e3),
    st.floats(0.0, 2e3),
    st.floats(0.0, 1e3),
)
def test_a_server_ceiling_is_the_bursts_own_rate_or_none(
    size: int, wall: float, cpu: float, expected: float
) -> None:
    got = server_ceiling(size, wall, cpu, expected)
    assert got is None or got == size / wall
    if got is not None:
        assert cpu < wall and expected < wall


# --- --latency-ms as a list ----------------------------------------------------------------


def test_latencies_parse_as_a_list_of_distinct_numbers_of_ms() -> None:
    assert latency_list_arg("0,20,50") == [0.0, 20.0, 50.0]
    assert latency_list_arg(" 2.5 ") == [2.5]
    for bad, why in (("", "need a comma"), ("x", "not a number"), ("-1", ">= 0"), ("inf", ">= 0")):
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            latency_list_arg(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="latency 20 ms is given twice"):
        latency_list_arg("20,5,20")


@given(st.text(max_size=40))
def test_any_latency_text_parses_or_is_refused_in_one_line(text: str) -> None:
    try:
        got = latency_list_arg(text)
    except argparse.ArgumentTypeError as exc:
        assert "\n" not in str(exc)
        return
    assert got and len(set(got)) == len(got)
    assert all(math.isfinite(x) and x >= 0 for x in got)


def test_the_edge_of_a_grid_a_small_object_trimmed_is_its_longest_line() -> None:
    # 128 MiB: 8 x 32 MiB was dropped (4 parts), so the 16 MiB line is the longest
    grid = [Setting(2, P16), Setting(2, 32 * MiB), Setting(4, P16), Setting(4, 32 * MiB)]
    grid.append(Setting(8, P16))
    assert edge(grid) == [Setting(2, P16), Setting(4, P16), Setting(8, P16)]
