"""Virtual time for a schedule: an event loop whose clock moves only when the scheduler
moves it, so every wait on the loop's clock (a commit lock's polls and its ``lock_wait``,
a progress ticker) takes no wall-clock time and ends at the same point of the schedule
on a quiet machine and on a loaded one.

The scheduler (:meth:`~zerorename.sim.scheduler.Scheduler.drive`) moves the clock to the
earliest timer only when every task is parked and no request waits at its gate: a task
that sleeps goes on once nothing else can. A real pause of the driver (a worker thread
still busy) must not use the loop's clock: it would never end."""

from __future__ import annotations

import asyncio


class VirtualLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose :meth:`time` is :attr:`now`, which only :meth:`advance`
    moves (timers still fire in order of their time)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def next_timer(self) -> float | None:
        """When the earliest live timer is due (None: no task sleeps on the clock)."""
        due = [h.when() for h in self._scheduled if not h.cancelled()]  # type: ignore[attr-defined]
        return min(due) if due else None

    def advance(self) -> bool:
        """Move the clock to the earliest timer, so it fires on the next loop turn; False
        when no timer is scheduled."""
        when = self.next_timer()
        if when is None:
            return False
        self.now = max(self.now, when)
        return True


def virtual_loop() -> VirtualLoop | None:
    """The running loop when it is a :class:`VirtualLoop`."""
    loop = asyncio.get_running_loop()
    return loop if isinstance(loop, VirtualLoop) else None


__all__ = ["VirtualLoop", "virtual_loop"]
