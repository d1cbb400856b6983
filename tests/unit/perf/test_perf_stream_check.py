"""The ``stream`` perf scenario's pure parts: percentiles, a run's figures, the check of a
run's destination (any wrong file, record, upload or log entry is caught), and its options,
plan, notes and plot. No server."""

from __future__ import annotations

import argparse
import math
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerorename.committers.paths import output_name
from zerorename.perf.model import Sample, Target
from zerorename.perf.opentarget import TargetError
from zerorename.perf.scenarios.stream import scenario as ss
from zerorename.perf.scenarios.stream.check import (
    BatchFigure,
    Expected,
    StreamVerificationError,
    check,
    destination_problems,
    figures,
    percentile,
)
from zerorename.spark_adapter.stream.log import BatchEntry, Intent, StreamLog

PREFIX = "run/stream/zr-1/"
Q = str(uuid.UUID(int=7, version=4))


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=300), st.floats(1, 100))
def test_percentile_is_a_measured_value_with_its_share_below(values: list[float], q: float) -> None:
    p = percentile(values, q)
    assert p in values
    assert sum(v <= p for v in values) >= math.ceil(q / 100 * len(values))
    assert sum(v < p for v in values) < max(1, math.ceil(q / 100 * len(values)))


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=99))
def test_p99_of_fewer_than_100_values_is_the_largest(values: list[float]) -> None:
    assert percentile(values, 99) == max(values)
    assert percentile(values, 100) == max(values)


@pytest.mark.parametrize("q", [0, -1, 100.5])
def test_percentile_refuses_what_is_no_percentile(q: float) -> None:
    with pytest.raises(ValueError, match="percentile"):
        percentile([1.0], q)
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_figures_in_ms_and_request_counts_only_when_counted() -> None:
    plain = figures([BatchFigure(0.010), BatchFigure(0.030), BatchFigure(0.020)])
    assert plain == {
        "commit_p50_ms": 20.0,
        "commit_p99_ms": 30.0,
        "commit_max_ms": 30.0,
        "batches": 3.0,
    }
    counted = figures([BatchFigure(0.2, 16, 9), BatchFigure(0.3, 18, 10), BatchFigure(0.2, 16, 9)])
    assert (counted["requests"], counted["sequential_requests"]) == (16.0, 9.0)
    assert counted["sequential_requests_max"] == 10.0
    with pytest.raises(ValueError, match="no timed batch"):
        figures([])


# --- the destination's check ---------------------------------------------------------------

FILES, SIZE = 3, 100


def committed(batches: int) -> tuple[list[tuple[str, int]], StreamLog, Expected]:
    """A right destination after ``batches`` committed batches: listing, log, expectation."""
    jobs = tuple(str(uuid.uuid4()) for _ in range(batches))
    log = StreamLog(Q)
    objects = []
    for b, job in enumerate(jobs):
        objects += [(PREFIX + output_name(t, job, ".bin"), SIZE) for t in range(FILES)]
        log = log.with_commit(BatchEntry(b, job, FILES, FILES, FILES * SIZE, time.time()))
    objects.append((f"{PREFIX}_zerorename_streams/{Q}/log.json", 900))
    return objects, log, Expected(Q, jobs, FILES, SIZE)


def test_a_right_destination_has_no_problem() -> None:
    objects, log, want = committed(4)
    assert destination_problems(PREFIX, objects, [], log, want) == []
    check([], "s3://b/run")  # no problem: no error


def _mutations(objects: list[tuple[str, int]], log: StreamLog, want: Expected) -> dict[str, Any]:
    data = [o for o in objects if o[0].endswith(".bin")]
    job = want.jobs[0]
    pendingset = f"{PREFIX}__magic_job-{job}/pendingsets/00000_1.pendingset"
    return {
        "missing file": ([o for o in objects if o != data[0]], [], log),
        "extra file": ([*objects, (PREFIX + output_name(9, str(uuid.uuid4())), SIZE)], [], log),
        "file of a batch twice": ([*objects, (data[0][0] + "x.bin", SIZE)], [], log),
        "wrong size": ([(k, SIZE + 1) if k == data[1][0] else (k, s) for k, s in objects], [], log),
        "job record": ([*objects, (f"{PREFIX}__magic_job-{job}/job.json", 10)], [], log),
        "job note": ([*objects, (f"{PREFIX}_zerorename_streams/{Q}/jobs/{job}.json", 9)], [], log),
        "pending upload": (objects, [data[0][0]], log),
        "no log": ([o for o in objects if not o[0].endswith("log.json")], [], log),
        "intent left": (objects, [], log.with_intent(Intent(99, job, (pendingset,), 1, 1, 1))),
        "batch missing in log": (objects, [], committed(len(want.jobs) - 1)[1]),
        "other query's log": (objects, [], StreamLog(str(uuid.uuid4()), *_fields(log))),
    }


def _fields(log: StreamLog) -> tuple[Any, ...]:
    return (log.last_batch, log.batches, log.files, log.rows, log.bytes, log.recent, None)


@pytest.mark.parametrize(
    "wrong",
    [
        "missing file",
        "extra file",
        "file of a batch twice",
        "wrong size",
        "job record",
        "job note",
        "pending upload",
        "no log",
        "intent left",
        "batch missing in log",
        "other query's log",
    ],
)
def test_any_wrong_destination_is_refused_in_one_line(wrong: str) -> None:
    objects, log, want = committed(3)
    objs, uploads, lg = _mutations(objects, log, want)[wrong]
    problems = destination_problems(PREFIX, objs, uploads, lg, want)
    assert problems, wrong
    with pytest.raises(StreamVerificationError) as err:
        check(problems, "s3://b/run")
    text = str(err.value)
    assert "\n" not in text and text.endswith("the run's figures are not reported")


@given(st.integers(1, 120), st.data())
def test_the_log_keeps_its_last_entries_and_they_are_checked(batches: int, data: Any) -> None:
    """Past the log's bound (100 entries) the check compares the entries it keeps."""
    objects, log, want = committed(batches)
    assert destination_problems(PREFIX, objects, [], log, want) == []
    i = data.draw(st.integers(0, batches - 1))
    jobs = list(want.jobs)
    jobs[i] = str(uuid.uuid4())
    other = Expected(Q, tuple(jobs), FILES, SIZE)
    assert destination_problems(PREFIX, objects, [], log, other) != []


# --- options, plan, notes, plot --------------------------------------------------------------


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    ss.add_arguments(parser)
    return parser.parse_args(list(argv))


HTTP = Target(name="sink", endpoint_url="http://127.0.0.1:9", bucket="b")


def test_plan_defaults_a_group_per_files_value_sink_and_baseline() -> None:
    runs = ss.plan(parse(), HTTP)
    assert [(r.group, r.client) for r in runs] == [
        (f"files={n}", c) for n in (1, 8, 64) for c in ("zerorename", "baseline")
    ]
    p = runs[0].params
    assert (p["batches"], p["warmup"], p["file_size"], p["files_per_task"]) == (20, 1, 65536, 1)
    assert p["concurrency"] == 64 and "latency_ms" not in p
    runs = ss.plan(parse("--files", "16", "--latency-ms", "20", "--batches", "5"), HTTP)
    assert {r.params["latency_ms"] for r in runs} == {20.0}
    assert {r.params["files"] for r in runs} == {16}


@pytest.mark.parametrize(
    "argv",
    [
        ["--files", "0"],
        ["--files", "a"],
        ["--batches", "0"],
        ["--warmup", "-1"],
        ["--file-size", "6MiB"],
        ["--file-size", "0"],
        ["--latency-ms", "0"],
        ["--files-per-task", "0"],
    ],
)
def test_bad_options_are_refused_by_argparse(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse(*argv)


def test_latency_needs_an_http_target() -> None:
    https = Target(name="url", endpoint_url="https://s3.example.com", bucket="b")
    with pytest.raises(TargetError, match="http:// endpoints only"):
        ss.plan(parse("--latency-ms", "20"), https)


def test_every_option_states_its_default() -> None:
    parser = argparse.ArgumentParser()
    ss.add_arguments(parser)
    for action in parser._actions:
        if action.option_strings and action.dest != "help":
            assert "default" in (action.help or ""), action.dest


def _samples() -> list[Sample]:
    params: dict[str, Any] = {
        "files": 8,
        "uploads": 8,
        "batches": 5,
        "warmup": 1,
        "file_size": 65536,
        "files_per_task": 1,
        "concurrency": 64,
        "target": "sink",
    }
    zr = {"commit_p50_ms": 210.0, "commit_p99_ms": 250.0, "commit_max_ms": 250.0}
    base = {"commit_p50_ms": 50.0, "commit_p99_ms": 60.0, "commit_max_ms": 60.0}
    return [
        Sample(ss.NAME, "baseline", params, {**base, "sequential_requests": 2.0}),
        Sample(ss.NAME, "zerorename", params, {**zr, "sequential_requests": 9.0}),
    ]


def test_notes_give_each_clients_figures_sink_first(tmp_path: Path) -> None:
    lines = ss.notes(_samples(), parse())
    figs = [ln for ln in lines if ln.startswith("  files=8")]
    assert figs == [
        "  files=8 zerorename: commit p50 210.0 ms, p99 250.0 ms, 9 sequential requests",
        "  files=8 baseline: commit p50 50.0 ms, p99 60.0 ms, 2 sequential requests",
    ]
    assert any("verified after every run" in ln for ln in lines)
    ss.plot(_samples(), parse(), str(tmp_path / "p.png"))
    assert (tmp_path / "p.png").stat().st_size > 0
