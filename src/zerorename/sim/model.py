"""What a simulated schedule is made of (pure data): the actors, the faults planned for
them, the interleaving, and what each actor was told while it ran (the checker's input)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

BUCKET = "bkt"
DEST = "out"
#: a sibling destination: a prefix of ``out`` as a string, never inside it
SIBLING = "out10"


class Kind(Enum):
    """What an actor is."""

    JOB = "job"  # a batch job of one committer and conflict mode
    S3A = "s3a"  # a Hadoop S3A magic job (its layout, its protocol)
    STREAM = "stream"  # a streaming query: batches through the StreamSink
    ABORT = "abort"  # the operator: `zerorename jobs abort` of a dead job
    RESUME = "resume"  # the operator: `zerorename jobs resume` of a dead job
    CLEANUP = "cleanup"  # the operator: Job.cleanup() of a dead job (records, uploads)
    UPLOADS = "uploads"  # the operator: `zerorename uploads abort` of the destination
    LIFECYCLE = "lifecycle"  # the bucket's rule aborting old pending uploads
    FOREIGN = "foreign"  # another writer: PUTs and a multipart upload of its own keys
    STRAGGLER = "straggler"  # a copy of a stream task Spark did not accept, run any time


class FaultKind(Enum):
    """A fault met by one request."""

    CRASH_BEFORE = "crash-before"  # the process dies; the request never took effect
    CRASH_AFTER = "crash-after"  # the request took effect, then the process died
    LOST = "lost-answer"  # it took effect, the answer was lost (retries ran out)
    THROTTLED = "throttled"  # 503 SlowDown until the retry budget ran out: no effect


@dataclass(frozen=True)
class ActorSpec:
    """One actor: its kind and settings (committer, conflict mode, batches...)."""

    kind: Kind
    committer: str = "magic"  # magic | staging | partitioned (JOB)
    conflict: str = "append"  # fail | append | replace (JOB)
    tasks: int = 2
    batches: int = 2  # STREAM
    delay: int = 0  # scheduler steps before it starts

    def label(self) -> str:
        if self.kind is Kind.JOB:
            return f"job/{self.committer}/{self.conflict}"
        return str(self.kind.value)


@dataclass(frozen=True)
class FaultSpec:
    """A fault at the ``nth`` request (from 1) of actor ``actor``."""

    actor: int
    nth: int
    kind: FaultKind


@dataclass(frozen=True)
class Schedule:
    """Everything one run depends on: the seed (job ids, interleaving), the actors, the
    faults, and optionally the first picks of the interleaving (actor indexes)."""

    seed: int
    actors: tuple[ActorSpec, ...]
    faults: tuple[FaultSpec, ...]
    picks: tuple[int, ...] | None = None
    #: findings of issue 20 whose reach is left out (operators never target stream jobs
    #: with 1 in it)
    avoid: frozenset[int] = frozenset()
    profile: str = "default"

    def without_actor(self, i: int) -> Schedule:
        def shift(n: int) -> int:
            return n - 1 if n > i else n

        actors = self.actors[:i] + self.actors[i + 1 :]
        faults = tuple(replace(f, actor=shift(f.actor)) for f in self.faults if f.actor != i)
        picks = None
        if self.picks is not None:
            picks = tuple(shift(p) for p in self.picks if p != i)
        return Schedule(self.seed, actors, faults, picks, self.avoid, self.profile)

    def describe(self) -> list[str]:
        lines = [f"seed {self.seed} profile {self.profile}"]
        for i, a in enumerate(self.actors):
            faults = [f"{f.kind.value}@{f.nth}" for f in self.faults if f.actor == i]
            extra = f" tasks={a.tasks}" if a.kind in (Kind.JOB, Kind.S3A) else ""
            if a.kind is Kind.STREAM:
                extra = f" tasks={a.tasks} batches={a.batches}"
            lines.append(
                f"  actor {i}: {a.label()}{extra} start>={a.delay}"
                + (f" faults {', '.join(faults)}" if faults else "")
            )
        if self.picks is not None:
            lines.append(f"  picks {','.join(map(str, self.picks))}")
        return lines


#: one request the scheduler released: (step, actor, operation, key)
Request = tuple[int, int, str, str]


class Outcome(Enum):
    """What an actor (or the final recovery, for a dead one) was told about a job."""

    COMMITTED = "committed"  # commit (or resume) reported success
    FAILED = "failed"  # commit reported failure and rolled back
    LEFT = "left"  # commit failed without rollback: left for resume/abort
    CRASHED = "crashed"  # its process died: nobody told it anything
    ABORTED = "aborted"  # an abort (job's own, operator's, final cleanup) succeeded
    REFUSED = "refused"  # an operator command refused
    CLEARED = "cleared"  # an abort found nothing to roll back: it deleted only records


@dataclass
class JobTold:
    """One job as the checker sees it: its own files (key -> bytes), and what it was
    told, in order, with the scheduler step of each."""

    job_id: str
    actor: int
    committer: str
    conflict: str
    files: dict[str, bytes]
    commit_start: int | None = None
    commit_end: int | None = None
    seen_at_start: frozenset[str] = frozenset()
    told: list[tuple[int, Outcome, str]] = field(default_factory=list)
    #: keys an abort kept and told the operator this job may have completed (S3A)
    kept: set[str] = field(default_factory=set)

    def said(self, outcome: Outcome) -> bool:
        return any(o is outcome for _, o, _ in self.told)


@dataclass
class StreamTold:
    """A query: the data of each batch's tasks (the same in every run of a batch)."""

    query_id: str
    actor: int
    batches: dict[int, list[bytes]] = field(default_factory=dict)
    done: int = 0  # batches the query has finished (the checkpoint's view)
    runs: int = 0  # drivers started
    outcomes: list[tuple[int, int, str]] = field(default_factory=list)  # step, batch, action


@dataclass
class History:
    """What every actor was told or did, for the checker."""

    jobs: dict[str, JobTold] = field(default_factory=dict)
    streams: dict[str, StreamTold] = field(default_factory=dict)
    #: foreign objects: key -> (bytes, step the PUT was sent, step it was answered or None)
    foreign: dict[str, tuple[bytes, int, int | None]] = field(default_factory=dict)
    foreign_uploads: set[str] = field(default_factory=set)  # upload ids
    notes: list[str] = field(default_factory=list)  # what happened, for the report
    #: steps at which pending uploads were aborted by prefix or age (operator, lifecycle)
    prefix_aborts: list[int] = field(default_factory=list)
    #: errors outside zerorename's hierarchy, or an actor that raised unexpectedly
    errors: list[str] = field(default_factory=list)
    #: every request the scheduler released, in order
    requests: list[Request] = field(default_factory=list)
