"""The commit's writer options (:class:`~zerorename.committers.CommitOptions` from Spark), pure.

``.option("commitConcurrency", "32")`` and the rest are parsed on the driver into a
picklable :class:`CommitSettings`; each process that runs a part of the job turns it into
``CommitOptions`` with :meth:`CommitSettings.commit_options`. The staging directory of the
directory and partitioned committers is decided there, in the task's process: the
``stagingDir`` option, else Spark's own local directories as the task's environment gives
them (:func:`spark_local_dir`), else the temp dir.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from zerorename.committers import CommitOptions, CommitterError
from zerorename.committers.context import DEFAULT_WINDOW
from zerorename.spark_adapter.errors import OptionError

_DEFAULTS = CommitOptions(staging_dir=Path("/"))

#: option -> (default shown to users, meaning); added to the options table (the README's).
COMMIT_OPTION_DOCS: dict[str, tuple[str, str]] = {
    "commitConcurrency": (
        "64 (the engine's batch concurrency)",
        "job commit: completes in flight (what `zerorename perf tune` advises)",
    ),
    "commitWindow": (
        str(DEFAULT_WINDOW),
        "job commit: task records completed at once (what a crash can leave half done)",
    ),
    "commitScanConcurrency": (
        "(commitConcurrency)",
        "job commit: task records read at once before completing",
    ),
    "taskCommitConcurrency": (
        str(_DEFAULTS.task_concurrency),
        "directory/partitioned committers: uploads at once in a task commit",
    ),
    "commitProgressInterval": (
        f"{_DEFAULTS.progress_interval:g}",
        "job commit: seconds between progress log lines",
    ),
    "rollbackOnFailure": (
        "true",
        "a failed job commit aborts the job (false: keeps its journal for "
        "`zerorename jobs resume|abort`); streams refuse it (never roll back)",
    ),
    "pendingRecords": (
        "true",
        "magic committer: a .pending record per file (lets another process abort a task)",
    ),
    "writeSuccess": (
        "true",
        "write the _SUCCESS summary at job commit; streams refuse it (never write one)",
    ),
    "stagingDir": (
        "(Spark's local dirs, else the temp dir)",
        "directory/partitioned committers: local directory of each task's files "
        "(SPARK_LOCAL_DIRS of the executor: spark.local.dir or YARN/Kubernetes' dirs)",
    ),
    "lockWait": (
        f"{_DEFAULTS.lock_wait:g}",
        "seconds a job commit waits for another job's commit of the destination (0: refuse)",
    ),
    "lockStaleAfter": (
        f"{_DEFAULTS.lock_stale_after:g}",
        "seconds after which a commit lock whose holder wrote no journal is released",
    ),
}


def spark_local_dir(env: Mapping[str, str], tempdir: str, pick: int = 0) -> Path:
    """Where a task stages its files when no ``stagingDir`` is given: one of Spark's local
    directories as the task's process sees them, else ``tempdir``.

    Spark hands every Python worker ``SPARK_LOCAL_DIRS``: its block manager's directories
    on that executor (from ``spark.local.dir``, or the dirs YARN and Kubernetes give the
    container); YARN's own ``LOCAL_DIRS`` is the next best. Several (comma-separated): the
    ``pick``-th modulo their number, so the workers of an executor spread over its disks."""
    for var in ("SPARK_LOCAL_DIRS", "LOCAL_DIRS"):
        dirs = [d.strip() for d in env.get(var, "").split(",") if d.strip()]
        if dirs:
            return Path(dirs[pick % len(dirs)])
    return Path(tempdir)


def int_option(text: str, what: str, minimum: int) -> int:
    """An integer writer option of at least ``minimum`` (every integer option's parser)."""
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"{what} must be an integer, got {text!r}") from None
    if value < minimum:
        raise OptionError(f"{what} must be >= {minimum}, got {value}")
    return value


def _int(opts: Mapping[str, str], key: str, name: str) -> int | None:
    return int_option(opts[key], name, 1) if key in opts else None


def _seconds(opts: Mapping[str, str], key: str, name: str, *, zero: bool) -> float | None:
    if key not in opts:
        return None
    text = opts[key]
    try:
        value = float(text)
    except ValueError:
        raise OptionError(f"{name} must be a number of seconds, got {text!r}") from None
    if not (value >= 0 and value != float("inf")) or (value == 0 and not zero):
        raise OptionError(f"{name} must be {'>= 0' if zero else '> 0'} seconds, got {text!r}")
    return value


def _flag(opts: Mapping[str, str], key: str, name: str) -> bool | None:
    if key not in opts:
        return None
    low = opts[key].strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise OptionError(f"{name} must be true or false, got {opts[key]!r}")


@dataclass(frozen=True)
class CommitSettings:
    """The commit options a write was given (None: not given, CommitOptions' default)."""

    concurrency: int | None = None
    window: int | None = None
    scan_concurrency: int | None = None
    task_concurrency: int | None = None
    progress_interval: float | None = None
    rollback_on_failure: bool | None = None
    pending_records: bool | None = None
    write_success: bool | None = None
    staging_dir: str | None = None
    lock_wait: float | None = None
    lock_stale_after: float | None = None

    @classmethod
    def parse(cls, opts: Mapping[str, str]) -> CommitSettings:
        """The commit options among Spark's (lower-cased keys), checked; OptionError else."""
        staging = opts.get("stagingdir")
        if staging is not None and not os.path.isabs(staging.strip()):
            raise OptionError(f"stagingDir must be an absolute local path, got {staging!r}")
        out = cls(
            concurrency=_int(opts, "commitconcurrency", "commitConcurrency"),
            window=_int(opts, "commitwindow", "commitWindow"),
            scan_concurrency=_int(opts, "commitscanconcurrency", "commitScanConcurrency"),
            task_concurrency=_int(opts, "taskcommitconcurrency", "taskCommitConcurrency"),
            progress_interval=_seconds(
                opts, "commitprogressinterval", "commitProgressInterval", zero=False
            ),
            rollback_on_failure=_flag(opts, "rollbackonfailure", "rollbackOnFailure"),
            pending_records=_flag(opts, "pendingrecords", "pendingRecords"),
            write_success=_flag(opts, "writesuccess", "writeSuccess"),
            staging_dir=staging.strip() if staging is not None else None,
            lock_wait=_seconds(opts, "lockwait", "lockWait", zero=True),
            lock_stale_after=_seconds(opts, "lockstaleafter", "lockStaleAfter", zero=True),
        )
        out.commit_options({}, "/")  # CommitOptions' own checks, on the driver
        return out

    def commit_options(
        self, env: Mapping[str, str] | None = None, tempdir: str | None = None
    ) -> CommitOptions:
        """The committers' options in this process (``env``, ``tempdir``: this process's
        environment and temp dir by default, for the staging directory)."""
        staging = self.staging_dir
        if staging is None:
            staging = str(
                spark_local_dir(
                    os.environ if env is None else env,
                    tempfile.gettempdir() if tempdir is None else tempdir,
                    os.getpid(),
                )
            )
        given = {
            k: v
            for k, v in (
                ("concurrency", self.concurrency),
                ("window", self.window),
                ("scan_concurrency", self.scan_concurrency),
                ("task_concurrency", self.task_concurrency),
                ("progress_interval", self.progress_interval),
                ("rollback_on_failure", self.rollback_on_failure),
                ("pending_records", self.pending_records),
                ("write_success", self.write_success),
                ("lock_wait", self.lock_wait),
                ("lock_stale_after", self.lock_stale_after),
            )
            if v is not None
        }
        try:
            return CommitOptions(staging_dir=Path(staging), **given)  # type: ignore[arg-type]
        except CommitterError as exc:
            raise OptionError(str(exc)) from None

    def stream_commit_options(self, env: Mapping[str, str] | None = None) -> CommitOptions:
        """A stream batch's options: these, with no _SUCCESS and no rollback (the stream log
        records batches; a failed batch commit keeps its journal for the next try)."""
        from dataclasses import replace

        return replace(self.commit_options(env), write_success=False, rollback_on_failure=False)


def refuse_for_stream(settings: CommitSettings) -> None:
    """A stream's batches never write _SUCCESS and never roll back: those options are
    refused (one line) rather than ignored."""
    given = [
        n
        for n, v in (
            ("rollbackOnFailure", settings.rollback_on_failure),
            ("writeSuccess", settings.write_success),
        )
        if v is not None
    ]
    if given:
        raise OptionError(
            f"option {given[0]!r} is not for streams: a batch never writes _SUCCESS (the "
            "stream log records it) and a failed batch commit is resumed, never rolled "
            "back; drop the option"
        )
