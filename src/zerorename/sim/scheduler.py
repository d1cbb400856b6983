"""The seeded scheduler: every actor is a coroutine; each store request (and each pause
an actor asks for) waits at the gate until the scheduler picks it. The scheduler picks
only when every actor is parked (no task ready to run, no worker thread busy), so a seed
always yields the same interleaving, and it hands the picked request its planned fault.

The choice is a pure function of the waiting set and the seed's generator (or of a given
list of picks, for replay and shrinking)."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from zerorename.engine.errors import RetriesExhausted
from zerorename.sim.model import FaultKind, FaultSpec, Request
from zerorename.testing.memfaults import Fault
from zerorename.testing.rounds import settle


@dataclass
class Waiter:
    """One request (or pause) parked at the gate."""

    actor: int
    arrival: int
    op: str
    key: str
    request: bool  # False: a pause, which meets no fault
    not_before: int
    future: asyncio.Future[Fault | None]


def fault_of(kind: FaultKind) -> Fault:
    """The store fault a planned fault kind means."""
    if kind is FaultKind.CRASH_BEFORE:
        return Fault(0, None, False, None)
    if kind is FaultKind.CRASH_AFTER:
        return Fault(0, None, True, None)
    if kind is FaultKind.LOST:
        return Fault(
            0, None, True, RetriesExhausted("answer lost (simulated)", code="InternalError")
        )
    return Fault(
        0, None, False, RetriesExhausted("SlowDown past the budget (simulated)", code="SlowDown")
    )


def choose(waiting: list[Waiter], step: int, rng: random.Random, pick: int | None) -> Waiter:
    """The request to release: the given actor's first if it waits, else (with no pick)
    a random actor's first; one not yet due to start only when nothing else waits."""
    due = [w for w in waiting if w.not_before <= step] or waiting
    actors = sorted({w.actor for w in due})
    if pick is None:
        pick = rng.choice(actors)
    actor = pick if pick in actors else actors[0]
    return min((w for w in due if w.actor == actor), key=lambda w: w.arrival)


class Scheduler:
    """Runs actors one request at a time, in the order the seed (or the picks) choose."""

    def __init__(
        self, seed: int, faults: tuple[FaultSpec, ...], picks: tuple[int, ...] | None
    ) -> None:
        self.rng = random.Random(seed)
        self.faults = {(f.actor, f.nth): f.kind for f in faults}
        self.picks = picks
        self.step = 0
        self.waiting: list[Waiter] = []
        self.requests: dict[int, int] = {}
        self.picked: list[int] = []
        self.trace: list[str] = []
        self.log: list[Request] = []
        self.live = 0
        self._arrival = itertools.count()

    def gate_for(self, actor: int) -> Callable[[str, str, str], Awaitable[Fault | None]]:
        """The gate of a store handle of ``actor`` (one per process the actor runs)."""

        async def gate(op: str, bucket: str, key: str) -> Fault | None:
            return await self._park(actor, op, key, request=True)

        return gate

    async def pause(self, actor: int, what: str, *, not_before: int = 0) -> None:
        """Let the scheduler choose when ``actor`` goes on (a step with no request)."""
        await self._park(actor, what, "", request=False, not_before=not_before)

    async def _park(
        self, actor: int, op: str, key: str, *, request: bool, not_before: int = 0
    ) -> Fault | None:
        fut: asyncio.Future[Fault | None] = asyncio.get_running_loop().create_future()
        w = Waiter(actor, next(self._arrival), op, key, request, not_before, fut)
        self.waiting.append(w)
        try:
            return await fut
        finally:  # cancelled (a sibling request of the process failed): no longer waiting
            if w in self.waiting:
                self.waiting.remove(w)

    async def drive(self) -> None:
        """Release parked requests one at a time until every actor has finished."""
        while True:
            await settle()
            if not self.waiting:
                if self.live == 0:
                    return
                await asyncio.sleep(0.001)  # an actor is sleeping (a timer): let it run
                continue
            n = len(self.picked)
            pick = self.picks[n] if self.picks is not None and n < len(self.picks) else None
            if self.picks is not None and pick is None:
                pick = min(w.actor for w in self.waiting)
            w = choose(self.waiting, self.step, self.rng, pick)
            self.waiting.remove(w)
            self.step += 1
            self.picked.append(w.actor)
            fault: Fault | None = None
            label = ""
            if w.request:
                nth = self.requests.get(w.actor, 0) + 1
                self.requests[w.actor] = nth
                kind = self.faults.get((w.actor, nth))
                if kind is not None:
                    fault = fault_of(kind)
                    label = f"  <- {kind.value}"
                self.trace.append(f"{self.step:4d} actor {w.actor} #{nth} {w.op} {w.key}{label}")
                self.log.append((self.step, w.actor, w.op, w.key))
            else:
                self.trace.append(f"{self.step:4d} actor {w.actor} {w.op}")
            w.future.set_result(fault)
