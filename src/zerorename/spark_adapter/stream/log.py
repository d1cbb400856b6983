"""The streaming sink's record of committed micro-batches, and what to do with a batch (pure).

One small JSON object per query at ``<dest>/_zerorename_streams/<queryId>/log.json``
(readers skip names that start with ``_``). It keeps the highest committed batch id (the
watermark: Spark re-runs only the batch it did not record, so a batch id at or below it is
committed), totals, the last :data:`KEEP` batches (ids, job, files, rows, bytes, time) and,
while a batch commits, its intent (``pending``): the job and the pendingsets it completes.
The log does not grow with the query's age.

A commit of batch B by job J (see :func:`decide`):

1. B <= watermark: a duplicate (Spark re-runs a batch whose commit it did not record);
   J's uploads are aborted, nothing becomes visible, success.
2. an intent of B by another job K (a driver died during K's commit): with K's journal,
   K is resumed and recorded as B's commit; without it nothing proves K committed (a
   rollback, or a commit that never began completing), so K is discarded and B written
   again (:func:`recover`).
3. otherwise: write the intent (with J's journal, before any complete), commit J, write B
   as committed (with J's journal's ``succeeded``, after every complete).
"""

from __future__ import annotations

import builtins
import json
import re
import uuid
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, TypeGuard

from zerorename.spark_adapter.errors import StreamLogError
from zerorename.units import MiB

FORMAT = "zerorename-stream-log"
VERSION = 1
#: committed batches the log lists (older ones only count in the totals)
KEEP = 100
#: where the sink keeps its records, under the destination (readers skip ``_`` names)
STREAMS_DIR = "_zerorename_streams"
LOG_NAME = "log.json"
#: what the log may weigh when read (KEEP entries plus one intent of many pendingsets)
MAX_LOG_BYTES = 4 * MiB

#: the namespace of batch job ids (uuid5 of query id, writer token and batch id)
STREAM_NAMESPACE = uuid.UUID("6f6c2f1e-6d0b-4c55-9a55-7a65726f7265")

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def is_uuid(text: object) -> TypeGuard[str]:
    """True for a UUID as Spark writes query ids and uuid5 writes job ids (lower-case,
    hyphenated, nothing before or after it: not even a newline)."""
    return isinstance(text, str) and _UUID.fullmatch(text) is not None


def check_query_id(text: str) -> str:
    """A Spark query id (a UUID, as the checkpoint's ``metadata`` file holds it)."""
    if not is_uuid(text):
        raise StreamLogError(f"streaming query id {text!r} is not a UUID; not committing")
    return text


def query_id_of_metadata(text: str, where: str) -> str:
    """The query id in a checkpoint's ``metadata`` file: Spark writes ``{"id": "<uuid>"}``
    there when a query first starts and reads it back on every restart, so the id (and the
    query's log in the destination) lasts as long as the checkpoint."""
    try:
        doc = json.loads(text.strip().splitlines()[0]) if text.strip() else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
        raise StreamLogError(f"{where} is not a Spark checkpoint's metadata file")
    return check_query_id(doc["id"])


def stream_job_id(query_id: str, token: str, batch_id: int) -> str:
    """The job id of one run of a batch: every task of the run derives the same one (the
    token is random per writer, which Spark makes anew for every batch it plans)."""
    return str(uuid.uuid5(STREAM_NAMESPACE, f"{query_id}/{token}/{batch_id}"))


def log_key(list_prefix: str, query_id: str) -> str:
    """Key of the query's log under a destination's list prefix (ending in '/' or '')."""
    return f"{list_prefix}{STREAMS_DIR}/{check_query_id(query_id)}/{LOG_NAME}"


def jobs_prefix(list_prefix: str, query_id: str) -> str:
    """Where the query's tasks note each batch job they set up (``<job id>.json``): how a
    later commit finds the jobs of runs that died before their commit, to clean them up."""
    return f"{list_prefix}{STREAMS_DIR}/{check_query_id(query_id)}/jobs/"


def started_key(list_prefix: str, query_id: str, job_id: str) -> str:
    return f"{jobs_prefix(list_prefix, query_id)}{job_id}.json"


def started_job(prefix: str, key: str) -> str | None:
    """The job id a key under :func:`jobs_prefix` notes, or None for any other key."""
    name = key[len(prefix) :] if key.startswith(prefix) else ""
    job = name[: -len(".json")] if name.endswith(".json") else ""
    return job if is_uuid(job) else None


@dataclass(frozen=True)
class BatchEntry:
    """One committed micro-batch."""

    batch: int
    job_id: str
    files: int
    rows: int
    bytes: int
    committed_at: float


@dataclass(frozen=True)
class Intent:
    """A batch being committed by a job, and its counts. ``pendingsets``: the accepted
    attempts' pendingsets, as logs written before issue 20 list them; the sink now writes
    none (the job's journal and plan hold them, and :func:`recover` needs only the
    journal), so an intent's size does not grow with the batch's tasks: a list of
    ~30,000 keys made a log larger than :data:`MAX_LOG_BYTES`, which no later commit
    could read."""

    batch: int
    job_id: str
    pendingsets: tuple[str, ...]
    files: int
    rows: int
    bytes: int


@dataclass(frozen=True)
class StreamLog:
    """What a query committed to its destination (bounded)."""

    query_id: str
    last_batch: int | None = None
    batches: int = 0
    files: int = 0
    rows: int = 0
    bytes: int = 0
    recent: tuple[BatchEntry, ...] = ()
    pending: Intent | None = None

    def committed(self, batch: int) -> bool:
        return self.last_batch is not None and batch <= self.last_batch

    def with_intent(self, intent: Intent) -> StreamLog:
        if self.committed(intent.batch):
            raise StreamLogError(f"batch {intent.batch} is committed already")
        return replace(self, pending=intent)

    def with_commit(self, entry: BatchEntry) -> StreamLog:
        """The log with ``entry`` committed (intent cleared, the oldest entries dropped)."""
        if self.committed(entry.batch):
            raise StreamLogError(f"batch {entry.batch} is committed already")
        recent = (*self.recent, entry)[-KEEP:]
        return StreamLog(
            self.query_id,
            entry.batch,
            self.batches + 1,
            self.files + entry.files,
            self.rows + entry.rows,
            self.bytes + entry.bytes,
            recent,
            None,
        )

    def without_intent(self) -> StreamLog:
        return replace(self, pending=None)

    def to_json(self) -> builtins.bytes:
        doc: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "query_id": self.query_id,
            "last_batch": self.last_batch,
            "totals": {
                "batches": self.batches,
                "files": self.files,
                "rows": self.rows,
                "bytes": self.bytes,
            },
            "recent": [vars(e) for e in self.recent],
            "pending": None if self.pending is None else _intent_dict(self.pending),
        }
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


def _intent_dict(i: Intent) -> dict[str, Any]:
    d = dict(vars(i))
    d["pendingsets"] = list(i.pendingsets)
    return d


@dataclass
class _Fields:
    d: dict[str, Any]
    where: str
    used: set[str] = field(default_factory=set)

    def bad(self, what: str) -> StreamLogError:
        return StreamLogError(
            f"stream log {self.where}: {what}; not committing (fix or remove the log only "
            "if the query restarts from a fresh checkpoint)"
        )

    def get(self, key: str) -> Any:
        if key not in self.d:
            raise self.bad(f"no field {key!r}")
        self.used.add(key)
        return self.d[key]

    def count(self, key: str, *, nullable: bool = False) -> Any:
        v = self.get(key)
        if v is None and nullable:
            return None
        if type(v) is not int or v < 0:
            raise self.bad(f"{key} must be an integer >= 0, got {v!r}")
        return v

    def number(self, key: str) -> float:
        v = self.get(key)
        if type(v) not in (int, float) or v != v or v < 0:
            raise self.bad(f"{key} must be a number >= 0, got {v!r}")
        return float(v)

    def job(self, key: str) -> str:
        v = self.get(key)
        if not is_uuid(v):
            raise self.bad(f"{key} must be a job id (UUID), got {v!r}")
        return v

    def obj(self, key: str) -> _Fields:
        v = self.get(key)
        if not isinstance(v, dict):
            raise self.bad(f"{key} must be an object")
        return _Fields(v, self.where)

    def done(self) -> None:
        extra = sorted(set(self.d) - self.used)
        if extra:
            raise self.bad(f"unknown fields {extra}")


def _entry(f: _Fields) -> BatchEntry:
    e = BatchEntry(
        f.count("batch"),
        f.job("job_id"),
        f.count("files"),
        f.count("rows"),
        f.count("bytes"),
        f.number("committed_at"),
    )
    f.done()
    return e


def _intent(f: _Fields, pendingset_prefix: str) -> Intent:
    batch, job = f.count("batch"), f.job("job_id")
    sets = f.get("pendingsets")
    if not isinstance(sets, list) or not all(isinstance(s, str) for s in sets):
        raise f.bad("pendingsets must be a list of keys")
    prefix = pendingset_prefix.replace("{job}", job)
    if any(not s.startswith(prefix) or len(s) == len(prefix) for s in sets):
        raise f.bad(f"a pendingset of the intent is not job {job}'s")
    if len(set(sets)) != len(sets):
        raise f.bad("the intent names a pendingset twice")
    i = Intent(batch, job, tuple(sets), f.count("files"), f.count("rows"), f.count("bytes"))
    f.done()
    return i


def parse_log(data: bytes, *, query_id: str, where: str, pendingset_prefix: str) -> StreamLog:
    """Read and check a log; :class:`StreamLogError` names anything wrong. The intent's
    pendingsets must lie under ``pendingset_prefix`` (``{job}`` stands for its job id)."""
    f0 = _Fields({}, where)
    if len(data) > MAX_LOG_BYTES:
        raise f0.bad(f"{len(data)} bytes, more than a log holds ({MAX_LOG_BYTES})")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise f0.bad(f"not JSON ({exc.__class__.__name__})") from None
    if not isinstance(doc, dict):
        raise f0.bad("not a JSON object")
    f = _Fields(doc, where)
    if f.get("format") != FORMAT or f.get("version") != VERSION:
        raise f.bad(f"not a {FORMAT} version {VERSION}")
    if f.get("query_id") != query_id:
        raise f.bad(f"its query id is {doc.get('query_id')!r}, not {query_id!r}")
    last = f.count("last_batch", nullable=True)
    t = f.obj("totals")
    totals = (t.count("batches"), t.count("files"), t.count("rows"), t.count("bytes"))
    t.done()
    raw = f.get("recent")
    if not isinstance(raw, list) or len(raw) > KEEP:
        raise f.bad(f"recent must be a list of at most {KEEP} batches")
    recent = []
    for item in raw:
        if not isinstance(item, dict):
            raise f.bad("a recent batch is not an object")
        recent.append(_entry(_Fields(item, where)))
    ids = [e.batch for e in recent]
    if ids != sorted(set(ids)) or (ids and ids[-1] != last) or (last is not None and not ids):
        raise f.bad("recent batches must rise and end at last_batch")
    if len(recent) > totals[0]:
        raise f.bad("more recent batches than batches in total")
    pend = f.get("pending")
    pending = None
    if pend is not None:
        if not isinstance(pend, dict):
            raise f.bad("pending must be an object or null")
        pending = _intent(_Fields(pend, where), pendingset_prefix)
        if last is not None and pending.batch <= last:
            raise f.bad(f"pending batch {pending.batch} is committed already")
    f.done()
    return StreamLog(query_id, last, *totals, tuple(recent), pending)


class Step(Enum):
    """What a commit of batch B by job J does first."""

    #: B is committed already: abort J's uploads, report success
    DUPLICATE = "duplicate"
    #: another job's intent of B: settle it first (:func:`recover`)
    RECOVER = "recover"
    #: write J's intent, commit J, record B
    COMMIT = "commit"


def decide(log: StreamLog, batch: int, job_id: str) -> Step:
    """What to do with a commit of ``batch`` by ``job_id`` given the log."""
    if log.committed(batch):
        return Step.DUPLICATE
    p = log.pending
    if p is None:
        return Step.COMMIT
    if p.batch != batch:
        raise StreamLogError(
            f"the stream log has batch {p.batch} (job {p.job_id}) being committed, but Spark "
            f"commits batch {batch}: was the checkpoint replaced? Not committing"
        )
    return Step.RECOVER


class Recovery(Enum):
    """What to do with job K of a batch's intent found by a later commit of that batch."""

    #: K's journal exists: resume K (its journal proves what it completed), then record
    #: the batch as K's
    RESUME = "resume"
    #: nothing proves K committed: discard K (whatever is left of it), commit the new job
    DISCARD = "discard"


def recover(intent: Intent, *, journal: bool) -> Recovery:
    """K's fate. A job is adopted as the batch's commit only on proof: the log's own
    commit entry (then the batch is a duplicate, see :func:`decide`) or K's journal
    (resume checks every upload before the sink records anything). Without a journal K
    completed nothing that counts: a commit stores its journal before its first complete
    and deletes it last, after the sink recorded the batch, so only a rollback (an
    operator's ``jobs abort``) or a commit that never began completing leaves an intent
    without one; K is discarded and the batch written again."""
    return Recovery.RESUME if journal else Recovery.DISCARD


class InLog(Enum):
    """Where a query's log has a batch job (what ``zerorename jobs`` may do with it)."""

    #: the log's intent names it: its commit began and did not finish
    INTENT = "intent"
    #: the log records its batch as committed by it
    COMMITTED = "committed"
    #: its batch is committed by another job: this run is a duplicate
    SUPERSEDED = "superseded"
    #: its batch is committed, older than the log's window: by it or by another job,
    #: which the log no longer tells
    OLD = "old"
    #: the log does not name it: its commit never stored its intent
    ABSENT = "absent"


def in_log(log: StreamLog, job_id: str, batch: int | None) -> InLog:
    """Where ``log`` has job ``job_id`` of ``batch`` (None: unknown) (pure)."""
    if log.pending is not None and log.pending.job_id == job_id:
        return InLog.INTENT
    if any(e.job_id == job_id for e in log.recent):
        return InLog.COMMITTED
    if batch is not None and log.committed(batch):
        seen = any(e.batch == batch for e in log.recent)
        return InLog.SUPERSEDED if seen else InLog.OLD
    return InLog.ABSENT
