"""Readers that see whole micro-batches: the destination's data files that belong to fully
committed batches of its streaming queries, as one consistent snapshot.

S3 has no multi-object commit: while the sink completes a batch's files one by one, a plain
listing can see part of that batch. :func:`committed_files` lists the destination between
two reads of the queries' logs and keeps what is whole (:func:`judge`, pure):

1. read the logs (G1), list the data files (no path segment starting with ``_`` or
   ``.``), read the logs again (G2);
2. a file of a job that G1 lists as committed is kept: every complete of that job was
   answered before G1's log was written, so the listing (started after G1) sees all of the
   batch's files;
3. a file of G1's or G2's intent, or of a batch G2 lists as committed and G1 does not, is
   dropped (its completes may have spanned the listing);
4. a file of a job neither log names is kept as *older*. Why that is safe: a file the
   listing saw was completed before G2 was read and after its job's intent was written,
   so G2 has that job as its intent or as committed; committed after G1, it is among G2's
   last ``G2.batches - G1.batches`` entries, all of which G2 lists while that number is at
   most the log's window (:data:`~zerorename.spark_adapter.stream.log.KEEP` batches;
   otherwise the snapshot is taken again). So a job no log names was committed before
   G1, whole, and has left the window; or it is not a stream's (another writer's file, or
   one with no job id in its name). This relies on the sink never deleting a completed
   file of a batch job (its commits do not roll back): no file seen is of a job that is
   discarded later.

Files not named by a log are kept, and reported apart (:attr:`Snapshot.older`): batches
older than the logs' window look the same as other writers' files. With ``query`` given,
only that query's log is read, and other streams' files count as other writers'.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import anyio

from zerorename.committers import Destination
from zerorename.committers.objectstore import Store
from zerorename.committers.paths import JobLayout, job_id_of_key
from zerorename.committers.store import gather, read_optional
from zerorename.spark_adapter.bridge import get_bridge
from zerorename.spark_adapter.errors import StreamLogError
from zerorename.spark_adapter.options import WriteOptions
from zerorename.spark_adapter.stream.log import (
    KEEP,
    MAX_LOG_BYTES,
    STREAMS_DIR,
    StreamLog,
    is_uuid,
    log_key,
    parse_log,
    query_id_of_metadata,
)

log = logging.getLogger("zerorename.spark")

#: how many times a snapshot is taken before giving up (the logs moved too far each time)
ATTEMPTS = 5


@dataclass(frozen=True)
class SnapshotFile:
    """One data file of a snapshot. ``query`` and ``batch`` are None for an *older* file
    (of a batch older than the logs' window, or of another writer)."""

    key: str
    uri: str
    size: int
    job_id: str | None
    query: str | None
    batch: int | None


@dataclass(frozen=True)
class Snapshot:
    """Data files of fully committed batches at one instant, directly usable by readers:
    ``pyarrow.dataset.dataset(snap.paths, filesystem=s3fs)`` or DuckDB's
    ``read_parquet(snap.uris)``."""

    dest: str
    files: tuple[SnapshotFile, ...]
    #: per query: the committed batches of its log's window, every file of each included
    batches: Mapping[str, tuple[int, ...]]
    #: per query: the highest batch id the snapshot holds whole (None: none yet)
    through: Mapping[str, int | None]
    #: files seen but left out: of batches whose commit was under way (their job ids)
    skipped: Mapping[str, int] = field(default_factory=dict)
    #: per query: window batches with fewer files listed than their log entry says
    #: (deleted by someone since?); their remaining files are kept
    short: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: how many listings it took
    attempts: int = 1

    @property
    def uris(self) -> list[str]:
        """``s3://bucket/key`` of every file (for DuckDB, Spark, Trino)."""
        return [f.uri for f in self.files]

    @property
    def paths(self) -> list[str]:
        """``bucket/key`` of every file (for pyarrow's S3FileSystem)."""
        return [f.uri[len("s3://") :] for f in self.files]

    @property
    def older(self) -> tuple[SnapshotFile, ...]:
        """Files no log names: batches older than the window, or other writers' files."""
        return tuple(f for f in self.files if f.query is None)

    def of_batch(self, query: str, batch: int) -> tuple[SnapshotFile, ...]:
        return tuple(f for f in self.files if f.query == query and f.batch == batch)


@dataclass(frozen=True)
class Retry:
    """The logs moved in a way this snapshot cannot judge; take it again."""

    reason: str


def is_data_key(rel: str) -> bool:
    """A data file's path under the destination: no segment names a record (``_``) or a
    hidden file (``.``), and not a directory marker."""
    parts = rel.split("/")
    return bool(parts[-1]) and not any(p.startswith(("_", ".")) for p in parts)


def judge(
    dest: Destination,
    before: Mapping[str, StreamLog],
    listed: Iterable[tuple[str, int]],
    after: Mapping[str, StreamLog],
) -> Snapshot | Retry:
    """The snapshot from logs read before a listing, the listing's (key, size) pairs and
    the logs read after it, or :class:`Retry` (see the module's rules)."""
    committed: dict[str, tuple[str, int]] = {}
    unsafe: set[str] = set()
    batches: dict[str, tuple[int, ...]] = {}
    through: dict[str, int | None] = {}
    expected: dict[tuple[str, int], int] = {}
    for q in sorted(set(before) | set(after)):
        g1, g2 = before.get(q, StreamLog(q)), after.get(q)
        if g2 is None:
            return Retry(f"the log of query {q} went away during the listing")
        last1 = -1 if g1.last_batch is None else g1.last_batch
        if g2.batches < g1.batches or last1 > (-1 if g2.last_batch is None else g2.last_batch):
            return Retry(f"the log of query {q} went back during the listing")
        new = [e for e in g2.recent if e.batch > last1]
        if len(new) != g2.batches - g1.batches:
            return Retry(
                f"query {q} committed {g2.batches - g1.batches} batches during the listing, "
                f"more than its log lists ({KEEP})"
            )
        unsafe.update(e.job_id for e in new)
        # G1's intent is G2's or committed in G2 by then (or discarded with no file):
        # dropped by the rules above already, named here to say so
        unsafe.update(p.job_id for p in (g1.pending, g2.pending) if p is not None)
        for e in g1.recent:
            committed[e.job_id] = (q, e.batch)
            expected[(q, e.batch)] = e.files
        batches[q] = tuple(e.batch for e in g1.recent)
        through[q] = g1.last_batch
    files: list[SnapshotFile] = []
    skipped: dict[str, int] = {}
    seen: dict[tuple[str, int], int] = {}
    for key, size in sorted(listed):
        rel = dest.rel(key)
        if rel is None or not is_data_key(rel):
            continue
        job = job_id_of_key(rel)
        if job is not None and job in unsafe:
            skipped[job] = skipped.get(job, 0) + 1
            continue
        q_b = committed.get(job) if job is not None else None
        if q_b is not None:
            seen[q_b] = seen.get(q_b, 0) + 1
            files.append(SnapshotFile(key, dest.uri_of(key), size, job, *q_b))
        else:
            files.append(SnapshotFile(key, dest.uri_of(key), size, job, None, None))
    short: dict[str, list[int]] = {}
    for (query, batch), n in sorted(expected.items()):
        if seen.get((query, batch), 0) < n:
            short.setdefault(query, []).append(batch)
    return Snapshot(
        dest.uri,
        tuple(files),
        batches,
        through,
        skipped,
        {q: tuple(bs) for q, bs in short.items()},
    )


async def read_log(store: Store, dest: Destination, query: str) -> StreamLog | None:
    """A query's log at ``dest`` (None when it has none), parsed strictly."""
    data = await read_optional(
        store, dest.bucket, log_key(dest.list_prefix, query), max_size=MAX_LOG_BYTES
    )
    if data is None:
        return None
    return parse_log(
        data,
        query_id=query,
        where=dest.uri_of(log_key(dest.list_prefix, query)),
        pendingset_prefix=JobLayout(dest, "{job}").pendingsets_dir,
    )


async def stream_queries(store: Store, dest: Destination) -> list[str]:
    """The query ids with a directory under the destination's ``_zerorename_streams/``."""
    base = f"{dest.list_prefix}{STREAMS_DIR}/"
    found = []
    async for p in store.list_prefixes(dest.bucket, base):
        name = p[len(base) :].rstrip("/")
        if is_uuid(name):
            found.append(name)
        else:
            log.warning("zerorename: %s is not a stream query's; ignored", dest.uri_of(p))
    return found


async def read_logs(store: Store, dest: Destination, query: str | None) -> dict[str, StreamLog]:
    """Every query's log at ``dest`` (or ``query``'s only), read at once."""
    queries = [query] if query is not None else await stream_queries(store, dest)
    logs = await gather(*(read_log(store, dest, q) for q in queries))
    return {q: lg for q, lg in zip(queries, logs, strict=True) if lg is not None}


async def list_data(store: Store, dest: Destination) -> list[tuple[str, int]]:
    """(key, size) of the destination's data files (one paginated listing)."""
    out = []
    async for obj in store.list_objects(dest.bucket, dest.list_prefix):
        rel = dest.rel(obj.key)
        if rel is not None and is_data_key(rel):
            out.append((obj.key, obj.size))
    return out


async def read_snapshot(
    store: Store,
    dest: Destination,
    query: str | None = None,
    *,
    attempts: int = ATTEMPTS,
    pause: float = 0.2,
) -> Snapshot:
    """Take the snapshot (:func:`judge`), again after ``pause`` seconds while the logs
    moved too far during the listing; :class:`StreamLogError` after ``attempts``."""
    if query is not None and not is_uuid(query):
        raise StreamLogError(f"streaming query id {query!r} is not a UUID; not reading")
    reason = ""
    for n in range(1, attempts + 1):
        before = await read_logs(store, dest, query)
        listed = await list_data(store, dest)
        after = await read_logs(store, dest, query)
        out = judge(dest, before, listed, after)
        if isinstance(out, Snapshot):
            return Snapshot(
                out.dest,
                out.files,
                out.batches,
                out.through,
                out.skipped,
                out.short,
                attempts=n,
            )
        reason = out.reason
        log.info("zerorename: snapshot of %s taken again: %s", dest.uri, reason)
        await anyio.sleep(pause * n)
    raise StreamLogError(
        f"no consistent snapshot of {dest.uri} in {attempts} listings ({reason}); "
        "retry later, or read a narrower prefix"
    )


def reader_options(
    path: str,
    endpoint: str | None,
    region: str | None,
    profile: str | None,
    addressing_style: str,
) -> WriteOptions:
    """The options a reader of ``path`` reaches the store with (checked as a writer's)."""
    return WriteOptions.parse(
        {
            "path": path,
            "endpoint": endpoint or "",
            "region": region or "",
            "profile": profile or "",
            "addressingStyle": addressing_style,
        }
    )


def query_id_of(query: str) -> str:
    """A query id as given, or read from a local checkpoint directory (path or file: URI)."""
    if is_uuid(query):
        return query
    try:
        local = urlparse(query).path if query.startswith("file:") else query
        where = Path(local) / "metadata"
        text = where.read_text()
    except (OSError, ValueError) as exc:  # ValueError: a NUL, a bad URI, not UTF-8
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise StreamLogError(
            f"query {query!r} is not a query id, and no checkpoint metadata can be read "
            f"there ({why}); pass the query id or the query's checkpoint directory"
        ) from None
    return query_id_of_metadata(text, repr(str(where)))


def committed_files(
    path: str,
    query: str | None = None,
    *,
    endpoint: str | None = None,
    region: str | None = None,
    profile: str | None = None,
    addressing_style: str = "auto",
    attempts: int = ATTEMPTS,
) -> Snapshot:
    """The data files of fully committed batches at ``path`` (every stream's, or
    ``query``'s: a query id or its local checkpoint directory), plus files no log names
    (:attr:`Snapshot.older`), as one snapshot. Credentials come from the AWS chain."""
    opts = reader_options(path, endpoint, region, profile, addressing_style)
    q = query_id_of(query) if query is not None else None
    dest = Destination.parse(opts.path)
    from zerorename.spark_adapter.write import engine_for  # pyarrow: not for `zerorename jobs`

    return get_bridge().run(read_snapshot(engine_for(opts), dest, q, attempts=attempts))


__all__ = [
    "Retry",
    "Snapshot",
    "SnapshotFile",
    "committed_files",
    "is_data_key",
    "judge",
    "query_id_of",
    "read_log",
    "read_snapshot",
    "reader_options",
]
