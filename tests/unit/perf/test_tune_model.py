"""perf/scenarios/tune/model.py: the tuner's proposal from a probe and its noise-aware pick
(pure)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerorename.errors import ConfigError
from zerorename.perf.scenarios.tune.model import (
    COMMIT_MAX,
    COMMIT_MIN,
    MAX_CONCURRENCY,
    MIN_PART,
    Advice,
    Probe,
    Setting,
    candidates,
    commit_completes,
    expected_bps,
    grid,
    pick,
    propose,
)
from zerorename.units import GiB, MiB


def probe(rtt_ms: float, mb_s: float = 400.0, cpu: float = 1.5) -> Probe:
    """A probe whose one connection sends at ``mb_s`` after ``rtt_ms``."""
    part = 16 * MiB
    return Probe(rtt_ms / 1000, part, rtt_ms / 1000 + part / (mb_s * 1e6), cpu)


rtts = st.floats(min_value=0.01, max_value=200.0)
rates = st.floats(min_value=10.0, max_value=5000.0)
cpus = st.floats(min_value=0.05, max_value=20.0)
sizes = st.integers(min_value=1, max_value=64 * GiB)


def test_loopback_gets_small_parts_and_a_distant_store_large_ones() -> None:
    near = propose(probe(0.5), GiB)
    far = propose(probe(50.0), GiB)
    assert near.setting.part_size == MIN_PART and far.setting.part_size == 128 * MiB
    # the bytes in flight the model asks for grow with the round trip
    assert far.in_flight_bytes > near.in_flight_bytes
    assert "RTT 50.00 ms" in far.why and "one per wave of parts" in far.why


def test_the_sink_at_20_and_50_ms_as_measured() -> None:
    """The probes and knees of sink runs (256 MiB): 20 ms: 2 x 64 MiB measured
    best-or-indistinguishable in three runs; 50 ms: the object's 256 MiB in flight at
    once (4 x 64 MiB, and 2 x 128 MiB just as fast in the runs that measured both). The
    steady-state model proposed 2 x 64 MiB at 50 ms."""
    sink20 = Probe(0.0218, 8 * MiB, 0.0218 + 8 * MiB / 917e6, 0.98)
    sink50 = Probe(0.0535, 8 * MiB, 0.0535 + 8 * MiB / 1000e6, 0.98)
    assert propose(sink20, 256 * MiB).setting == Setting(2, 64 * MiB)
    assert propose(sink50, 256 * MiB).setting == Setting(2, 128 * MiB)
    # and what the model expects is within 15% of the medians those runs measured
    for p, s, measured in (
        (sink20, Setting(2, 64 * MiB), 730e6),
        (sink50, Setting(4, 64 * MiB), 647e6),
        (sink50, Setting(1, 64 * MiB), 424e6),
    ):
        assert abs(expected_bps(p, 256 * MiB, s) / measured - 1) < 0.15


@given(rtts, rtts, rates, cpus, sizes, st.integers(1, 64), st.sampled_from([MIN_PART, 64 * MiB]))
def test_more_latency_never_expects_more_and_more_in_flight_never_less(
    a: float, b: float, rate: float, cpu: float, size: int, conc: int, part: int
) -> None:
    lo, hi = sorted((a, b))
    s = Setting(conc, part)
    near, far = probe(lo, rate, cpu), probe(hi, rate, cpu)
    assert expected_bps(far, size, s) <= expected_bps(near, size, s) * (1 + 1e-12)
    more = Setting(conc + 1, part)
    assert expected_bps(near, size, more) >= expected_bps(near, size, s) * (1 - 1e-12)


@given(rtts, rates, cpus, sizes)
def test_the_proposal_is_the_cheapest_candidate_near_the_best(
    rtt: float, rate: float, cpu: float, size: int
) -> None:
    p = probe(rtt, rate, cpu)
    prop = propose(p, size)
    weighed = {s: expected_bps(p, size, s) for s in candidates(size)}
    top = max(weighed.values())
    assert prop.expected_bps >= 0.9 * top
    assert not any(v >= 0.9 * top and s.cost() < prop.setting.cost() for s, v in weighed.items())


@given(rtts, rates, cpus, sizes)
def test_a_proposal_is_a_setting_s3_and_the_engine_take(
    rtt: float, rate: float, cpu: float, size: int
) -> None:
    p = probe(rtt, rate, cpu)
    prop = propose(p, size)
    s = prop.setting
    assert MIN_PART <= s.part_size <= 128 * MiB
    assert 1 <= s.concurrency <= min(MAX_CONCURRENCY, math.ceil(size / s.part_size))
    assert COMMIT_MIN <= prop.commit_completes <= COMMIT_MAX
    assert 0 < prop.expected_bps <= p.ceiling_bps * (1 + 1e-9)
    assert s in grid(prop, size)


def test_commit_completes_follow_the_round_trip_within_bounds() -> None:
    assert commit_completes(0.0001) == COMMIT_MIN
    assert commit_completes(0.020) == 20
    assert commit_completes(5.0) == COMMIT_MAX


@pytest.mark.parametrize(
    ("field", "value"),
    [("rtt_s", 0.0), ("rtt_s", math.nan), ("part_s", -1.0), ("cpu_s_per_gib", math.inf)],
)
def test_a_bad_probe_is_refused_in_one_line(field: str, value: float) -> None:
    good = {"rtt_s": 0.001, "part_bytes": MiB, "part_s": 0.01, "cpu_s_per_gib": 1.0}
    with pytest.raises(ConfigError, match=f"probe {field} must be a finite number > 0"):
        Probe(**{**good, field: value})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="object size"):
        propose(Probe(**good), 0)  # type: ignore[arg-type]


A, B, C = Setting(2, 8 * MiB), Setting(4, 8 * MiB), Setting(8, 8 * MiB)


def test_overlapping_spreads_are_indistinguishable_and_the_cheapest_wins() -> None:
    # the case: a pick that follows the noise. 8 in flight has the best median,
    # but its runs overlap 4's: 4 is picked; 2 is measurably slower
    got = pick({A: [100, 105, 110], B: [200, 240, 260], C: [230, 250, 255]})
    assert got.best == C and got.setting == B
    assert got.indistinguishable == (B, C) and got.knee() == 4
    assert got.sureness.startswith("fairly sure: 2 settings are indistinguishable")
    assert "1 cheaper setting(s) measurably slower" in got.sureness


def test_a_cheaper_setting_within_wide_spreads_but_far_below_the_best_is_not_picked() -> None:
    # a loaded machine: 2 in flight overlaps 8's range, but its median is 80% of 8's
    got = pick({A: [150, 400, 600], B: [300, 480, 620], C: [350, 500, 640]})
    assert got.indistinguishable == (A, B, C) and got.setting == B and got.knee() == 4
    assert "1 cheaper one(s) within the noise but below 450 MB/s" in got.sureness
    # with the share lowered to 0.75 the cheapest indistinguishable one is picked again
    assert pick({A: [150, 400, 600], C: [350, 500, 640]}, share=0.75).setting == A
    with pytest.raises(ConfigError, match="share"):
        pick({A: [1.0]}, share=0.0)


def test_a_setting_clear_of_the_others_is_picked_surely() -> None:
    got = pick({A: [100, 110], B: [150, 160], C: [300, 310]})
    assert got.setting == got.best == C and got.indistinguishable == (C,)
    assert got.sureness.startswith("sure: over 2 interleaved runs its slowest (300 MB/s)")


def test_one_run_each_says_it_is_not_sure() -> None:
    got = pick({A: [100], B: [198], C: [200]}, tolerance=0.05)
    assert got.setting == B
    assert got.sureness.startswith("not sure: one run per setting")
    assert "run --reps 3 or more" in got.sureness


def test_nothing_measured_or_a_bad_tolerance_is_refused() -> None:
    with pytest.raises(ConfigError, match="nothing was measured"):
        pick({})
    with pytest.raises(ConfigError, match="tolerance"):
        pick({A: [1.0]}, tolerance=1.5)


settings = st.builds(
    Setting, st.integers(1, 64), st.sampled_from([5 * MiB, 8 * MiB, 16 * MiB, 64 * MiB])
)
grids = st.dictionaries(
    settings,
    st.lists(st.floats(min_value=1.0, max_value=5000.0), min_size=1, max_size=5),
    min_size=1,
    max_size=8,
)


@given(grids, st.floats(min_value=0.0, max_value=0.5))
def test_the_pick_is_the_cheapest_setting_indistinguishable_from_the_best(
    measured: dict[Setting, list[float]], tol: float
) -> None:
    got = pick(measured, tol)
    assert got.best in got.indistinguishable and got.setting in got.indistinguishable
    best_median = got.spreads[got.best].median
    assert all(sp.median <= best_median for sp in got.spreads.values())
    # the cheapest of those that reach 90% of the best's median
    assert got.spreads[got.setting].median >= 0.9 * best_median
    reach = [s for s in got.indistinguishable if got.spreads[s].median >= 0.9 * best_median]
    assert all(got.setting.cost() <= s.cost() for s in reach)
    assert got.knee() == min(s.concurrency for s in reach)
    # the order the grid was measured in does not change the answer
    again = pick(dict(reversed(list(measured.items()))), tol)
    assert (again.setting, again.indistinguishable) == (got.setting, got.indistinguishable)


def test_advice_in_each_users_terms() -> None:
    adv = Advice(Setting(6, 16 * MiB), commit_completes=20, executor_cores=4)
    assert adv.engine_config() == (
        "EngineConfig(part_size=16 * MiB, max_concurrency=6, batch_concurrency=20, "
        "max_pool_connections=26)"
    )
    assert adv.spark_options() == {"partSize": "16m", "concurrency": "6", "poolSize": "20"}
    doc = adv.to_json()
    assert doc["memory_bytes_per_process"] == 8 * 16 * MiB
    assert doc["per_executor"] == {
        "python_workers": 4,
        "connections": 80,
        "memory_bytes": 4 * 8 * 16 * MiB,
    }
    text = "\n".join(adv.lines())
    assert "job commit: 20 completes in flight" in text
    assert '.option("commitConcurrency", "20")' in text  # what a Spark user sets
    assert "memory: 128MiB per process" in text


@given(rtts, rates, cpus, sizes)
def test_the_grid_never_has_more_requests_in_flight_than_parts(
    rtt: float, rate: float, cpu: float, size: int
) -> None:
    prop = propose(probe(rtt, rate, cpu), size)
    for s in grid(prop, size):
        assert s.concurrency <= math.ceil(size / s.part_size)


def test_a_small_object_trims_the_concurrencies_its_parts_cannot_fill() -> None:
    from zerorename.perf.scenarios.tune.model import Proposal

    prop = Proposal(Setting(4, 16 * MiB), 64 * MiB, 1e9, 8, "")
    # 128 MiB: 8 parts of 16 MiB, 4 of 32 MiB: 8 x 32 MiB would be 4 x 32 MiB again
    assert grid(prop, 128 * MiB) == [
        Setting(2, 16 * MiB),
        Setting(2, 32 * MiB),
        Setting(4, 16 * MiB),
        Setting(4, 32 * MiB),
        Setting(8, 16 * MiB),
    ]
    # 3 around a proposal of 3 x 64 MiB: 6 becomes 4, the object's 4 parts at once
    three = Proposal(Setting(3, 64 * MiB), 192 * MiB, 1e9, 8, "")
    assert [s.concurrency for s in grid(three, 256 * MiB) if s.part_size == 64 * MiB] == [1, 3, 4]


def test_a_small_objects_grid_tries_smaller_parts() -> None:
    from zerorename.perf.scenarios.tune.model import Proposal

    prop = Proposal(Setting(1, 16 * MiB), 16 * MiB, 1e9, 8, "")
    assert grid(prop, 16 * MiB) == [Setting(1, 8 * MiB), Setting(1, 16 * MiB), Setting(2, 8 * MiB)]


def test_a_grid_around_one_request_looks_up_to_four() -> None:
    from zerorename.perf.scenarios.tune.model import Proposal

    prop = Proposal(Setting(1, 8 * MiB), 8 * MiB, 1e9, 8, "")
    assert sorted({s.concurrency for s in grid(prop, GiB)}) == [1, 2, 4]
