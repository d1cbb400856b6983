"""Progress-bar adapters follow the events, rollbacks included (pure: events fed directly)."""

import io

from zerorename.engine import BytesSent, ConcurrencyChanged, PartDone, RetryScheduled, Throttled
from zerorename.engine.progress import RichProgress, TqdmProgress


def events() -> list[object]:
    return [
        BytesSent("b", "k", 100),
        BytesSent("b", "k", 50),
        Throttled("UploadPart", "k", "SlowDown"),
        BytesSent("b", "k", -50, rollback=True),
        RetryScheduled("UploadPart", "k", 1, 0.1, "throttled", "SlowDown"),
        ConcurrencyChanged(8, 4, "throttled"),
        BytesSent("b", "k", 50),
        PartDone("b", "k", 1, 150),
    ]


def test_tqdm_bar_counts_bytes_and_shows_retries() -> None:
    out = io.StringIO()
    with TqdmProgress(total=150, file=out) as bar:
        for e in events():
            bar(e)  # type: ignore[arg-type]
        assert bar.bar.n == 150
        assert bar.bar.postfix is not None
        assert "retries=1" in bar.bar.postfix and "concurrency=4" in bar.bar.postfix


def test_rich_bar_counts_bytes() -> None:
    with RichProgress(total=150) as bar:
        for e in events():
            bar(e)  # type: ignore[arg-type]
        task = bar.progress.tasks[0]
        assert task.completed == 150
        assert "throttled=1" in task.fields["info"]
