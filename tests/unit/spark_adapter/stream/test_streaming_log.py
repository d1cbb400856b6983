"""The stream log (pure): round trips, strict parsing (any input parses or raises
StreamLogError), compaction, and the decisions for a batch and for another run's intent."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerorename.spark_adapter.errors import StreamLogError
from zerorename.spark_adapter.stream.log import (
    KEEP,
    BatchEntry,
    Intent,
    Recovery,
    Step,
    StreamLog,
    check_query_id,
    decide,
    jobs_prefix,
    parse_log,
    query_id_of_metadata,
    recover,
    started_job,
    started_key,
    stream_job_id,
)

Q = "11111111-2222-4333-8444-555555555555"
J = "aaaaaaaa-2222-4333-8444-555555555555"
K = "bbbbbbbb-2222-4333-8444-555555555555"
PREFIX = "out/__magic_job-{job}/pendingsets/"


def parse(data: bytes) -> StreamLog:
    return parse_log(data, query_id=Q, where="s3://b/out/log.json", pendingset_prefix=PREFIX)


def entry(b: int, job: str = J) -> BatchEntry:
    return BatchEntry(b, job, 2, 10, 100, 1.5e9 + b)


def intent(b: int, job: str = J, sets: int = 2) -> Intent:
    keys = tuple(f"out/__magic_job-{job}/pendingsets/{t:05d}_{t}.pendingset" for t in range(sets))
    return Intent(b, job, keys, sets, 10, 100)


def log_of(batches: int, pending: Intent | None = None) -> StreamLog:
    lg = StreamLog(Q)
    for b in range(batches):
        lg = lg.with_commit(entry(b))
    return lg if pending is None else lg.with_intent(pending)


@st.composite
def logs(draw: st.DrawFn) -> StreamLog:
    n = draw(st.integers(0, 2 * KEEP + 3))
    pending = draw(st.booleans())
    return log_of(n, intent(n + draw(st.integers(0, 3))) if pending else None)


@given(logs())
def test_round_trip(lg: StreamLog) -> None:
    assert parse(lg.to_json()) == lg


@given(st.integers(0, 3 * KEEP))
def test_log_is_bounded(n: int) -> None:
    lg = log_of(n)
    assert len(lg.recent) == min(n, KEEP)
    assert lg.batches == n and lg.rows == 10 * n
    assert lg.last_batch == (n - 1 if n else None)
    assert len(lg.to_json()) < 200 * KEEP + 500


def test_committing_twice_is_refused() -> None:
    with pytest.raises(StreamLogError):
        log_of(3).with_commit(entry(2))
    with pytest.raises(StreamLogError):
        log_of(3).with_intent(intent(1))


def _mutations() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(-5, 10**20), st.floats(), st.text(max_size=40)
    )
    return st.recursive(
        scalars,
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=12), c, max_size=3),
        max_leaves=8,
    )


@given(logs(), st.data())
def test_any_change_parses_or_is_refused(lg: StreamLog, data: st.DataObject) -> None:
    """Change one field anywhere (or drop it, or add one): the result parses to a log or
    raises StreamLogError, never anything else."""
    doc = json.loads(lg.to_json())
    paths: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k in list(node):
                paths.append((node, k))
                walk(node[k])
        elif isinstance(node, list):
            for i in range(len(node)):
                paths.append((node, i))
                walk(node[i])

    walk(doc)
    parent, key = data.draw(st.sampled_from(paths))
    action = data.draw(st.sampled_from(["set", "drop", "add"]))
    if action == "set":
        parent[key] = data.draw(_mutations())
    elif action == "drop":
        del parent[key]
    elif isinstance(parent, dict):
        parent[data.draw(st.text(max_size=8))] = 1
    try:
        parse(json.dumps(doc).encode())
    except StreamLogError as exc:
        assert "\n" not in str(exc) and "log.json" in str(exc)


@given(st.binary(max_size=200))
def test_any_bytes_parse_or_are_refused(data: bytes) -> None:
    with contextlib.suppress(StreamLogError):
        parse(data)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda d: d.update(query_id=J), "query id"),
        (lambda d: d["recent"].reverse(), "rise"),
        (lambda d: d.update(last_batch=7), "rise"),
        (lambda d: d["pending"].update(pendingsets=["out/elsewhere/x.pendingset"]), "not job"),
        (lambda d: d["pending"].update(batch=1), "committed already"),
        (lambda d: d["recent"][0].update(rows=-1), "rows"),
        (lambda d: d.update(extra=1), "unknown fields"),
        (lambda d: d.update(version=2), "version"),
    ],
)
def test_refusals_name_the_problem(change: Any, match: str) -> None:
    doc = json.loads(log_of(3, intent(3)).to_json())
    change(doc)
    with pytest.raises(StreamLogError, match=match):
        parse(json.dumps(doc).encode())


@given(
    st.integers(0, 2 * KEEP + 3),
    st.none() | st.integers(0, 3),
    st.integers(0, 2 * KEEP + 8),
)
def test_decide(n: int, ahead: int | None, batch: int) -> None:
    """Batches 0..n-1 committed (older ones too, beyond the log's window) are duplicates;
    another batch's intent is refused; the intent's batch is recovered; else committed. The
    oracle is the drawn history, not the log's own ``committed()``."""
    pending = None if ahead is None else n + ahead
    lg = log_of(n, None if pending is None else intent(pending, K))
    if batch < n:
        assert decide(lg, batch, K) is Step.DUPLICATE
    elif pending is not None and pending != batch:
        with pytest.raises(StreamLogError, match=f"batch {pending}"):
            decide(lg, batch, K)
    elif pending == batch:
        assert decide(lg, batch, K) is Step.RECOVER
    else:
        assert decide(lg, batch, K) is Step.COMMIT


def test_a_batch_older_than_the_last_is_a_duplicate() -> None:
    """Spark re-running batch 1 after batch 3 committed (an old checkpoint's re-run) writes
    nothing again, even for a batch the log's window no longer lists."""
    lg = log_of(KEEP + 5)
    for old in (0, 1, 4, KEEP + 3):
        assert decide(lg, old, K) is Step.DUPLICATE
    assert decide(lg, KEEP + 5, K) is Step.COMMIT


@given(st.integers(1, 5), st.booleans())
def test_recover(sets: int, journal: bool) -> None:
    """Only a journal proves the intent's job may have committed; without one the batch is
    written again, whatever pendingsets are left (issue 20: an operator's abort removes
    them all, and the batch used to be adopted with none of its files)."""
    it = intent(4, K, sets)
    want = Recovery.RESUME if journal else Recovery.DISCARD
    assert recover(it, journal=journal) is want


def test_job_ids_and_notes() -> None:
    a, b = stream_job_id(Q, "t", 1), stream_job_id(Q, "t", 2)
    assert a != b and a == stream_job_id(Q, "t", 1) != stream_job_id(Q, "u", 1)
    prefix = jobs_prefix("out/", Q)
    assert started_job(prefix, started_key("out/", Q, a)) == a
    assert started_job(prefix, prefix + "x.json") is None
    assert started_job(prefix, f"out/_zerorename_streams/{J}/jobs/{a}.json") is None
    with pytest.raises(StreamLogError):
        jobs_prefix("out/", "../x")


def test_query_id_of_a_checkpoint() -> None:
    assert query_id_of_metadata(f'{{"id":"{Q}"}}\n', "m") == Q
    for bad in ("", "{}", '{"id": 3}', '{"id": "x"}', "[1]", "not json"):
        with pytest.raises(StreamLogError, match=r"metadata|UUID"):
            query_id_of_metadata(bad, "ckpt/metadata")


@given(st.text(max_size=80))
def test_any_metadata_text_parses_or_is_refused(text: str) -> None:
    with contextlib.suppress(StreamLogError):
        assert query_id_of_metadata(text, "m")


def test_read_stream_log_refuses_a_checkpoint_it_cannot_read(tmp_path: Path) -> None:
    """Before any request: a missing checkpoint, or one whose metadata is not Spark's."""
    from zerorename.spark_adapter.stream.sink import read_stream_log

    with pytest.raises(StreamLogError, match="no checkpoint metadata can be read"):
        read_stream_log("s3://b/out", str(tmp_path / "nothing"))
    # a NUL or a newline in the path: still one line, still a StreamLogError
    for odd in ("a\x00b", "two\nlines"):
        with pytest.raises(StreamLogError) as info:
            read_stream_log("s3://b/out", str(tmp_path / odd))
        assert "\n" not in str(info.value)
    # a query id with a newline after it is not a query id
    with pytest.raises(StreamLogError):
        check_query_id("6f6c2f1e-6d0b-4c55-9a55-7a65726f7265\n")
    (tmp_path / "metadata").write_text('{"id": "not-a-uuid"}')
    with pytest.raises(StreamLogError, match="not a UUID"):
        read_stream_log("s3://b/out", f"file://{tmp_path}")
