"""Progress-bar adapters: pass one as ``progress=`` (or ``on_event=``) to show bytes sent.

Both count BytesSent deltas (rollbacks move the bar back) and show retries/throttles in
the bar's postfix. tqdm and rich are optional (``pip install zerorename[progress]``).
"""

from __future__ import annotations

from typing import Any

from zerorename.engine.events import (
    BytesSent,
    ConcurrencyChanged,
    Event,
    RetryScheduled,
    Throttled,
)


class _Counter:
    def __init__(self) -> None:
        self.retries = 0
        self.throttles = 0
        self.concurrency: int | None = None

    def note(self, event: Event) -> bool:
        if isinstance(event, RetryScheduled):
            self.retries += 1
        elif isinstance(event, Throttled):
            self.throttles += 1
        elif isinstance(event, ConcurrencyChanged):
            self.concurrency = event.new
        else:
            return False
        return True

    def postfix(self) -> dict[str, Any]:
        out: dict[str, Any] = {"retries": self.retries, "throttled": self.throttles}
        if self.concurrency is not None:
            out["concurrency"] = self.concurrency
        return out


class TqdmProgress:
    """A tqdm bar in bytes: ``with TqdmProgress(total=size) as bar: engine.upload(...,
    progress=bar)``."""

    def __init__(self, total: int | None = None, desc: str = "upload", **tqdm_args: Any) -> None:
        from tqdm import tqdm

        self.bar = tqdm(
            total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, **tqdm_args
        )
        self._counter = _Counter()

    def __call__(self, event: Event) -> None:
        if isinstance(event, BytesSent):
            self.bar.update(event.delta)
        elif self._counter.note(event):
            self.bar.set_postfix(self._counter.postfix(), refresh=False)

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> TqdmProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RichProgress:
    """A rich progress bar in bytes, used the same way as :class:`TqdmProgress`."""

    def __init__(self, total: int | None = None, desc: str = "upload") -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TransferSpeedColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TextColumn("{task.fields[info]}"),
        )
        self.task = self.progress.add_task(desc, total=total, info="")
        self._counter = _Counter()
        self.progress.start()

    def __call__(self, event: Event) -> None:
        if isinstance(event, BytesSent):
            self.progress.advance(self.task, event.delta)
        elif self._counter.note(event):
            info = " ".join(f"{k}={v}" for k, v in self._counter.postfix().items())
            self.progress.update(self.task, info=info)

    def close(self) -> None:
        self.progress.stop()

    def __enter__(self) -> RichProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
