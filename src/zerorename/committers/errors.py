"""Errors raised by the committers; every one derives from :class:`CommitterError`,
itself a :class:`zerorename.errors.ZeroRenameError`.

Engine errors (:mod:`zerorename.engine.errors`) that escape a committer operation are
wrapped in one of these, with the engine error as ``__cause__``, so callers can catch
the one root and still see what S3 said: :func:`wrap_engine_errors` is that mapping
(:func:`engine_errors_as` where the caller words the error).
"""

from __future__ import annotations

from collections.abc import Callable

from zerorename.engine.errors import EngineConfigError, EngineError
from zerorename.errors import ConfigError, ZeroRenameError, map_exceptions


class CommitterError(ZeroRenameError):
    """Root of every error the committers raise."""


class CommitterConfigError(CommitterError, ConfigError):
    """Raised before any request when ``CommitOptions``, a conflict mode or a committer kind
    is unusable, or the engine refused a setting a committer passed on; a
    :class:`zerorename.errors.ConfigError` (and a ValueError) too."""


class PathError(CommitterError, ValueError):
    """Raised when a destination URI or an output's relative path is unusable
    (empty component, ``..``, a reserved ``__magic``/``__base`` name, an absolute path,
    or a file outside a ``k=v`` partition directory for the partitioned committer)."""


class InvalidJobId(CommitterError, ValueError):
    """Raised when a given job id is not a UUID (job ids must never be time based)."""


class RecordFormatError(CommitterError, ValueError):
    """Raised when a ``.pending``, ``.pendingset``, ``_SUCCESS``, job or journal record is
    corrupt, truncated, of an unknown version, or does not belong to the job reading it.

    ``location`` names the object (``s3://bucket/key``) or file the record came from.
    """

    def __init__(self, message: str, *, location: str = "") -> None:
        super().__init__(f"{location}: {message}" if location else message)
        self.location = location
        self.detail = message


class RecordNotFound(RecordFormatError):
    """Raised when a record a job's plan names (a pendingset) does not exist."""


class JobNotActive(CommitterError):
    """Raised when a task attempt sets up or commits, or a job commits, after the job was
    committed, aborted or cleaned up (its ``job.json`` marker is gone), or was never set up.
    A straggler task attempt gets this, aborts its own uploads, and makes nothing visible."""


class TaskAttemptError(CommitterError):
    """Raised when a task attempt cannot write, upload or commit its output; the attempt's
    uploads have been aborted by the time it is raised."""


class JobCommitError(CommitterError):
    """Raised when a job commit failed. ``rolled_back`` tells whether the job was then
    aborted (nothing of it left: no objects, no pending uploads); when it is False the
    journal in the store lets ``resume``/``abort`` (or ``zerorename jobs``) finish the job."""

    def __init__(self, message: str, *, job_id: str, rolled_back: bool, state: str) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.rolled_back = rolled_back
        self.state = state


class ConflictError(JobCommitError):
    """Raised by job commit in ``fail`` mode when the destination (or a touched partition)
    already holds objects, or a racing writer created one first (caught by If-None-Match).

    The pre-check raises it before anything was completed. ``conflicts`` lists up to a few
    of the offending keys; ``rolled_back`` says whether the job was then aborted.
    """

    def __init__(
        self,
        message: str,
        *,
        job_id: str = "",
        rolled_back: bool = False,
        state: str = "",
        conflicts: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message, job_id=job_id, rolled_back=rolled_back, state=state)
        self.conflicts = conflicts


class JournalError(CommitterError):
    """Raised when ``resume``/``abort`` cannot proceed from the journal: no journal (the job
    never started committing), a state that forbids the request (aborting a job that already
    deleted replaced files or wrote ``_SUCCESS``), or a journal of another job."""


class NothingToResume(JournalError):
    """Raised when ``resume`` finds a job whose commit never started (a zerorename job with
    no journal, an S3A job with no committed task): there is nothing to resume (``jobs
    abort`` removes what it left)."""


class JobNotFound(CommitterError):
    """Raised when a job id has no ``__magic_job-<id>/`` records under the destination."""


def wrap_engine_errors(doing: str = "") -> map_exceptions:
    """The committers' boundary: an engine error escaping the block or decorated function
    becomes a :class:`CommitterError` (a :class:`CommitterConfigError` for an engine
    ``ConfigError``) whose message starts with ``doing`` and whose ``__cause__`` is the
    engine error; committer errors and everything else pass unchanged."""
    return map_exceptions(
        {EngineConfigError: CommitterConfigError, EngineError: CommitterError}, context=doing
    )


def engine_errors_as(make: Callable[[Exception], CommitterError]) -> map_exceptions:
    """The committers' boundary where the caller words the error: an engine error escaping
    the block becomes ``make(engine_error)`` (its ``__cause__``); committer errors and
    everything else pass unchanged."""
    return map_exceptions({EngineError: make})
