"""``zerorename put DIR s3://bucket/prefix/``: a directory uploaded as ONE magic job.

1. A first walk checks every entry before a byte is sent (:func:`scan`): a symlink, a
   special file (fifo, socket, device) or a name S3 cannot hold (not UTF-8, a control
   character, a reserved name, a key past 1024 bytes) is one line each, and the upload is
   refused, or with ``skip`` each is left out with its line. The walk streams
   (``os.scandir``): memory holds one directory's iterator per level, never the tree.
2. A job is set up; files go up as deferred uploads of magic task attempts, at most
   ``files_at_once`` open at a time, one task attempt per :data:`FILES_PER_TASK` files
   (its records are written as a pendingset when its files are up, then dropped from
   memory), walking the directory again.
3. The job commit makes everything visible: nothing is before, all of it is after.

A failure or Ctrl-C before the commit aborts the job (nothing visible, nothing pending);
during the commit the job's journal lets ``zerorename jobs resume|abort`` finish it, as
after a crash at any point (``jobs abort`` for one that never started committing).

Keys follow the committers' naming rule: each file's name carries the job id
(``a/b.txt`` -> ``prefix/a/b-<job id>.txt``), which is how an abort proves which
objects and uploads are the job's.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import anyio

from zerorename.aio import to_the_end
from zerorename.cli.jobs import safe
from zerorename.committers import (
    CommitOptions,
    CommitProgress,
    CommitterError,
    Destination,
    Job,
    JobCommitResult,
    MagicCommitter,
    PathError,
    TaskAttempt,
    TaskCommitSummary,
    new_job_id,
)
from zerorename.committers.objectstore import UploadStore
from zerorename.committers.paths import check_relative_path, with_job_id
from zerorename.committers.store import bounded_map
from zerorename.units import KiB, MiB

__all__ = [
    "DirResult",
    "DirectoryRefused",
    "DirectoryUploadFailed",
    "Entry",
    "Problem",
    "Scan",
    "name_problem",
    "scan",
    "upload_directory",
    "walk",
]

#: files per task attempt: one pendingset each; what a task holds in memory
FILES_PER_TASK = 1000
#: bytes read from a file at a time
READ_CHUNK = 1 * MiB
#: a file up to this size is read whole on the event loop
SMALL_FILE = 64 * KiB
#: S3's limit on a key's length, in UTF-8 bytes
MAX_KEY_BYTES = 1024


class DirectoryRefused(CommitterError):
    """Entries of the directory cannot be uploaded (each named on its own line before);
    nothing was uploaded."""


class DirectoryUploadFailed(CommitterError):
    """A file of the directory could not be uploaded; the job was aborted."""


@dataclass(frozen=True)
class Entry:
    """A regular file to upload: its path relative to the directory (``/``-separated)."""

    rel: str
    path: str
    size: int


@dataclass(frozen=True)
class Problem:
    """An entry that cannot be uploaded, and why (one line)."""

    rel: str
    why: str

    def line(self) -> str:
        return f"{safe(self.rel)}: {self.why}"


@dataclass
class Scan:
    """What the first walk found."""

    files: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)


@dataclass(frozen=True)
class DirResult:
    job_id: str
    files: int
    bytes: int
    skipped: tuple[str, ...]
    commit: JobCommitResult


def name_problem(rel: str, dest: Destination, job_id: str) -> str | None:
    """Why S3 (or the job's naming rule) cannot hold file ``rel`` under ``dest``, or None.
    Pure."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not UTF-8 text (S3 keys are): rename it"
    for ch in rel:
        if unicodedata.category(ch) == "Cc":
            return (
                f"its name holds the control character {ch!r}, which S3's XML answers "
                "cannot carry: rename it"
            )
    try:
        final = with_job_id(check_relative_path(rel), job_id)
    except PathError as exc:
        return f"{exc}: rename it"
    if len(dest.key(final).encode("utf-8")) > MAX_KEY_BYTES:
        return f"its key (with the job id) would pass S3's {MAX_KEY_BYTES}-byte limit"
    return None


def walk(root: Path) -> Iterator[Entry | Problem]:
    """Every entry under ``root`` (a directory), depth first, streaming: regular files as
    :class:`Entry`, everything else that is not a directory as :class:`Problem`."""
    stack: list[tuple[str, str]] = [(os.fspath(root), "")]
    while stack:
        path, rel = stack.pop()
        try:
            with os.scandir(path) as it:
                for e in it:
                    sub = f"{rel}{e.name}"
                    try:
                        if e.is_symlink():
                            target = os.readlink(e.path)
                            yield Problem(sub, f"a symlink (to {safe(target)}): not followed")
                        elif e.is_dir(follow_symlinks=False):
                            stack.append((e.path, sub + "/"))
                        elif e.is_file(follow_symlinks=False):
                            yield Entry(sub, e.path, e.stat(follow_symlinks=False).st_size)
                        else:
                            mode = e.stat(follow_symlinks=False).st_mode
                            yield Problem(sub, f"a {_kind(mode)}, not a regular file")
                    except OSError as exc:
                        yield Problem(sub, f"cannot read it: {exc.strerror}")
        except OSError as exc:
            yield Problem(rel or ".", f"cannot read the directory: {exc.strerror}")


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"


def judged(root: Path, dest: Destination, job_id: str) -> Iterator[Entry | Problem]:
    """:func:`walk` with each file's name judged (:func:`name_problem`)."""
    for item in walk(root):
        if isinstance(item, Entry):
            why = name_problem(item.rel, dest, job_id)
            if why is not None:
                yield Problem(item.rel, why)
                continue
        yield item


def scan(root: Path, dest: Destination, job_id: str) -> Scan:
    """The first walk: files and bytes to upload, and every problem (no I/O to S3)."""
    out = Scan()
    for item in judged(root, dest, job_id):
        if isinstance(item, Problem):
            out.problems.append(item)
        else:
            out.files += 1
            out.bytes += item.size
    return out


def _read_small(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read(SMALL_FILE + 1)


async def _send(ta: TaskAttempt, entry: Entry, sent: Callable[[int], None]) -> None:
    """Stream one file into a deferred upload of task attempt ``ta``: a small one read at
    once on the loop (a local read of a few KiB: cheaper than a thread hop), a larger one
    a chunk at a time in a worker thread."""
    if entry.size <= SMALL_FILE:
        data = _read_small(entry.path)
        if len(data) <= SMALL_FILE:
            async with ta.open(entry.rel) as out:
                await out.write(data)
            sent(len(data))
            return
    f = await anyio.to_thread.run_sync(open, entry.path, "rb")
    try:
        async with ta.open(entry.rel) as out:
            while True:
                data = await anyio.to_thread.run_sync(f.read, READ_CHUNK)
                if not data:
                    break
                await out.write(data)
                sent(len(data))
    finally:
        f.close()


async def upload_directory(
    engine: UploadStore,
    root: Path,
    destination: str,
    *,
    conflict: str = "append",
    files_at_once: int = 8,
    skip: bool = False,
    report: Callable[[str], None] = lambda line: None,
    on_scan: Callable[[Scan], None] = lambda s: None,
    sent: Callable[[int], None] = lambda n: None,
    commit_progress: Callable[[CommitProgress], None] | None = None,
    on_job: Callable[[Job], None] = lambda job: None,
) -> DirResult:
    """Upload directory ``root`` to ``destination`` as one job (see the module's doc).
    ``report``: one line per problem entry; ``on_scan``: the first walk's totals;
    ``sent``: bytes read into uploads; ``on_job``: the job, once it is set up.
    DirectoryRefused (nothing uploaded) for problem entries without ``skip``."""
    dest = Destination.parse(destination)
    job_id = new_job_id()
    found = await anyio.to_thread.run_sync(scan, root, dest, job_id)
    for p in found.problems:
        report(p.line() + (" (skipped)" if skip else ""))
    if found.problems and not skip:
        raise DirectoryRefused(
            f"{len(found.problems)} entries of {root} cannot be uploaded (each named above); "
            "nothing was uploaded: fix them, or pass --skip-unsupported to leave them out"
        )
    on_scan(found)
    committer = MagicCommitter(
        engine,
        dest,
        conflict=conflict,
        options=CommitOptions(rollback_on_failure=True, pending_records=False),
    )
    job = await committer.setup_job(job_id)
    on_job(job)
    committing = False
    try:
        summaries: list[TaskCommitSummary] = []
        files = total = 0
        entries = (e for e in judged(root, dest, job_id) if isinstance(e, Entry))
        task = 0
        while chunk := list(islice(entries, FILES_PER_TASK)):
            ta = job.task_attempt(task)
            await ta.setup()

            async def one(entry: Entry, ta: TaskAttempt = ta) -> None:
                await _send(ta, entry, sent)

            await bounded_map(chunk, one, files_at_once)
            summaries.append(await ta.commit())
            files += len(chunk)
            total += sum(e.size for e in chunk)
            task += 1
        committing = True
        result = await job.commit(summaries, progress=commit_progress)
    except Exception as exc:
        if committing:  # the commit rolled back, or left its journal: its error says which
            raise
        await to_the_end(job.abort(), cleanup=True)  # nothing is visible yet: leave nothing pending
        raise DirectoryUploadFailed(
            f"uploading {root} failed ({exc}); job {job.job_id} was aborted: nothing is "
            f"visible or pending under {dest.uri}"
        ) from exc
    except BaseException:  # Ctrl-C, cancelled
        if not committing:
            await to_the_end(job.abort(), cleanup=True)
        raise
    skipped = tuple(p.rel for p in found.problems)
    return DirResult(job.job_id, files, total, skipped, result)
