"""Hadoop S3A's magic committer layout under a destination, as pure functions (no I/O).

Since Hadoop 3.4 (HADOOP-18797) an S3A magic job keeps everything under its own directory,
named by the job's UUID, so concurrent jobs never share records::

    dest/__magic_job-<uuid>/                                   the job's directory
    dest/__magic_job-<uuid>/job-<uuid>/<NN>/                  job attempt NN (%02d)
    dest/__magic_job-<uuid>/job-<uuid>/<NN>/<task id>.pendingset       a committed task
    dest/__magic_job-<uuid>/job-<uuid>/<NN>/tasks/<task attempt id>/__base/<rel>.pending
                                                               one upload of a running or
                                                               failed task attempt
    dest/<rel>                                                 where that upload completes

Task commit saves the attempt's ``.pending`` records as one ``.pendingset`` in the job
attempt directory and deletes the attempt directory; job commit completes every upload of
every ``.pendingset`` of its attempt, writes ``_SUCCESS`` and deletes the job's directory.
Everything under the job's directory is the job's by structure; a completed object carries
no job id (S3A names files as the engine asks), so only the job's records say what it made.
zerorename's own jobs use the same directory prefix (``__magic_job-<id>/``) with another
inside (``job.json``, ``pendingsets/``, ``tasks/``): a directory holding ``job-<uuid>/`` is
S3A's.

Hadoop 3.3.1 to 3.3.x (HADOOP-17318) keep every job in ONE directory shared by all jobs
writing to the destination, each job under its own ``job-<uuid>/`` in it::

    dest/__magic/                                              shared by every 3.3 job
    dest/__magic/job-<uuid>/                                   the job's directory
    dest/__magic/job-<uuid>/<NN>/...                           as 3.4 inside job-<uuid>/
                                                               (releases with attempt dirs)
    dest/__magic/job-<uuid>/<task id>.pendingset               (releases without: the job's
    dest/__magic/job-<uuid>/tasks/<task attempt id>/__base/<rel>.pending   directory is its
                                                               only attempt, :data:`FLAT`)

Everything under ``dest/__magic/job-<uuid>/`` is that job's by structure; the rest of
``dest/__magic/`` (other jobs, 3.3.0's ``app-attempt-NNNN/``) is not, and ``__magic/``
itself is removed only when nothing but its directory marker is left in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from zerorename.committers.errors import PathError
from zerorename.committers.paths import (
    BASE,
    MAGIC,
    MAGIC_JOB_PREFIX,
    PENDING_SUFFIX,
    PENDINGSET_SUFFIX,
    SUCCESS_NAME,
    Destination,
    is_magic_component,
)

#: the directory of one S3A job's attempts inside its magic directory: ``job-<uuid>``
JOB_ATTEMPTS_PREFIX = "job-"
#: the note ``jobs abort`` keeps in a job's directory while it deletes it (:mod:`.abort`)
ABORT_NOTE_NAME = "zerorename-abort.json"
TASKS_DIR = "tasks"
#: a job UUID, task id or task attempt id as S3A puts it in a path: a UUID from Spark
#: (``spark.sql.sources.writeJobUUID``) or one generated, else Hadoop's ``job_..._0001``
#: form; never '', '.', '..', a '/' or anything a shell or a listing could misread
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: S3A formats the application attempt as ``%02d``
_ATTEMPT_RE = re.compile(r"[0-9]{2,10}")
#: the attempt of a Hadoop 3.3 job whose directory has no ``<NN>/`` level (its records sit
#: right in ``__magic/job-<uuid>/``): never a real attempt number
FLAT = -1


class S3ALayoutKind(StrEnum):
    """Where an S3A magic job keeps its records."""

    #: ``dest/__magic_job-<uuid>/job-<uuid>/<NN>/`` (Hadoop 3.4 and later)
    HADOOP_34 = "hadoop-3.4"
    #: ``dest/__magic/job-<uuid>/[<NN>/]`` in the directory every job shares (Hadoop 3.3)
    HADOOP_33 = "hadoop-3.3"


def attempt_label(attempt: int) -> str:
    """An attempt as S3A names its directory (``00``); '' for :data:`FLAT`."""
    return "" if attempt == FLAT else f"{attempt:02d}"


def shared_magic_dir(dest: Destination) -> str:
    """``dest/__magic/``: Hadoop 3.3's directory, shared by every job on ``dest``."""
    return dest.key(f"{MAGIC}/")


def s3a_id_problem(text: str, what: str = "S3A job id") -> str | None:
    """Why ``text`` is not an id S3A puts in a path (None: it is one)."""
    if not isinstance(text, str) or not _ID_RE.fullmatch(text):
        return (
            f"{what} {text!r} is not 1-128 letters, digits, '.', '_' or '-' "
            "starting with a letter or digit"
        )
    return None


def check_s3a_job_id(job_uuid: str) -> str:
    """``job_uuid`` unchanged, or PathError (one line) when S3A could not have made it."""
    problem = s3a_id_problem(job_uuid)
    if problem is not None:
        raise PathError(problem)
    return job_uuid


def attempt_of(component: str) -> int | None:
    """The application attempt a ``NN`` directory names, or None (only S3A's ``%02d``
    spelling: ``7`` and ``007`` are not attempt 7)."""
    if not _ATTEMPT_RE.fullmatch(component):
        return None
    n = int(component)
    return n if f"{n:02d}" == component else None


def job_id_of_dir(dest: Destination, prefix: str) -> str | None:
    """The job id of a directory listed right under ``dest`` (``dest/__magic_job-<id>/``),
    or None for anything else (another depth, another name, an id S3A could not make)."""
    rel = dest.rel(prefix)
    if rel is None or not rel.endswith("/") or "/" in rel[:-1]:
        return None
    name = rel[:-1]
    if not name.startswith(MAGIC_JOB_PREFIX):
        return None
    job = name[len(MAGIC_JOB_PREFIX) :]
    return job if s3a_id_problem(job) is None else None


def job_id_of_shared_dir(dest: Destination, prefix: str) -> str | None:
    """The job id of a directory listed right under ``dest/__magic/``
    (``dest/__magic/job-<id>/``), or None for anything else (3.3.0's ``app-attempt-NNNN/``,
    another depth, an id S3A could not make)."""
    top = shared_magic_dir(dest)
    if not prefix.startswith(top) or not prefix.endswith("/"):
        return None
    name = prefix[len(top) : -1]
    if "/" in name or not name.startswith(JOB_ATTEMPTS_PREFIX):
        return None
    job = name[len(JOB_ATTEMPTS_PREFIX) :]
    return job if s3a_id_problem(job) is None else None


def final_rel(components: list[str]) -> str | None:
    """Where a magic path's data goes, relative to the destination (Hadoop's
    ``MagicCommitPaths.finalDestination`` for the part under the job's directory): what
    follows the first ``__base``, else the file name alone. None when that is no usable
    output path (empty, '.', '..', a reserved name, or the destination's ``_SUCCESS``)."""
    tail = components[components.index(BASE) + 1 :] if BASE in components else components[-1:]
    if not tail or tail == [SUCCESS_NAME]:
        return None
    if any(c in ("", ".", "..", BASE) or is_magic_component(c) for c in tail):
        return None
    return "/".join(tail)


class S3AKind(StrEnum):
    """What a key under an S3A job's directory is."""

    #: ``job-<uuid>/<NN>/<task>.pendingset``: a committed task's uploads
    PENDINGSET = "pendingset"
    #: ``job-<uuid>/<NN>/tasks/<attempt>/.../<name>.pending``: one upload of a task attempt
    PENDING = "pending"
    #: a directory marker (a key ending in '/')
    DIRECTORY = "directory"
    #: anything else (the 0-byte files a magic stream leaves at the magic path, another
    #: attempt's leftovers): the job's by structure, deleted with its directory
    OTHER = "other"


@dataclass(frozen=True)
class S3AKey:
    """One key under an S3A job's directory, classified."""

    key: str
    kind: S3AKind
    #: the application attempt (``NN``) it belongs to, when it is inside one
    attempt: int | None = None
    #: the task id (a pendingset) or the task attempt id (a ``.pending``)
    task: str | None = None
    #: a ``.pending``'s final key relative to the destination; None when its path maps to
    #: no usable output path (then the record is refused, never acted on)
    rel: str | None = None


@dataclass(frozen=True)
class S3AJobLayout:
    """The keys of one S3A magic job under a destination."""

    dest: Destination
    job_id: str
    kind: S3ALayoutKind = S3ALayoutKind.HADOOP_34

    def __post_init__(self) -> None:
        check_s3a_job_id(self.job_id)

    @property
    def shared(self) -> bool:
        """True: the job's directory is inside Hadoop 3.3's ``__magic/``, shared by jobs."""
        return self.kind is S3ALayoutKind.HADOOP_33

    @property
    def root(self) -> str:
        """The job's directory (ending in '/'): everything the job keeps but its output."""
        if self.shared:
            return f"{shared_magic_dir(self.dest)}{JOB_ATTEMPTS_PREFIX}{self.job_id}/"
        return self.dest.key(f"{MAGIC_JOB_PREFIX}{self.job_id}/")

    @property
    def attempts_dir(self) -> str:
        """Where the ``<NN>/`` attempt directories are: ``root + job-<uuid>/`` (3.4: its
        presence tells an S3A job from a zerorename one), ``root`` itself (3.3)."""
        if self.shared:
            return self.root
        return f"{self.root}{JOB_ATTEMPTS_PREFIX}{self.job_id}/"

    @property
    def abort_note(self) -> str:
        """Where ``jobs abort`` notes what it keeps (:mod:`.abort`): in ``attempts_dir``,
        so the job is still found (in either layout) while the note is all that is left,
        and outside every attempt directory, where S3A looks for pendingsets."""
        return f"{self.attempts_dir}{ABORT_NOTE_NAME}"

    def attempt_dir(self, attempt: int) -> str:
        if self.shared and attempt == FLAT:
            return self.root
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
            raise PathError(f"application attempt must be an int >= 0, got {attempt!r}")
        return f"{self.attempts_dir}{attempt:02d}/"

    def pendingset(self, attempt: int, task_id: str) -> str:
        """Where task commit saves a task's pendingset (one name per task)."""
        problem = s3a_id_problem(task_id, "task id")
        if problem is not None:
            raise PathError(problem)
        return f"{self.attempt_dir(attempt)}{task_id}{PENDINGSET_SUFFIX}"

    def task_attempt_dir(self, attempt: int, task_attempt_id: str) -> str:
        problem = s3a_id_problem(task_attempt_id, "task attempt id")
        if problem is not None:
            raise PathError(problem)
        return f"{self.attempt_dir(attempt)}{TASKS_DIR}/{task_attempt_id}/"

    def pending(self, attempt: int, task_attempt_id: str, rel: str) -> str:
        """Where a task attempt's magic stream saves the record of output ``rel``."""
        if final_rel([BASE, *rel.split("/")]) != rel:
            raise PathError(f"output path {rel!r} is not one a magic task can write")
        return f"{self.task_attempt_dir(attempt, task_attempt_id)}{BASE}/{rel}{PENDING_SUFFIX}"

    @property
    def success(self) -> str:
        return self.dest.key(SUCCESS_NAME)

    def uri(self, key: str) -> str:
        return self.dest.uri_of(key)

    def classify(self, key: str) -> S3AKey:
        """What ``key`` is in this job's directory. A key outside it (another job's, the
        destination's output, another bucket's prefix) is refused: PathError, one line."""
        if not isinstance(key, str) or not key.startswith(self.root):
            raise PathError(
                f"{key!r} is not inside S3A job {self.job_id}'s directory "
                f"{self.uri(self.root)}: refused"
            )
        rest = key[len(self.root) :]
        if rest == "" or rest.endswith("/"):
            return S3AKey(key, S3AKind.DIRECTORY)
        if not key.startswith(self.attempts_dir):
            return S3AKey(key, S3AKind.OTHER)
        parts = key[len(self.attempts_dir) :].split("/")
        attempt = attempt_of(parts[0])
        if attempt is None and not self.shared:
            return S3AKey(key, S3AKind.OTHER)
        # 3.3 without attempt directories: the records sit right in the job's directory
        parts = ["", *parts] if attempt is None else parts
        attempt = FLAT if attempt is None else attempt
        if len(parts) < 2:
            return S3AKey(key, S3AKind.OTHER, attempt)
        name = parts[1]
        if len(parts) == 2:
            task = name[: -len(PENDINGSET_SUFFIX)]
            if name.endswith(PENDINGSET_SUFFIX) and s3a_id_problem(task) is None:
                return S3AKey(key, S3AKind.PENDINGSET, attempt, task)
            return S3AKey(key, S3AKind.OTHER, attempt)
        if name != TASKS_DIR or s3a_id_problem(parts[2]) is not None:
            return S3AKey(key, S3AKind.OTHER, attempt)
        if len(parts) < 4 or not parts[-1].endswith(PENDING_SUFFIX):
            return S3AKey(key, S3AKind.OTHER, attempt, parts[2])
        under = parts[3:]
        under[-1] = under[-1][: -len(PENDING_SUFFIX)]
        return S3AKey(key, S3AKind.PENDING, attempt, parts[2], final_rel(under))

    def final_key(self, entry: S3AKey) -> str | None:
        """The destination key a ``.pending`` record's path says its upload completes to."""
        return self.dest.key(entry.rel) if entry.rel is not None else None


def check_output_key(dest: Destination, bucket: str, key: str) -> str | None:
    """Why an S3A record's upload target is not one a job under ``dest`` may complete or
    abort (None: it may): another bucket, outside the destination, inside a magic
    directory (a job's records), or the destination's ``_SUCCESS``."""
    if bucket != dest.bucket:
        return f"its bucket {bucket!r} is not the destination's ({dest.bucket!r})"
    rel = dest.rel(key)
    if rel is None:
        return f"s3://{bucket}/{key} is outside the destination {dest.uri}"
    parts = rel.split("/")
    if any(c in ("", ".", "..") or is_magic_component(c) for c in parts):
        return f"s3://{bucket}/{key} is inside a job's magic directory or has an empty component"
    if rel == SUCCESS_NAME:
        return f"s3://{bucket}/{key} is the destination's _SUCCESS"
    return None


def owns_record_job(job_id: str, record_job_id: str) -> bool:
    """A record inside job ``job_id``'s directory may carry that id or none (a magic task's
    ``.pending`` has an empty jobId until task commit fills it in); another id is another
    job's record."""
    return record_job_id in ("", job_id)


__all__ = [
    "FLAT",
    "JOB_ATTEMPTS_PREFIX",
    "TASKS_DIR",
    "S3AJobLayout",
    "S3AKey",
    "S3AKind",
    "S3ALayoutKind",
    "attempt_label",
    "attempt_of",
    "check_output_key",
    "check_s3a_job_id",
    "final_rel",
    "job_id_of_dir",
    "job_id_of_shared_dir",
    "owns_record_job",
    "s3a_id_problem",
    "shared_magic_dir",
]
