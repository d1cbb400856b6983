"""What every actor of one schedule shares: the store's state, the scheduler, the history
the checker reads, and the jobs whose driver died (the operator's targets)."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from zerorename.sim.model import BUCKET, DEST, ActorSpec, History
from zerorename.sim.scheduler import Scheduler
from zerorename.testing.memfaults import ProcessCrashed
from zerorename.testing.memstate import MemoryState
from zerorename.testing.memstore import MemoryStore

URI = f"s3://{BUCKET}/{DEST}"
STREAM_DEST = "stream"
STREAM_URI = f"s3://{BUCKET}/{STREAM_DEST}"


@dataclass
class DeadJob:
    """A job whose driver died: an operator may resume or abort it."""

    job_id: str
    uri: str
    stream: bool


@dataclass
class World:
    """One schedule's shared state."""

    seed: int
    state: MemoryState
    sched: Scheduler
    tmp: Path
    history: History = field(default_factory=History)
    dead: list[DeadJob] = field(default_factory=list)
    avoid: frozenset[int] = frozenset()
    claimed: set[str] = field(default_factory=set)  # jobs an operator command took on
    #: the schedule's actors (an actor that acts on another's work finds it here)
    schedule_actors: tuple[ActorSpec, ...] = ()

    def store(self, actor: int) -> MemoryStore:
        """A new process's handle for ``actor``, its requests gated by the scheduler."""
        s = MemoryStore(self.state, min_part_size=1)
        s.gate = self.sched.gate_for(actor)
        return s

    def rng(self, actor: int, salt: str = "") -> random.Random:
        """The actor's own generator (job ids, targets): independent of the others."""
        return random.Random(f"{self.seed}/{actor}/{salt}")

    @property
    def step(self) -> int:
        return self.sched.step


def new_uuid(rng: random.Random) -> str:
    """A version-4 UUID drawn from ``rng`` (so a seed names the same jobs every run)."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside exception groups (and their causes' crashes)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def crashed(exc: BaseException) -> bool:
    """True when ``exc`` means the process died (a ProcessCrashed anywhere inside)."""
    seen: set[int] = set()

    def walk(e: BaseException | None) -> bool:
        if e is None or id(e) in seen:
            return False
        seen.add(id(e))
        if isinstance(e, ProcessCrashed):
            return True
        if isinstance(e, BaseExceptionGroup) and any(walk(x) for x in e.exceptions):
            return True
        return walk(e.__cause__) or walk(e.__context__)

    return walk(exc)


def one_line(exc: BaseException) -> str:
    text = " | ".join(f"{type(e).__name__}: {e}" for e in leaves(exc))
    return text.replace("\n", " ")[:300]
