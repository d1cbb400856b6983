"""Readers that see whole batches (``stream.read``): the pure judgement over generated
interleavings of batch commits and a reader's steps, then the reader on the in-memory store
against the real stream sink (a commit crashed at every request, and readers polling while
batches commit). No server, no Spark."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zerorename.committers import Destination, MagicCommitter
from zerorename.committers.paths import job_id_of_key
from zerorename.spark_adapter.errors import StreamLogError
from zerorename.spark_adapter.options import WriteOptions
from zerorename.spark_adapter.stream.log import BatchEntry, Intent, StreamLog, stream_job_id
from zerorename.spark_adapter.stream.read import (
    Retry,
    Snapshot,
    is_data_key,
    judge,
    query_id_of,
    read_snapshot,
)
from zerorename.spark_adapter.stream.sink import STREAM_COMMIT, StreamSink, ensure_job
from zerorename.spark_adapter.write import TaskResult, task_id_for
from zerorename.testing.memstore import MemoryState, MemoryStore

B = "bkt"
DEST = Destination(B, "out")
Q = "11111111-2222-4333-8444-555555555555"
Q2 = "99999999-2222-4333-8444-555555555555"


def job(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def key(j: str, n: int, part: str = "") -> str:
    return f"out/{part}part-{n:05d}-{j}-c000.parquet"


def entry(b: int, j: str, files: int) -> BatchEntry:
    return BatchEntry(b, j, files, files, files, 0.0)


def committed(q: str, entries: list[BatchEntry], window: int = 100) -> StreamLog:
    last = entries[-1].batch if entries else None
    return StreamLog(q, last, len(entries), 0, 0, 0, tuple(entries[-window:]))


def intent(b: int, j: str) -> Intent:
    return Intent(b, j, (f"out/__magic_job-{j}/pendingsets/00000.pendingset",), 1, 1, 1)


# ------------------------------------------------------------------ judge (pure)


def test_data_keys_skip_records_and_hidden_files() -> None:
    assert is_data_key("part-0.parquet") and is_data_key("day=1/part-0.parquet")
    for rel in ("_SUCCESS", "__magic_job-x/a", "_zerorename_streams/q/log.json", ".tmp/x"):
        assert not is_data_key(rel)
    assert not is_data_key("day=1/.part-0.crc") and not is_data_key("day=1/")


def test_a_quiet_destination_is_every_committed_batch() -> None:
    j0, j1, old = job("b0"), job("b1"), job("old")
    lg = committed(Q, [entry(7, j0, 2), entry(8, j1, 1)])
    listed = [(key(j0, 0), 5), (key(j0, 1), 5), (key(j1, 0), 5), (key(old, 0), 5)]
    listed += [("out/other.csv", 3), ("out/_zerorename_streams/x", 1), ("outer/x", 1)]
    snap = judge(DEST, {Q: lg}, listed, {Q: lg})
    assert isinstance(snap, Snapshot)
    assert [f.key for f in snap.files] == sorted(k for k, _ in listed[:4] + listed[4:5])
    assert snap.batches == {Q: (7, 8)} and snap.through == {Q: 8}
    assert {f.key for f in snap.older} == {key(old, 0), "out/other.csv"}
    assert [f.key for f in snap.of_batch(Q, 7)] == sorted([key(j0, 0), key(j0, 1)])
    assert snap.uris[0] == f"s3://{B}/{snap.files[0].key}"
    assert snap.paths[0] == f"{B}/{snap.files[0].key}"
    assert snap.short == {} and snap.skipped == {}


def test_a_commit_under_way_or_finished_during_the_listing_is_left_out() -> None:
    j0, j1, j2 = job("b0"), job("b1"), job("b2")
    g1 = StreamLog(Q, 0, 1, 0, 0, 0, (entry(0, j0, 1),), intent(1, j1))
    g2 = StreamLog(Q, 1, 2, 0, 0, 0, (entry(0, j0, 1), entry(1, j1, 2)), intent(2, j2))
    listed = [(key(j0, 0), 1), (key(j1, 0), 1), (key(j2, 0), 1)]
    snap = judge(DEST, {Q: g1}, listed, {Q: g2})
    assert isinstance(snap, Snapshot)
    assert [f.key for f in snap.files] == [key(j0, 0)]
    assert snap.skipped == {j1: 1, j2: 1}
    assert snap.batches == {Q: (0,)}


def test_a_batch_short_of_files_is_reported() -> None:
    j0 = job("b0")
    lg = committed(Q, [entry(0, j0, 3)])
    snap = judge(DEST, {Q: lg}, [(key(j0, 0), 1)], {Q: lg})
    assert isinstance(snap, Snapshot) and snap.short == {Q: (0,)}


def test_more_batches_than_the_window_during_the_listing_is_taken_again() -> None:
    jobs = [job(f"b{i}") for i in range(6)]
    g1 = committed(Q, [entry(0, jobs[0], 1)], window=2)
    g2 = committed(Q, [entry(i, jobs[i], 1) for i in range(4)], window=2)
    out = judge(DEST, {Q: g1}, [(key(jobs[1], 0), 1)], {Q: g2})
    assert isinstance(out, Retry) and "3 batches" in out.reason
    # two new batches fit a window of two: judged
    g2 = committed(Q, [entry(i, jobs[i], 1) for i in range(3)], window=2)
    assert isinstance(judge(DEST, {Q: g1}, [], {Q: g2}), Snapshot)


@pytest.mark.parametrize(
    "after",
    [
        {},
        {Q: committed(Q, [])},
        {Q: StreamLog(Q, 0, 1, 0, 0, 0, (entry(0, job("x"), 1),))},
        # as many batches as before but an earlier last one: only the went-back rule sees it
        {Q: StreamLog(Q, 0, 2, 0, 0, 0, (entry(0, job("x"), 1),))},
    ],
    ids=["gone", "emptied", "replaced", "rewound"],
)
def test_a_log_that_went_away_or_back_is_taken_again(after: dict[str, StreamLog]) -> None:
    g1 = committed(Q, [entry(0, job("a"), 1), entry(1, job("b"), 1)])
    out = judge(DEST, {Q: g1}, [], after)
    assert isinstance(out, Retry), out
    assert "went" in out.reason, out


# ------------------------------------------------------------------ interleavings (pure)

W = 2  # the log's window in the model (the real one is 100: same rules, fewer steps)


@dataclass
class World:
    """Visible data files and each query's log, as the sink leaves them step by step."""

    files: dict[str, int] = field(default_factory=dict)
    logs: dict[str, StreamLog] = field(default_factory=dict)
    done: set[tuple[str, int]] = field(default_factory=set)
    batch_files: dict[tuple[str, int], set[str]] = field(default_factory=dict)


def commit_steps(w: World, q: str, b: int, n: int, discarded: bool) -> list[Callable[[], None]]:
    """A commit of batch ``b`` (``n`` files) as the sink sends it: the intent, the
    completes one by one, the log. ``discarded``: a run that wrote its intent and died
    before its first complete goes first (the next run replaces its intent)."""
    j = job(f"{q}/{b}")
    keys = [key(j, t, f"p={t % 2}/") for t in range(n)]
    w.batch_files[(q, b)] = set(keys)

    def put_intent(jid: str) -> Callable[[], None]:
        def step() -> None:
            lg = w.logs.get(q, StreamLog(q))
            w.logs[q] = lg.with_intent(intent(b, jid))

        return step

    def complete(k: str) -> Callable[[], None]:
        def step() -> None:
            w.files[k] = 10

        return step

    def record() -> None:
        lg = w.logs[q].with_commit(entry(b, j, n))
        w.logs[q] = StreamLog(q, b, lg.batches, 0, 0, 0, lg.recent[-W:])
        w.done.add((q, b))

    first = [put_intent(job(f"{q}/{b}/dead"))] if discarded else []
    return [*first, put_intent(j), *(complete(k) for k in keys), record]


batch_spec = st.tuples(st.integers(1, 3), st.booleans())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=st.integers(0, 4),
    queries=st.lists(st.lists(batch_spec, min_size=1, max_size=4), min_size=1, max_size=2),
    data=st.data(),
)
def test_any_interleaving_gives_whole_committed_batches(
    history: int, queries: list[list[tuple[int, bool]]], data: st.DataObject
) -> None:
    """Commits of several queries' batches and one reader (log reads, then a listing of
    one key at a time in key order, then log reads) interleaved in any order: a snapshot is
    exactly the files of the batches committed when the first logs were read (plus other
    writers' files), and it is taken again only when a query committed more batches than
    its window during the listing."""
    w = World()
    w.files["out/other.csv"] = 1  # another writer's file, no job id
    qs = [Q, Q2][: len(queries)]
    programs = []
    for q, specs in zip(qs, queries, strict=True):
        for b in range(history):  # committed before the reader starts, some beyond the window
            for step in commit_steps(w, q, b, 2, False):
                step()
        steps = []
        for i, (n, discarded) in enumerate(specs):
            steps += commit_steps(w, q, history + i, n, discarded)
        programs.append(steps)
    universe = sorted({k for ks in w.batch_files.values() for k in ks} | set(w.files))
    seen: dict[str, object] = {}

    def read(name: str) -> Callable[[], None]:
        def step() -> None:
            seen[name] = dict(w.logs)
            if name == "g1":
                seen["done"] = set(w.done)

        return step

    listed: list[tuple[str, int]] = []

    def lister(k: str) -> Callable[[], None]:
        def step() -> None:
            if k in w.files:
                listed.append((k, w.files[k]))

        return step

    programs.append([read("g1"), *(lister(k) for k in universe), read("g2")])
    while any(programs):
        i = data.draw(st.sampled_from([i for i, p in enumerate(programs) if p]))
        programs[i].pop(0)()
    g1, g2 = seen["g1"], seen["g2"]
    assert isinstance(g1, dict) and isinstance(g2, dict)
    out = judge(DEST, g1, listed, g2)
    moved = {q: g2[q].batches - (g1[q].batches if q in g1 else 0) for q in g2}
    if isinstance(out, Retry):
        assert max(moved.values()) > W, (out, moved)
        return
    done = seen["done"]
    assert isinstance(done, set)
    want = {"out/other.csv"} | {k for qb in done for k in w.batch_files[qb]}
    assert {f.key for f in out.files} == want
    for f in out.files:
        if f.query is not None:
            assert f.key in w.batch_files[(f.query, f.batch)]
    assert out.short == {}


# ------------------------------------------------------------------ on the in-memory store

URI = f"s3://{B}/out"


def sink(store: MemoryStore, query: str = Q) -> StreamSink:
    committer = MagicCommitter(store, URI, conflict="append", options=STREAM_COMMIT)
    return StreamSink(WriteOptions(path=URI), query, committer)


async def run_tasks(
    store: MemoryStore, batch: int, token: str, tasks: int, query: str = Q
) -> tuple[str, list[TaskResult]]:
    """One run of ``batch``: ``tasks`` tasks each write one file and commit."""
    committer = MagicCommitter(store, URI, conflict="append", options=STREAM_COMMIT)
    job_id = stream_job_id(query, token, batch)
    results = []
    for t in range(tasks):
        await ensure_job(committer, job_id, query, batch)
        ta = committer.job(job_id).task_attempt(task_id_for(t, t), 0)
        await ta.setup()
        data = f"batch {batch} task {t}\n".encode()
        async with ta.open(f"d={t % 2}/part-{t:05d}.csv") as out:
            await out.write(data)
        s = await ta.commit()
        results.append(TaskResult(t, 0, t, 1, 1, len(data), s.to_json()))
    return job_id, results


def whole(snap: Snapshot, state: MemoryState, query: str = Q) -> Counter[str]:
    """Every file of ``snap`` is of a batch the final log lists as committed, and each of
    its batches is there with all its files; the files per job."""
    raw = state.objects(B)[f"out/_zerorename_streams/{query}/log.json"]
    recent = [BatchEntry(**e) for e in json.loads(raw)["recent"]]
    files = {e.job_id: e.files for e in recent}
    per_job = Counter(job_id_of_key(f.key) or "" for f in snap.files)
    for j, n in per_job.items():
        assert files.get(j) == n, (j, n, files)
    for e in recent:
        if e.batch in snap.batches.get(query, ()):
            assert len(snap.of_batch(query, e.batch)) == e.files
    return per_job


def partial(state: MemoryState) -> int:
    """Batches of which a plain listing shows some files but not all (by the final log)."""
    per_job = Counter(job_id_of_key(k) for k in state.objects(B, "out/"))
    raw = state.objects(B).get(f"out/_zerorename_streams/{Q}/log.json")
    final = {e["job_id"]: e["files"] for e in json.loads(raw)["recent"]} if raw else {}
    return sum(1 for j, n in per_job.items() if j in final and n < final[j])


async def test_a_snapshot_at_every_request_of_a_commit_is_whole() -> None:
    """A driver dies before or after each request of batch 1's commit: the snapshot then
    holds batch 0, or batches 0 and 1 once the log says so; never part of batch 1 (which a
    plain listing does show at some of those points)."""
    base = MemoryState(B)
    store = MemoryStore(base)
    jid, results = await run_tasks(store, 0, "t0", 3)
    await sink(store).commit(0, jid, results)
    jid, results = await run_tasks(store, 1, "t1", 3)
    n, partial_plain, finished = 0, 0, False
    while not finished:
        n += 1
        for after in (False, True):
            state = base.copy()
            store = MemoryStore(state)
            store.crash_at(n, after=after)
            try:
                await sink(store).commit(1, jid, results)
                finished = True
            except BaseException as exc:  # ProcessCrashed, alone or in a group
                assert "crashed" in str(exc) or isinstance(exc, BaseExceptionGroup), exc
            snap = await read_snapshot(store.reopen(), DEST)
            per_job = whole(snap, state)
            assert set(per_job) <= {job_id_of_key(k) for k in state.objects(B, "out/")}
            assert len(per_job) == 2 or (len(per_job) == 1 and jid not in per_job)
            partial_plain += sum(
                1 for k in state.objects(B, "out/") if job_id_of_key(k) == jid
            ) in (1, 2)
    assert n >= 8
    assert partial_plain > 0


class Watched(MemoryStore):
    """A writer's store that lets a reader look after each complete it answers."""

    look: Callable[[], Awaitable[None]]

    async def complete(self, p: Any, **kw: Any) -> Any:
        out = await super().complete(p, **kw)
        await self.look()
        return out


async def test_a_reader_between_completes_sees_whole_batches() -> None:
    """A reader looks after each complete of 6 batches of 5 files (completes one at a
    time): the snapshot holds the batches before, and leaves out the k files of the batch
    under way, which the plain listing shows (part of a batch in 4 of every 5 looks)."""
    state = MemoryState(B)
    writer = Watched(state, batch_concurrency=1)
    reader = MemoryStore(state)
    looks: list[tuple[Snapshot, Counter[str | None]]] = []

    async def look() -> None:
        snap = await read_snapshot(reader, DEST)
        plain = Counter([job_id_of_key(o.key) async for o in reader.list_objects(B, "out/")])
        looks.append((snap, plain))

    writer.look = look
    jobs = []
    for b in range(6):
        jid, results = await run_tasks(writer, b, f"t{b}", 5)
        jobs.append(jid)
        await sink(writer).commit(b, jid, results)
    assert len(looks) == 30
    partial = 0
    for n, (snap, plain) in enumerate(looks):
        b, k = divmod(n, 5)
        whole(snap, state)
        assert snap.batches == {Q: tuple(range(b))}
        assert dict(snap.skipped) == {jobs[b]: k + 1}
        partial += plain[jobs[b]] < 5
    assert partial == 24


async def test_readers_polling_while_batches_commit_see_whole_batches() -> None:
    """Readers poll while a query commits 6 batches of 5 files, every request 5 ms: every
    snapshot is whole, the last one all 6 batches."""
    state = MemoryState(B)
    writer = MemoryStore(state, latency=0.005, batch_concurrency=1)
    reader = MemoryStore(state, latency=0.005)
    snaps: list[Snapshot] = []
    stop = anyio.Event()

    async def commits() -> None:
        for b in range(6):
            jid, results = await run_tasks(writer, b, f"t{b}", 5)
            await sink(writer).commit(b, jid, results)
        stop.set()

    async def poll() -> None:
        while not stop.is_set():
            snaps.append(await read_snapshot(reader, DEST))
        snaps.append(await read_snapshot(reader, DEST))

    async with anyio.create_task_group() as tg:
        tg.start_soon(commits)
        tg.start_soon(poll)
    for snap in snaps:
        whole(snap, state)
    assert snaps[-1].batches == {Q: tuple(range(6))}


async def test_query_narrows_the_logs_read() -> None:
    """With a query given, only its log is read: the other query's files are older."""
    state = MemoryState(B)
    store = MemoryStore(state)
    for q in (Q, Q2):
        jid, results = await run_tasks(store, 0, "t0", 2, query=q)
        await sink(store, q).commit(0, jid, results)
    both = await read_snapshot(store, DEST)
    assert both.batches == {Q: (0,), Q2: (0,)} and both.older == ()
    one = await read_snapshot(store, DEST, Q)
    assert one.batches == {Q: (0,)} and len(one.older) == 2 and len(one.files) == 4


async def test_a_malformed_log_is_refused() -> None:
    state = MemoryState(B)
    store = MemoryStore(state)
    await store.put_object(B, f"out/_zerorename_streams/{Q}/log.json", b"{}")
    with pytest.raises(StreamLogError, match=r"log\.json.*no field"):
        await read_snapshot(store, DEST)
    with pytest.raises(StreamLogError, match="not a UUID"):
        await read_snapshot(store, DEST, "not-a-query")


async def test_a_destination_that_keeps_moving_is_refused() -> None:
    """A query that commits more batches than its log's window during every listing:
    taken again, then refused after the attempts, in one line."""
    state = MemoryState(B)
    logkey = f"out/_zerorename_streams/{Q}/log.json"

    class Busy(MemoryStore):
        """Each listing of the data is followed by 101 commits of the query."""

        moved = 0

        async def list_objects(self, bucket: str, prefix: str = "", **kw: Any) -> Any:
            async for o in super().list_objects(bucket, prefix, **kw):
                yield o
            start = self.moved
            self.moved += 101
            entries = [entry(b, job(f"b{b}"), 0) for b in range(start, self.moved)]
            lg = StreamLog(Q, self.moved - 1, self.moved, 0, 0, 0, tuple(entries[-100:]))
            await self.put_object(B, logkey, lg.to_json())

    store = Busy(state)
    await store.put_object(B, logkey, StreamLog(Q).to_json())
    with pytest.raises(StreamLogError, match=r"no consistent snapshot.*101 batches") as exc:
        await read_snapshot(store, DEST, attempts=3, pause=0)
    assert "\n" not in str(exc.value) and store.moved == 303


def test_query_id_of_a_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text(f'{{"id":"{Q}"}}\n')
    assert query_id_of(str(tmp_path)) == Q and query_id_of(f"file://{tmp_path}") == Q
    assert query_id_of(Q2) == Q2
    with pytest.raises(StreamLogError, match="no checkpoint metadata"):
        query_id_of(str(tmp_path / "none"))


@given(st.text(max_size=80))
def test_any_query_argument_is_an_id_or_refused(text: str) -> None:
    """A query id, a checkpoint path or anything else a user passes: a query id or
    StreamLogError, nothing else (no directory here holds a checkpoint's metadata)."""
    try:
        got = query_id_of(text)
    except StreamLogError as exc:
        assert "\n" not in str(exc)
    else:
        assert got == text and uuid.UUID(got)


keys = st.one_of(
    st.text(max_size=60),
    st.builds(lambda rel: f"out/{rel}", st.text(max_size=60)),
    st.builds(lambda n, j: key(job(j), n), st.integers(0, 3), st.sampled_from(["b0", "b1"])),
)


@given(st.lists(st.tuples(keys, st.integers(0, 10**12)), max_size=20))
def test_any_listing_is_judged(listed: list[tuple[str, int]]) -> None:
    """Any keys a store lists: a snapshot of the data files under the destination, never
    one of a commit under way (job b1, the intent), nothing raised."""
    j0, j1 = job("b0"), job("b1")
    lg = StreamLog(Q, 0, 1, 0, 0, 0, (entry(0, j0, 4),), intent(1, j1))
    snap = judge(DEST, {Q: lg}, listed, {Q: lg})
    assert isinstance(snap, Snapshot)
    want = {k for k, _ in listed if k.startswith("out/") and is_data_key(k[4:])}
    assert {f.key for f in snap.files} == {k for k in want if job_id_of_key(k) != j1}
    assert all(
        (f.query, f.batch) == ((Q, 0) if f.job_id == j0 else (None, None)) for f in snap.files
    )


async def test_a_query_id_with_a_newline_is_refused() -> None:
    store = MemoryStore(MemoryState(B))
    with pytest.raises(StreamLogError, match="not a UUID"):
        await read_snapshot(store, DEST, Q + "\n")
    assert store.requests == 0
