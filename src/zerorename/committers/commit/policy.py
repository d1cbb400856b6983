"""The job commit's policy: which work each state of the journal needs, and what a
failure there means. Pure, on top of the journal's state machine (:mod:`.journal`:
``TRANSITIONS`` and ``process_event``); :mod:`.run` does the I/O it names.

Rules (h11's ``_state.py`` style: the rules here, the work as tables, one step function):

1. A run is a fresh commit or a resume (:class:`Entry`). It walks the journal's states
   from where it finds the journal: in each it does the work :data:`WORK` names, whose
   journal event (:data:`RULES`) moves the state on, until ``succeeded``; then it finishes
   (``_SUCCESS``, the journal's ``succeeded``, the release).
2. A fresh commit starts in ``started`` with its rounds 1 and 2 (:attr:`Work.START`: the
   gate, the journal written If-None-Match, the plan). A resume of a ``started`` journal
   (an older zerorename's) reads and writes them again without the gate and the plan
   (:attr:`Work.RESTART`).
3. A resume first holds or takes the destination's lock (:attr:`Work.LOCK`). In
   ``completing`` it scans the sets from the watermark again and treats the first window
   as possibly done (:attr:`Work.COMPLETE_REST`). A journal it finds in ``replacing`` or
   ``succeeded`` claims every complete done: that is verified first (:attr:`Work.VERIFY`).
4. What a failure means depends on the work it stops (:class:`OnFailure`): before any old
   file was touched the job is rolled back when the options say so, else its journal is
   kept for resume or abort; once every file is complete it is never rolled back: the
   journal keeps the error and resume finishes. A bad record changes nothing: refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from zerorename.committers.commit.journal import Event, State, completed_event, process_event
from zerorename.committers.commit.lock import LockLost
from zerorename.committers.conflict import ConflictMode
from zerorename.committers.errors import ConflictError, JobCommitError, RecordFormatError

__all__ = [
    "RULES",
    "WORK",
    "Entry",
    "Fault",
    "OnFailure",
    "Raise",
    "Reaction",
    "Work",
    "fault_of",
    "left_behind",
    "next_work",
    "reaction",
    "works",
]


class Entry(StrEnum):
    """Why a run started (its value is the verb of its messages)."""

    COMMIT = "commit"
    RESUME = "resume"
    ABORT = "abort"


class Work(StrEnum):
    """One piece of the job commit's I/O (the driver has one method for each)."""

    LOCK = "lock"  # a resume: hold the lock if its commit does, else take it
    START = "start"  # rounds 1 and 2 of a fresh commit
    RESTART = "restart"  # rounds 1 and 2 again, for a journal stored in ``started``
    COMPLETE = "complete"  # every upload, ``window`` pendingsets in flight
    COMPLETE_REST = "complete_rest"  # the sets from the watermark, scanned again first
    VERIFY = "verify"  # every planned upload complete, or completed now
    REPLACE = "replace"  # the planned older objects still unchanged deleted


class OnFailure(StrEnum):
    """What a failure in a piece of work means (rule 4)."""

    RAISE = "raise"  # nothing to settle: raised as it is
    ROLL_BACK = "roll_back"  # no old file touched: roll back, or keep the journal
    ROLL_FORWARD = "roll_forward"  # every file complete: resume finishes


@dataclass(frozen=True)
class Rule:
    """The journal event a piece of work ends with (None: the state stays; ``completed``:
    :func:`~.journal.completed_event` picks the conflict mode's), and its failure's meaning."""

    event: Event | None
    on_failure: OnFailure


RULES: Mapping[Work, Rule] = {
    Work.LOCK: Rule(None, OnFailure.RAISE),
    Work.START: Rule(Event.SCANNED, OnFailure.ROLL_BACK),
    Work.RESTART: Rule(Event.SCANNED, OnFailure.ROLL_BACK),
    Work.COMPLETE: Rule(Event.COMPLETED, OnFailure.ROLL_BACK),
    Work.COMPLETE_REST: Rule(Event.COMPLETED, OnFailure.ROLL_BACK),
    Work.VERIFY: Rule(None, OnFailure.ROLL_FORWARD),
    Work.REPLACE: Rule(Event.REPLACED, OnFailure.ROLL_FORWARD),
}

#: (entry, state) -> the work done in that state; ``succeeded`` has none (the finish)
WORK: Mapping[tuple[Entry, State], Work] = {
    (Entry.COMMIT, State.STARTED): Work.START,
    (Entry.COMMIT, State.COMPLETING): Work.COMPLETE,
    (Entry.COMMIT, State.REPLACING): Work.REPLACE,
    (Entry.RESUME, State.STARTED): Work.RESTART,
    (Entry.RESUME, State.COMPLETING): Work.COMPLETE_REST,
    (Entry.RESUME, State.REPLACING): Work.REPLACE,
}

#: states whose journal claims every complete done: a resume that finds it there verifies
VERIFIED_ON_ENTRY = frozenset({State.REPLACING, State.SUCCEEDED})


def next_work(entry: Entry, state: State) -> Work | None:
    """The step function: the work ``entry`` does in ``state`` (None: it finishes).
    ValueError for a state no run works in (``rolling_back``: the rollback's)."""
    if state is State.SUCCEEDED:
        return None
    try:
        return WORK[entry, state]
    except KeyError:
        raise ValueError(f"a {entry.value} does no work in state {state.value}") from None


def works(entry: Entry, state: State, conflict: ConflictMode) -> tuple[Work, ...]:
    """Every piece of work a run does from ``state`` (the journal's as it found it) up to
    its finish, in order: :func:`next_work` walked along the journal's transitions."""
    out: list[Work] = []
    if entry is Entry.RESUME:
        out.append(Work.LOCK)
        if state in VERIFIED_ON_ENTRY:
            out.append(Work.VERIFY)
    while (work := next_work(entry, state)) is not None:
        out.append(work)
        event = RULES[work].event
        if event is Event.COMPLETED:
            event = completed_event(conflict)
        if event is not None:
            state = process_event(state, event)
    return tuple(out)


# ------------------------------------------------------------------------- failures
class Fault(StrEnum):
    """What kind of failure stopped a run (:func:`fault_of`)."""

    BAD_RECORD = "bad_record"  # RecordFormatError: a record failed its checks
    LOCK_LOST = "lock_lost"  # another job fenced this commit off the lock
    CONFLICT = "conflict"  # another writer's objects where the job writes
    COMMIT_ERROR = "commit_error"  # another JobCommitError (it says what is left)
    ERROR = "error"  # any other Exception
    INTERRUPT = "interrupt"  # not an Exception: a cancel, Ctrl-C, exit


def fault_of(exc: BaseException) -> Fault:
    if isinstance(exc, RecordFormatError):
        return Fault.BAD_RECORD
    if isinstance(exc, LockLost):
        return Fault.LOCK_LOST
    if isinstance(exc, ConflictError):
        return Fault.CONFLICT
    if isinstance(exc, JobCommitError):
        return Fault.COMMIT_ERROR
    if isinstance(exc, Exception):
        return Fault.ERROR
    return Fault.INTERRUPT


class Raise(StrEnum):
    """What the failed run raises."""

    REFUSED = "refused"  # a bad record: nothing completed or aborted; fix it or abort
    AS_IS = "as_is"  # the failure itself
    LEFT = "left"  # the commit failed; what is left of it (:func:`left_behind`)
    RESUME_FINISHES = "resume_finishes"  # failed after its files were complete: resume


@dataclass(frozen=True)
class Reaction:
    """What the driver does about a failure, in this order: roll back (a failed rollback
    is logged, its journal left), store the journal with the error (logged when that
    fails; a refusal's store is not, as it decides nothing), raise."""

    roll_back: bool
    save_error: bool
    raises: Raise


def reaction(
    on: OnFailure, fault: Fault, entry: Entry, state: State, rollback_on_failure: bool
) -> Reaction:
    """Rule 4 for a failure of kind ``fault`` in work that fails ``on`` that way, the
    journal in ``state``. A fresh commit's journal is stored from its round 2 on, so a
    failure in ``started`` has none to keep; a lost lock's journal is the fencer's."""
    if on is OnFailure.RAISE:
        return Reaction(False, False, Raise.AS_IS)
    if fault is Fault.BAD_RECORD:
        # a fresh commit's own journal records why it stopped; a resume leaves it as it was
        keep = on is OnFailure.ROLL_BACK and entry is Entry.COMMIT and state is not State.STARTED
        return Reaction(False, keep, Raise.REFUSED)
    if on is OnFailure.ROLL_FORWARD:
        commits_own = fault in (Fault.LOCK_LOST, Fault.CONFLICT, Fault.COMMIT_ERROR)
        own = commits_own or fault is Fault.INTERRUPT
        return Reaction(False, True, Raise.AS_IS if own else Raise.RESUME_FINISHES)
    roll = rollback_on_failure and fault is not Fault.INTERRUPT
    keep = not roll and state is not State.STARTED and fault is not Fault.LOCK_LOST
    return Reaction(roll, keep, Raise.AS_IS if fault is Fault.INTERRUPT else Raise.LEFT)


def left_behind(rolled_back: bool, entry: Entry, state: State) -> str:
    """What a commit that failed before its files were complete left, for its error."""
    if rolled_back:
        return "rolled back: nothing of it is left"
    if state is State.STARTED and entry is Entry.COMMIT:
        return "nothing of the commit was written: commit again, or abort the job"
    return "left for resume/abort (see its journal)"
