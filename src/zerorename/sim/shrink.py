"""Shrinking a failing schedule: drop actors, faults and explicit picks (and lower task
and batch counts) while the same kind of violation still shows; what is left is the
short schedule a person reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from zerorename.sim.model import Schedule


def category(violation: str) -> str:
    """A violation's kind: the text before its first colon ("inv 6 fail-mode")."""
    return violation.split(":", 1)[0]


def candidates(s: Schedule) -> list[Schedule]:
    """Smaller schedules to try, the biggest cuts first."""
    out: list[Schedule] = [s.without_actor(i) for i in reversed(range(len(s.actors)))]
    out += [replace(s, faults=s.faults[:k] + s.faults[k + 1 :]) for k in range(len(s.faults))]
    for i, a in enumerate(s.actors):
        for smaller in (replace(a, tasks=1), replace(a, batches=1), replace(a, delay=0)):
            if smaller != a:
                out.append(replace(s, actors=(*s.actors[:i], smaller, *s.actors[i + 1 :])))
    picks = s.picks or ()
    for cut in (0, len(picks) // 4, len(picks) // 2, 3 * len(picks) // 4, len(picks) - 1):
        if 0 <= cut < len(picks):
            out.append(replace(s, picks=picks[:cut]))
    return out


def shrink(
    start: Schedule, fails: Callable[[Schedule], bool], *, budget: int = 200
) -> tuple[Schedule, int]:
    """The smallest schedule found from ``start`` (which must have its picks fixed) for
    which ``fails`` holds; and the number of runs it took."""
    s, runs = start, 0
    progress = True
    while progress and runs < budget:
        progress = False
        for cand in candidates(s):
            runs += 1
            if fails(cand):
                s, progress = cand, True
                break
            if runs >= budget:
                break
    return s, runs
