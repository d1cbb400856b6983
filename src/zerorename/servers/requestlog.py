"""A log of the requests a store answered, and what it says about a protocol's latency:
the longest chain of requests each started after the previous one ended.

Against a remote store a small job commit costs its chain of dependent requests times the
round trip, whatever the number of requests in parallel beside it: that chain is what a
commit's design shortens. With a latency per request, requests sent in parallel overlap
and do not chain; requests sent one after another do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Request:
    """One request: its number (1 = first on this store handle), operation (S3's name),
    bucket and key, start and end times (seconds, one clock), and the error it raised."""

    number: int
    op: str
    bucket: str
    key: str
    start: float
    end: float
    error: str | None = None


def longest_chain(log: Iterable[Request]) -> list[Request]:
    """The longest sequence of requests where each starts at or after the previous one's
    end (ties: by end, then request number): the requests a reader waits for one
    after another."""
    reqs = sorted(log, key=lambda r: (r.start, r.end, r.number))
    depth: list[int] = []
    before: list[int] = []
    for i, r in enumerate(reqs):
        best, prev = 0, -1
        for j in range(i):
            q = reqs[j]
            if q.end <= r.start and depth[j] > best:
                best, prev = depth[j], j
        depth.append(best + 1)
        before.append(prev)
    if not reqs:
        return []
    i = max(range(len(reqs)), key=lambda k: (depth[k], -k))
    chain: list[Request] = []
    while i >= 0:
        chain.append(reqs[i])
        i = before[i]
    return chain[::-1]


def sequential_requests(log: Iterable[Request]) -> int:
    """How many requests of ``log`` ran one after another (:func:`longest_chain`'s length)."""
    return len(longest_chain(log))


def describe(log: Sequence[Request]) -> str:
    """One line: requests in all, by operation, and the sequential chain's operations."""
    ops = Counter(r.op for r in log)
    chain = longest_chain(log)
    by_op = ", ".join(f"{n} {op}" for op, n in sorted(ops.items()))
    steps = " > ".join(r.op for r in chain)
    return f"{len(log)} requests ({by_op}); {len(chain)} sequential: {steps}"


__all__ = ["Request", "describe", "longest_chain", "sequential_requests"]
