"""Progress of the ``zerorename`` commands that can take long: bytes or items done, the
rate and the time left, on stderr.

Which display (:func:`choose`): ``--quiet`` none; ``--progress`` always; by default only
when stdout and stderr are both terminals (piped or redirected output gets no animation,
as with ``aws s3 cp``). On a terminal: rich when installed, else tqdm, else one plain line
redrawn in place. ``--progress`` without a terminal: a plain line every few seconds, never
a carriage return. The decision is pure (:func:`choose`); the bars do the drawing.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Protocol, TextIO

from zerorename.units import format_size

__all__ = ["Bar", "NullBar", "choose", "open_bar", "rate_line"]

#: seconds between plain lines when the output is not a terminal (``--progress`` piped)
PIPED_INTERVAL = 5.0
#: seconds between redraws of the plain line on a terminal
TTY_INTERVAL = 0.2


class Bar(Protocol):
    """One progress display: ``advance`` by bytes or items; ``update`` to set the count."""

    def advance(self, n: int) -> None: ...

    def update(self, done: int, total: int | None = None) -> None: ...

    def describe(self, text: str) -> None: ...

    def close(self) -> None: ...


def choose(mode: str, *, stdout_tty: bool, stderr_tty: bool, have: set[str]) -> str:
    """The display for ``mode`` (``auto``, ``on``, ``off``): ``none``, ``rich``, ``tqdm``,
    ``line`` (redrawn in place) or ``lines`` (one line every few seconds)."""
    if mode == "off":
        return "none"
    tty = stdout_tty and stderr_tty
    if not tty:
        return "lines" if mode == "on" else "none"
    for lib in ("rich", "tqdm"):
        if lib in have:
            return lib
    return "line"


def _eta(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _amount(n: float, unit: str) -> str:
    if unit == "B":
        return format_size(int(n)) if n < 1024 else _human_bytes(n)
    return f"{int(n)} {unit}"


def _human_bytes(n: float) -> str:
    for name, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f}{name}"
    return f"{int(n)}B"


def rate_line(label: str, done: int, total: int | None, unit: str, elapsed: float) -> str:
    """``label: 12.0MiB/50.0MiB (24%) 3.1MiB/s, 0:00:12 left``: the plain display."""
    rate = done / elapsed if elapsed > 0 else 0.0
    text = f"{label}: {_amount(done, unit)}"
    if total:
        text += f"/{_amount(total, unit)} ({100 * done // total}%)"
    text += f" {_amount(rate, unit)}/s"
    if total and rate > 0 and done <= total:
        text += f", {_eta((total - done) / rate)} left"
    return text


class NullBar:
    def advance(self, n: int) -> None:
        pass

    def update(self, done: int, total: int | None = None) -> None:
        pass

    def describe(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


class LineBar:
    """The plain display: redrawn in place on a terminal (``\\r``), else one line every
    :data:`PIPED_INTERVAL` seconds."""

    def __init__(self, label: str, total: int | None, unit: str, out: TextIO, tty: bool) -> None:
        self.label, self.total, self.unit, self.out, self.tty = label, total, unit, out, tty
        self.done = 0
        self.start = time.monotonic()
        self._last = 0.0
        self._width = 0

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < (TTY_INTERVAL if self.tty else PIPED_INTERVAL):
            return
        self._last = now
        text = rate_line(self.label, self.done, self.total, self.unit, now - self.start)
        if self.tty:
            self.out.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.out.write(text + "\n")
        self.out.flush()

    def advance(self, n: int) -> None:
        self.done += n
        self._draw()

    def update(self, done: int, total: int | None = None) -> None:
        self.done = done
        if total is not None:
            self.total = total
        self._draw()

    def describe(self, text: str) -> None:
        self.label = text
        self._draw(force=True)

    def close(self) -> None:
        self._draw(force=True)
        if self.tty:
            self.out.write("\n")
            self.out.flush()


class TqdmBar:
    def __init__(self, label: str, total: int | None, unit: str, out: TextIO) -> None:
        from tqdm import tqdm

        scale: dict[str, Any] = (
            {"unit": "B", "unit_scale": True, "unit_divisor": 1024}
            if unit == "B"
            else {"unit": f" {unit}"}
        )
        self.bar = tqdm(total=total, desc=label, file=out, dynamic_ncols=True, **scale)

    def advance(self, n: int) -> None:
        self.bar.update(n)

    def update(self, done: int, total: int | None = None) -> None:
        if total is not None:
            self.bar.total = total
        self.bar.update(done - self.bar.n)

    def describe(self, text: str) -> None:
        self.bar.set_description(text)

    def close(self) -> None:
        self.bar.close()


class RichBar:
    def __init__(self, label: str, total: int | None, unit: str, out: TextIO) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        amount = (
            [DownloadColumn(binary_units=True), TransferSpeedColumn()]
            if unit == "B"
            else [MofNCompleteColumn(), TextColumn(unit)]
        )
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            *amount,
            TimeRemainingColumn(),
            console=Console(file=out),
        )
        self.task = self.progress.add_task(label, total=total)
        self.progress.start()

    def advance(self, n: int) -> None:
        self.progress.advance(self.task, n)

    def update(self, done: int, total: int | None = None) -> None:
        if total is not None:
            self.progress.update(self.task, total=total)
        self.progress.update(self.task, completed=done)

    def describe(self, text: str) -> None:
        self.progress.update(self.task, description=text)

    def close(self) -> None:
        self.progress.stop()


def _installed() -> set[str]:
    import importlib.util

    return {lib for lib in ("rich", "tqdm") if importlib.util.find_spec(lib) is not None}


def open_bar(
    mode: str, label: str, total: int | None, unit: str = "B", out: TextIO | None = None
) -> Bar:
    """A display of ``label`` (``unit``: ``B`` for bytes, else the items' name) for
    ``mode`` (``auto``, ``on``, ``off``; see :func:`choose`), drawn on stderr."""
    err = out if out is not None else sys.stderr
    kind = choose(
        mode,
        stdout_tty=sys.stdout.isatty(),
        stderr_tty=err.isatty(),
        have=_installed(),
    )
    if kind == "rich":
        return RichBar(label, total, unit, err)
    if kind == "tqdm":
        return TqdmBar(label, total, unit, err)
    if kind in ("line", "lines"):
        return LineBar(label, total, unit, err, tty=kind == "line")
    return NullBar()
