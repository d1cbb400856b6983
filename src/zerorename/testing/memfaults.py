"""Faults of a :class:`~zerorename.testing.memstore.MemoryStore`, counted in requests: a
request that raises what the engine raises once its retries ran out, or the process
dying at a request."""

from __future__ import annotations

from dataclasses import dataclass


class ProcessCrashed(BaseException):
    """Raised by a store at the request its ``crash_at`` chose, and at every request after
    it: the process is gone. A BaseException (like SystemExit), so no ``except Exception``
    of the code under test acts on it in the dead process."""


class AnswerLost(Exception):
    """A request took effect and its answer was lost: the engine's retrier sends it again
    (:meth:`MemoryStore.lose_answer_at` models that for DeleteObjects, with the caller's
    recheck before the resend, as the engine does)."""


@dataclass
class Fault:
    """One armed fault: it hits the ``countdown``-th request (of ``op`` if given)."""

    countdown: int
    op: str | None
    after: bool
    exc: BaseException | None  # None: a crash

    @property
    def crash(self) -> bool:
        return self.exc is None

    def error(self, op: str, bucket: str, key: str) -> BaseException:
        """What the hit request raises."""
        if self.exc is None:
            return ProcessCrashed(f"process crashed at {op} s3://{bucket}/{key}")
        return self.exc


class Faults:
    """The faults armed on one store handle."""

    def __init__(self) -> None:
        self._armed: list[Fault] = []

    def arm(self, n: int, exc: BaseException | None, *, op: str | None, after: bool) -> None:
        """Arm a fault at the ``n``-th request from now (``exc`` None: a crash)."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"the request to fail is counted from 1, got {n!r}")
        self._armed.append(Fault(n, op, after, exc))

    def take(self, op: str) -> Fault | None:
        """Count one request of ``op``; the fault it hits, if any (each hits once)."""
        hit: Fault | None = None
        for f in list(self._armed):
            if f.op is None or f.op == op:
                f.countdown -= 1
                if f.countdown == 0:
                    self._armed.remove(f)
                    hit = hit or f
        return hit


__all__ = ["AnswerLost", "Fault", "Faults", "ProcessCrashed"]
