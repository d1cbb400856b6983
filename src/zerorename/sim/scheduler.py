"""The seeded scheduler: every actor is a coroutine; each store request (and each pause
an actor asks for) waits at the gate until the scheduler picks it. The scheduler picks
only when every actor is parked (no task ready to run, no worker thread busy), so a seed
always yields the same interleaving, and it hands the picked request its planned fault.

The choice is a pure function of the waiting set and the seed's generator (or of a given
list of picks, for replay and shrinking). Time is virtual (:mod:`~zerorename.sim.clock`):
when no request waits and every task is parked, the clock jumps to the earliest timer, so
a task's sleep ends at the same point of every run of the seed.

A schedule that cannot end is a ``hang``, found without the wall clock: its waits pass
:data:`VIRTUAL_LIMIT` seconds of virtual time, or it used ``cpu_limit`` seconds of CPU, or
every task waits on something no request, timer or thread will bring (:data:`STALLED`)."""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from zerorename.engine.errors import RetriesExhausted
from zerorename.sim.clock import VirtualLoop, virtual_loop
from zerorename.sim.model import FaultKind, FaultSpec, Request
from zerorename.testing.memfaults import Fault
from zerorename.testing.rounds import settle

#: virtual seconds a schedule's waits may add up to: far past the CLI's ``lock_wait``
#: (900 s) for every job a schedule has
VIRTUAL_LIMIT = 24 * 3600.0
#: passes of the driver in a row with nothing ready, nothing at the gate, no timer and no
#: worker thread busy (each after a real pause of a millisecond) before it is a hang
STALLED = 500


class Hung(Exception):
    """The schedule cannot end (:attr:`Scheduler.hang` says why and where tasks wait)."""


def waits_at(task: asyncio.Task[Any]) -> list[str]:
    """Where ``task`` waits: its chain of awaited coroutines, innermost last, as
    ``module.py:line function`` (zerorename's own frames only)."""
    out: list[str] = []
    coro: Any = task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
        if frame is not None and "/zerorename/" in frame.f_code.co_filename:
            name = frame.f_code.co_filename.rsplit("/zerorename/", 1)[1]
            out.append(f"{name}:{frame.f_lineno} {frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)
    return out


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
        #: CPU seconds (this process's) the schedule may use, from :attr:`cpu_start`
        self.cpu_limit = math.inf
        self.cpu_start = time.process_time()
        #: virtual seconds the schedule's waits took (the clock at the end)
        self.clock = 0.0
        #: why the schedule was stopped as a hang, then where each task waited
        self.hang: list[str] = []

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
        """Release parked requests one at a time until every actor has finished (each
        counted in :attr:`live`); when none waits, move the clock to the next timer.
        :class:`Hung` (with :attr:`hang` set) for a schedule that cannot end."""
        loop = virtual_loop()
        idle = 0
        while True:
            await settle()
            self._check(loop, idle)
            if not self.waiting:
                if self.live == 0:
                    return
                if loop is not None and loop.advance():
                    idle = 0  # a task sleeps: nothing else can go on, so its time comes
                elif loop is None:
                    await asyncio.sleep(0.001)  # a task sleeps on the real clock
                else:  # nothing to run, no timer, no thread: a real pause, then again
                    idle += 1
                    time.sleep(0.001)  # noqa: ASYNC251 - not on the loop's (virtual) clock
                continue
            idle = 0
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

    def _check(self, loop: VirtualLoop | None, idle: int) -> None:
        """Stop a schedule that cannot end (:class:`Hung`, :attr:`hang` saying why)."""
        if loop is not None:
            self.clock = loop.now
        cpu = time.process_time() - self.cpu_start
        why = ""
        if cpu >= self.cpu_limit:
            why = f"the schedule used {cpu:.1f} s of CPU (limit {self.cpu_limit:g} s)"
        elif self.clock > VIRTUAL_LIMIT:
            why = f"its waits passed {VIRTUAL_LIMIT:g} s of the schedule's (virtual) clock"
        elif idle > STALLED:
            why = "every task waits on something no request, timer or thread will bring"
        if not why:
            return
        me = asyncio.current_task()
        stuck = [
            (t.get_name(), waits_at(t)) for t in asyncio.all_tasks() if t is not me and not t.done()
        ]
        inner = sorted({at[-1] for _, at in stuck if at})
        self.hang = [
            f"hang: {why} (step {self.step}, {self.live} actors running, clock "
            f"{self.clock:g} s); waiting at: {', '.join(inner) or '?'}",
            *(
                f"hang: task {name} waits at {' <- '.join(reversed(at))}"
                for name, at in stuck
                if at
            ),
        ]
        raise Hung(why)
