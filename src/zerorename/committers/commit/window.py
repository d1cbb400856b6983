"""The job commit's completion window: which pendingset's uploads to hand out next and
when the journal's watermark must be saved. Pure (httpcore's pool style): the async
driver in ``run`` asks :meth:`CompletionWindow.poll`, does the I/O it is told to,
and reports back what finished or failed.

The bound: pendingset ``i`` (its index in the plan) is opened only while
``i < persisted + window``, ``persisted`` being the watermark last saved, so after a crash
only ``[persisted, persisted + window)`` can be half done and every set below
``persisted`` is done.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Action(StrEnum):
    OPEN = "open"  # hand out the uploads of pendingset ``index``, then close() it
    SAVE = "save"  # save the journal's watermark as ``index``, then saved(index)
    WAIT = "wait"  # wait for a result (succeeded/failed), then poll again
    STOP = "stop"  # hand out nothing more (all handed out, or a failure)


@dataclass(frozen=True)
class Step:
    """What the driver does next; ``index`` is the set to open or the mark to save."""

    action: Action
    index: int = -1


class CompletionWindow:
    """Tracks the pendingsets of one completion pass from ``start`` to ``total``.

    ``low`` is the first set not yet done. Sets below ``uncertain_until`` may have been
    completed by an earlier process: their uploads are checked before being handed out
    (:meth:`must_check`). The journal is saved only when the window gates (the next set
    may not open until a save lifts the bound) and half the window was released since the
    last save: the sets opened after a save complete while the next save is written. The
    end is not saved here: the driver's state move carries the final watermark, so a
    commit of at most ``window`` sets writes no journal between its completes.
    """

    def __init__(
        self, start: int, window: int, total: int, *, uncertain_until: int | None = None
    ) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        if not 0 <= start <= total:
            raise ValueError(f"start {start} is not within 0..{total}")
        self.window = window
        self.total = total
        self.low = start
        self.persisted = start
        self.uncertain_until = start if uncertain_until is None else uncertain_until
        self.failures: list[BaseException] = []
        self._next = start
        #: open sets -> uploads not yet finished (+1 while the set is being handed out)
        self._remaining: dict[int, int] = {}
        self._done: set[int] = set()

    # ------------------------------------------------------------ decisions
    def poll(self) -> Step:
        """The next thing to do; a failure stops handing out at once. A set opens when the
        bound allows; the journal is saved only when it gates (the next set waits for a
        save) and half the window was released since the last save."""
        if self.failures:
            return Step(Action.STOP)
        if self._next >= self.total:
            return Step(Action.STOP)
        if self._next < self.persisted + self.window:
            return Step(Action.OPEN, self._next)
        if self.low - self.persisted >= max(1, self.window // 2):
            return Step(Action.SAVE, self.low)
        return Step(Action.WAIT)  # sets in flight will release at least half the window

    def must_check(self, index: int) -> bool:
        """Set ``index`` may be done already: check each upload before completing it."""
        return index < self.uncertain_until

    @property
    def stopped(self) -> bool:
        return bool(self.failures)

    @property
    def unfinished(self) -> int:
        """Sets of the pass not done (0 after a pass without failures)."""
        return self.total - self.low

    # ------------------------------------------------------------ what happened
    def open(self, index: int) -> None:
        """The driver starts handing out set ``index`` (the one poll() named)."""
        if index != self._next or self._next >= self.total:
            raise ValueError(f"pendingset {index} is not the next to open ({self._next})")
        self._remaining[index] = 1
        self._next += 1

    def handed_out(self, index: int) -> None:
        """One upload of open set ``index`` was handed out to be completed."""
        self._remaining[index] += 1

    def close(self, index: int) -> None:
        """Every upload of set ``index`` was handed out (or was done already)."""
        self._release(index)

    def succeeded(self, index: int) -> None:
        """One handed-out upload of set ``index`` is complete."""
        self._release(index)

    def failed(self, exc: BaseException) -> None:
        """An upload could not be completed: nothing more is handed out."""
        self.failures.append(exc)

    def saved(self, mark: int) -> None:
        """The journal now says every set below ``mark`` is done."""
        if not self.persisted <= mark <= self.low:
            raise ValueError(f"saved mark {mark} is not within {self.persisted}..{self.low}")
        self.persisted = mark

    # ------------------------------------------------------------ internals
    def _release(self, index: int) -> None:
        left = self._remaining[index] - 1
        if left:
            self._remaining[index] = left
            return
        del self._remaining[index]
        self._done.add(index)
        while self.low in self._done:
            self._done.discard(self.low)
            self.low += 1
