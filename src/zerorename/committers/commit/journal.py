r"""Job records and the job-commit state machine: pure data and decisions, no I/O.

- ``job.json`` (:class:`JobMarker`): written at job setup; its presence means the job is
  active. Task attempts check it, so a straggler of a finished job commits nothing.
- ``plan.json`` (:class:`CommitPlan`): the pendingsets a job commit completes, fixed
  before anything is completed.
- ``journal.json`` (:class:`Journal`): the commit's state, rewritten at every state change
  and as pendingsets finish, so another process can ``resume`` or ``abort`` a commit that
  crashed half way.

The state machine (h11's ``_state.py`` style: the rules here, the moves as one table,
one step function). Rules:

1. A commit is in exactly one :class:`State`, stored in its journal. The state changes
   only by :func:`process_event` (old state, :class:`Event`) -> new state, which raises
   JournalError for any pair not in :data:`TRANSITIONS`; the journal is saved after each.
2. ``started``: the plan is fixed, nothing is completed yet. ``scanned`` (every
   pendingset read and checked, conflicts pre-checked) -> ``completing``.
3. ``completing``: uploads are being completed; the journal's watermark says which
   pendingsets are done. When all are: ``completed`` -> ``succeeded``, or in replace mode
   ``completed_replacing`` -> ``replacing`` (:func:`completed_event` picks).
4. ``replacing``: the planned older objects are being deleted. ``replaced`` ->
   ``succeeded``. From here on old files may be gone: the commit only rolls forward.
5. ``succeeded``: ``_SUCCESS`` is (re)written and the job's records deleted; no event.
6. ``abort`` is legal only while no old file was deleted and no ``_SUCCESS`` written
   (``started``, ``completing``) and again in ``rolling_back`` (a rollback resumed);
   ``rolling_back`` ends with the records deleted; no other event.

::

    started -scanned-> completing -completed-> succeeded
       |                  |  \-completed_replacing-> replacing -replaced-> succeeded
       +-abort------------+-abort-> rolling_back (-abort-> rolling_back)
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from zerorename.committers.codec.pending import MAX_SUCCESS_FILENAMES
from zerorename.committers.codec.validate import MAX_INT, Fields, load_json, malformed
from zerorename.committers.conflict import ConflictMode, ConflictScope
from zerorename.committers.context import DEFAULT_WINDOW, CommitterKind
from zerorename.committers.errors import InvalidJobId, JournalError, PathError, RecordFormatError
from zerorename.committers.paths import PENDINGSET_SUFFIX, JobLayout, check_job_id, task_name

JOB_VERSION = 1
PLAN_VERSION = 1
JOURNAL_VERSION = 1
#: committer kinds a job record may name (``committer.committer_class`` maps them)
COMMITTER_KINDS = tuple(k.value for k in CommitterKind)
#: the largest window a journal may hold (pendingsets in flight at once)
MAX_WINDOW = 1 << 20


class State(StrEnum):
    STARTED = "started"
    COMPLETING = "completing"
    REPLACING = "replacing"
    SUCCEEDED = "succeeded"
    ROLLING_BACK = "rolling_back"


class Event(StrEnum):
    """What happened to a commit (rules 2-6 above)."""

    SCANNED = "scanned"
    COMPLETED = "completed"
    COMPLETED_REPLACING = "completed_replacing"
    REPLACED = "replaced"
    ABORT = "abort"


#: state -> event -> new state; a pair not here is illegal.
TRANSITIONS: Mapping[State, Mapping[Event, State]] = {
    State.STARTED: {Event.SCANNED: State.COMPLETING, Event.ABORT: State.ROLLING_BACK},
    State.COMPLETING: {
        Event.COMPLETED: State.SUCCEEDED,
        Event.COMPLETED_REPLACING: State.REPLACING,
        Event.ABORT: State.ROLLING_BACK,
    },
    State.REPLACING: {Event.REPLACED: State.SUCCEEDED},
    State.SUCCEEDED: {},
    State.ROLLING_BACK: {Event.ABORT: State.ROLLING_BACK},
}


def process_event(state: State, event: Event, *, job_id: str = "") -> State:
    """The state after ``event`` in ``state``; JournalError when the table forbids it."""
    try:
        return TRANSITIONS[state][event]
    except KeyError:
        who = f"job {job_id}: " if job_id else ""
        raise JournalError(
            f"{who}event {event.value} is not allowed in state {state.value}"
        ) from None


def completed_event(mode: ConflictMode) -> Event:
    """The event of a commit whose uploads are all complete: replace still has old files
    to delete."""
    return Event.COMPLETED_REPLACING if mode is ConflictMode.REPLACE else Event.COMPLETED


def can_abort(state: State) -> bool:
    """Rolling back is safe only while no old file was deleted and no _SUCCESS written."""
    return Event.ABORT in TRANSITIONS[state]


def _load(data: bytes | str, what: str, location: str, version: int) -> Fields:
    fields = Fields(load_json(data, what, location), what, location)
    if fields.d.get("version") != version:
        raise RecordFormatError(
            f"{what} version {fields.d.get('version')!r} is not supported "
            f"(this zerorename reads version {version})",
            location=location,
        )
    return fields


def _dump(d: Mapping[str, Any]) -> bytes:
    return json.dumps(d, ensure_ascii=False, indent=1).encode("utf-8")


@dataclass(frozen=True)
class JobMarker:
    """``job.json``: who the job is. Never holds credentials or endpoints."""

    job_id: str
    committer: str
    destination: str
    conflict: str
    scope: str
    created: float = field(default_factory=time.time)
    hostname: str = field(default_factory=socket.gethostname)

    def to_json(self) -> bytes:
        return _dump(
            {
                "version": JOB_VERSION,
                "jobId": self.job_id,
                "committer": self.committer,
                "destination": self.destination,
                "conflict": self.conflict,
                "scope": self.scope,
                "created": self.created,
                "hostname": self.hostname,
            }
        )

    @classmethod
    def from_json(cls, data: bytes | str, *, location: str = "") -> JobMarker:
        f = _load(data, "job record", location, JOB_VERSION)
        marker = cls(
            job_id=f.str_("jobId"),
            committer=f.choice("committer", COMMITTER_KINDS),
            destination=f.str_("destination"),
            conflict=f.choice("conflict", [m.value for m in ConflictMode]),
            scope=f.choice("scope", [s.value for s in ConflictScope]),
            created=f.time_("created"),
            hostname=f.str_("hostname", required=False, empty=True),
        )
        try:
            check_job_id(marker.job_id)
        except InvalidJobId as exc:
            raise f.fail("jobId", str(exc)) from None
        return marker


@dataclass(frozen=True)
class PlannedSet:
    """One pendingset a commit will complete."""

    key: str
    task_id: str = ""
    attempt: int | None = None


@dataclass(frozen=True)
class CommitPlan:
    """``plan.json``: the pendingsets of the commit, in the order they are completed."""

    job_id: str
    pendingsets: tuple[PlannedSet, ...]
    source: str  # "summaries" or "listing"

    def to_json(self) -> bytes:
        return _dump(
            {
                "version": PLAN_VERSION,
                "jobId": self.job_id,
                "source": self.source,
                "pendingsets": [asdict(p) for p in self.pendingsets],
            }
        )

    @classmethod
    def from_json(cls, data: bytes | str, *, location: str = "") -> CommitPlan:
        """Parse and type-check; whether the keys are the job's is :func:`check_plan`'s."""
        f = _load(data, "commit plan", location, PLAN_VERSION)
        raw = f.d.get("pendingsets")
        if not isinstance(raw, list):
            raise f.fail("pendingsets", "must be a list")
        sets = []
        for i, p in enumerate(raw):
            e = Fields(p, f"commit plan entry pendingsets[{i}]", location)
            attempt = e.d.get("attempt")
            sets.append(
                PlannedSet(
                    key=e.str_("key"),
                    task_id=e.str_("task_id", required=False, empty=True),
                    attempt=None if attempt is None else e.int_("attempt"),
                )
            )
        return cls(
            job_id=f.str_("jobId"),
            pendingsets=tuple(sets),
            source=f.choice("source", ("summaries", "listing")),
        )


@dataclass
class Journal:
    """``journal.json``: where a job commit is. ``watermark``: every pendingset with a plan
    index below it is fully completed; none at or beyond ``watermark + window`` was started."""

    job_id: str
    state: State = State.STARTED
    watermark: int = 0
    window: int = DEFAULT_WINDOW
    pendingsets_total: int = 0
    uploads_total: int = 0
    bytes_total: int = 0
    uploads_done: int = 0
    started: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    processes: int = 1
    error: str | None = None
    filenames: list[str] = field(default_factory=list)
    retries: int = 0
    throttles: int = 0
    #: the job that fenced this commit off its destination's commit lock (a tombstone
    #: planted where no journal was: :mod:`.lock`); None for a commit's own journal
    fenced_by: str | None = None
    #: a tombstone's: the ``acquired`` time of the lock record it fenced (the one its
    #: fencer deletes); a lock naming the job with another time was taken after the fence
    fenced_lock: float | None = None

    def apply(self, event: Event) -> State:
        """Take ``event`` (:func:`process_event`); a commit that moves on clears its error,
        a rollback keeps the error that caused it."""
        self.state = process_event(self.state, event, job_id=self.job_id)
        self.error = None if self.state is not State.ROLLING_BACK else self.error
        return self.state

    def to_json(self) -> bytes:
        d = asdict(self)
        d["state"] = self.state.value
        d["version"] = JOURNAL_VERSION
        d["jobId"] = d.pop("job_id")
        if d["fenced_lock"] is None:  # a commit's own journal is written as before
            del d["fenced_lock"]
        return _dump(d)

    @classmethod
    def from_json(cls, data: bytes | str, *, location: str = "") -> Journal:
        """Parse and check every field (type and range): a journal decides what a resume
        completes, deletes or aborts, so nothing in it is taken on trust."""
        f = _load(data, "journal", location, JOURNAL_VERSION)
        state = f.choice("state", [s.value for s in State])
        total = f.int_("pendingsets_total")
        j = cls(
            job_id=f.str_("jobId"),
            state=State(state),
            watermark=f.int_("watermark", hi=total),
            window=f.int_("window", lo=1, hi=MAX_WINDOW),
            pendingsets_total=total,
            uploads_total=f.int_("uploads_total"),
            bytes_total=f.int_("bytes_total"),
            uploads_done=f.int_("uploads_done"),
            started=f.time_("started"),
            updated=f.time_("updated"),
            processes=f.int_("processes", lo=1),
            error=f.opt_str("error"),
            filenames=f.str_list("filenames", most=MAX_SUCCESS_FILENAMES),
            retries=f.int_("retries", required=False),
            throttles=f.int_("throttles", required=False),
            fenced_by=f.opt_str("fenced_by"),
            fenced_lock=None if f.d.get("fenced_lock") is None else f.time_("fenced_lock"),
        )
        for name, value in (("jobId", j.job_id), ("fenced_by", j.fenced_by)):
            try:
                if value is not None:
                    check_job_id(value)
            except InvalidJobId as exc:
                raise f.fail(name, str(exc)) from None
        if j.state in (State.REPLACING, State.SUCCEEDED) and j.watermark != total:
            raise f.fail("watermark", f"{j.watermark} of {total} pendingsets done in state {state}")
        return j


def check_plan(plan: CommitPlan, layout: JobLayout, *, location: str = "") -> None:
    """A plan names only the job's own pendingsets, each once: keys directly in the job's
    ``pendingsets/`` directory named ``<task>.pendingset``; attempts >= 0."""
    what = f"plan of job {layout.job_id}"
    if plan.job_id != layout.job_id:
        raise RecordFormatError(
            f"{what} is malformed: jobId: {plan.job_id!r} is another job", location=location
        )
    seen: set[str] = set()
    base = layout.pendingsets_dir
    for i, p in enumerate(plan.pendingsets):
        where = f"pendingsets[{i}]"
        name = p.key[len(base) :] if p.key.startswith(base) else ""
        stem = name[: -len(PENDINGSET_SUFFIX)] if name.endswith(PENDINGSET_SUFFIX) else ""
        try:
            ok = bool(stem) and task_name(stem) == stem
        except PathError:
            ok = False
        if not ok:
            raise RecordFormatError(
                f"{what} is malformed: {where}: {p.key!r} is not a pendingset of the job "
                f"(must be {base}<task>{PENDINGSET_SUFFIX})",
                location=location,
            )
        if p.key in seen:
            raise RecordFormatError(
                f"{what} is malformed: {where}: {p.key!r} is listed twice", location=location
            )
        seen.add(p.key)
        if p.attempt is not None and (type(p.attempt) is not int or not 0 <= p.attempt <= MAX_INT):
            raise RecordFormatError(
                f"{what} is malformed: {where}: attempt {p.attempt!r} is not an integer >= 0",
                location=location,
            )


def resumable_plan(data: bytes, j: Journal, layout: JobLayout, dest_uri: str) -> CommitPlan:
    """plan.json for a resume, checked: the job's own pendingsets, as many as the journal
    counts; else one RecordFormatError line that says what to do."""
    location = layout.dest.uri_of(layout.plan)
    try:
        plan = CommitPlan.from_json(data, location=location)
        check_plan(plan, layout, location=location)
        n = len(plan.pendingsets)
        if j.state is not State.STARTED and j.pendingsets_total != n:
            raise RecordFormatError(
                f"commit plan is malformed: pendingsets: {n}, the journal counts "
                f"{j.pendingsets_total}",
                location=location,
            )
    except RecordFormatError as exc:
        what = "commit plan" if exc.detail.startswith("commit plan") else f"plan of job {j.job_id}"
        raise malformed("plan.json", what, exc, dest_uri, j.job_id) from None
    return plan
