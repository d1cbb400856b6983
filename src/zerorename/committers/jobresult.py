"""What a job commit reports: progress snapshots while it works, its result at the end."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["CommitHooks", "CommitProgress", "JobCommitResult", "ProgressFn"]


@dataclass(frozen=True)
class CommitProgress:
    """A snapshot handed to the progress callback (at least once a second while working)."""

    job_id: str
    phase: str
    pendingsets_done: int
    pendingsets_total: int
    uploads_done: int
    uploads_total: int
    bytes_done: int
    bytes_total: int
    elapsed: float


ProgressFn = Callable[[CommitProgress], "Awaitable[None] | None"]


@dataclass(frozen=True)
class JobCommitResult:
    """What a successful job commit did."""

    job_id: str
    files: int
    bytes: int
    pendingsets: int
    duration: float
    retries: int
    throttles: int
    success_key: str | None
    resumed: bool = False
    cleanup_error: str | None = None


@dataclass(frozen=True)
class CommitHooks:
    """A caller's records stored in a fresh commit's own rounds, so they cost none of
    their own (a resume runs none). A hook that fails fails the commit as the journal's
    write there would."""

    #: written with the journal and the plan: answered before the first complete
    with_journal: Callable[[], Awaitable[object]] | None = None
    #: written with the journal's ``succeeded``: every complete was answered before
    with_succeeded: Callable[[CommitProgress], Awaitable[object]] | None = None
    #: keys deleted in the release's last request, with the journal (not when it fails)
    release_also: tuple[str, ...] = ()
