"""Job records and the job-commit state machine: pure data and decisions, no I/O.

- ``job.json`` (:class:`JobMarker`): written at job setup; its presence means the job is
  active. Task attempts check it, so a straggler of a finished job commits nothing.
- ``plan.json`` (:class:`CommitPlan`): the pendingsets a job commit completes, fixed
  before anything is completed.
- ``journal.json`` (:class:`Journal`): the commit's state, rewritten at every state change
  and as pendingsets finish, so another process can ``resume`` or ``abort`` a commit that
  crashed half way.

States and the moves between them::

    started -> completing -> [replacing ->] succeeded -> (records deleted)
       \\            \\
        +------------+--> rolling_back -> (records deleted)

A commit that fails before ``replacing`` is rolled back (or left for resume/abort);
from ``replacing`` on, old files may already be deleted, so it can only roll forward.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from zerorename.committers.conflict import ConflictMode, ConflictScope
from zerorename.committers.errors import InvalidJobId, JournalError, RecordFormatError
from zerorename.committers.paths import JobLayout, check_job_id
from zerorename.committers.records import MAX_SUCCESS_FILENAMES
from zerorename.committers.validate import Fields, check_plan, load_json, malformed

JOB_VERSION = 1
PLAN_VERSION = 1
JOURNAL_VERSION = 1
#: committer kinds a job record may name (``committer.committer_class`` maps them)
COMMITTER_KINDS = ("magic", "staging", "directory", "partitioned")
#: the largest window a journal may hold (pendingsets in flight at once)
MAX_WINDOW = 1 << 20


class State(StrEnum):
    STARTED = "started"
    COMPLETING = "completing"
    REPLACING = "replacing"
    SUCCEEDED = "succeeded"
    ROLLING_BACK = "rolling_back"


_NEXT: Mapping[State, frozenset[State]] = {
    State.STARTED: frozenset({State.STARTED, State.COMPLETING, State.ROLLING_BACK}),
    State.COMPLETING: frozenset(
        {State.COMPLETING, State.REPLACING, State.SUCCEEDED, State.ROLLING_BACK}
    ),
    State.REPLACING: frozenset({State.REPLACING, State.SUCCEEDED}),
    State.SUCCEEDED: frozenset({State.SUCCEEDED}),
    State.ROLLING_BACK: frozenset({State.ROLLING_BACK}),
}


def can_move(old: State, new: State) -> bool:
    return new in _NEXT[old]


def can_abort(state: State) -> bool:
    """Rolling back is safe only while no old file was deleted and no _SUCCESS written."""
    return state in (State.STARTED, State.COMPLETING, State.ROLLING_BACK)


def resume_step(state: State) -> str:
    """What ``resume`` runs first for a journal in ``state``."""
    return {
        State.STARTED: "validate",
        State.COMPLETING: "complete",
        State.REPLACING: "replace",
        State.SUCCEEDED: "cleanup",
        State.ROLLING_BACK: "rollback",
    }[state]


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
    window: int = 8
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

    def move(self, new: State) -> None:
        """Change state; JournalError on a move the state machine forbids."""
        if not can_move(self.state, new):
            raise JournalError(
                f"job {self.job_id}: cannot go from {self.state.value} to {new.value}"
            )
        self.state = new
        self.error = None if new is not State.ROLLING_BACK else self.error

    def to_json(self) -> bytes:
        d = asdict(self)
        d["state"] = self.state.value
        d["version"] = JOURNAL_VERSION
        d["jobId"] = d.pop("job_id")
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
        )
        try:
            check_job_id(j.job_id)
        except InvalidJobId as exc:
            raise f.fail("jobId", str(exc)) from None
        if j.state in (State.REPLACING, State.SUCCEEDED) and j.watermark != total:
            raise f.fail("watermark", f"{j.watermark} of {total} pendingsets done in state {state}")
        return j


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


class Watermark:
    """Tracks which pendingsets of a plan are done while several are in flight.

    ``low`` is the first index not yet done. A pendingset may start only while its index is
    below ``persisted + window``, where ``persisted`` is the low mark last written to the
    journal, so after a crash only ``[persisted, persisted + window)`` can be half done.
    """

    def __init__(self, start: int, window: int, total: int) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        self.low = start
        self.persisted = start
        self.window = window
        self.total = total
        self._done: set[int] = set()

    def may_start(self, index: int) -> bool:
        return index < self.persisted + self.window

    def done(self, index: int) -> None:
        self._done.add(index)
        while self.low in self._done:
            self._done.discard(self.low)
            self.low += 1

    def should_persist(self) -> bool:
        """Persist when at least half the window has been released, or at the end."""
        return self.low - self.persisted >= max(1, self.window // 2) or (
            self.low >= self.total and self.low != self.persisted
        )

    def persisted_at(self, low: int) -> None:
        self.persisted = low
