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

from zerorename.committers.errors import JournalError, RecordFormatError

JOB_VERSION = 1
PLAN_VERSION = 1
JOURNAL_VERSION = 1


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


def _load(data: bytes | str, what: str, location: str, version: int) -> dict[str, Any]:
    try:
        d = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RecordFormatError(
            f"{what} is not valid JSON (corrupt?): {exc}", location=location
        ) from None
    if not isinstance(d, dict):
        raise RecordFormatError(f"{what} must be a JSON object", location=location)
    if d.get("version") != version:
        raise RecordFormatError(
            f"{what} version {d.get('version')!r} is not supported "
            f"(this zerorename reads version {version})",
            location=location,
        )
    return d


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
        d = _load(data, "job record", location, JOB_VERSION)
        try:
            return cls(
                job_id=str(d["jobId"]),
                committer=str(d["committer"]),
                destination=str(d["destination"]),
                conflict=str(d["conflict"]),
                scope=str(d["scope"]),
                created=float(d["created"]),
                hostname=str(d.get("hostname", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordFormatError(f"malformed job record: {exc!r}", location=location) from None


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
        d = _load(data, "commit plan", location, PLAN_VERSION)
        try:
            sets = tuple(
                PlannedSet(
                    key=str(p["key"]), task_id=str(p.get("task_id", "")), attempt=p.get("attempt")
                )
                for p in d["pendingsets"]
            )
            return cls(job_id=str(d["jobId"]), pendingsets=sets, source=str(d["source"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordFormatError(f"malformed commit plan: {exc!r}", location=location) from None


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
        d = _load(data, "journal", location, JOURNAL_VERSION)
        try:
            d.pop("version")
            d["job_id"] = str(d.pop("jobId"))
            d["state"] = State(d["state"])
            known = set(cls.__dataclass_fields__)
            return cls(**{k: v for k, v in d.items() if k in known})
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordFormatError(f"malformed journal: {exc!r}", location=location) from None


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
