"""Pure path logic: destinations, the job's record layout, magic-path mapping, output
naming and Hive partitions. No I/O and no event loop.

Layout of one job under a destination ``dest`` (reference 001, with the job id in the
magic directory's name so concurrent jobs never share records)::

    dest/__magic_job-<jobid>/job.json                         marker: the job is active
    dest/__magic_job-<jobid>/tasks/<task>-<n>/__base/<rel>.pending   one deferred upload
    dest/__magic_job-<jobid>/pendingsets/<task>.pendingset   one committed task
    dest/__magic_job-<jobid>/journal.json, plan.json, partitions.json, replace.json
                                                              job commit state
    dest/<rel>                                                final objects (named by the rule)

Ownership (invariant 7): a data object is job J's when J sits in the naming rule's slot of
its file name (:func:`job_id_of_name`: the stem ends with ``-<J>`` or ``-<J>-c<n>``), never
because J occurs somewhere in the key; the job's records are its by their directory.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from urllib.parse import unquote

from zerorename.committers.errors import InvalidJobId, PathError

MAGIC = "__magic"
MAGIC_JOB_PREFIX = "__magic_job-"
BASE = "__base"
PENDING_SUFFIX = ".pending"
PENDINGSET_SUFFIX = ".pendingset"
SUCCESS_NAME = "_SUCCESS"
JOB_MARKER = "job.json"
JOURNAL_NAME = "journal.json"
PLAN_NAME = "plan.json"
PARTITIONS_NAME = "partitions.json"
REPLACE_NAME = "replace.json"

_TASK_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: what a bucket name can be at most (the engine applies S3's exact rules)
_BUCKET_RE = re.compile(r"[A-Za-z0-9._-]{1,255}")
#: a prefix leaves room for at least a short name under it in a 1024-byte key
MAX_PREFIX_BYTES = 1000
_UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
#: the naming rule's slot: a file name's stem ends with ``-<jobid>``, optionally followed
#: by Spark's file counter ``-c<digits>`` (as :func:`output_name` writes it)
_JOB_TAG_RE = re.compile(rf"(?P<base>.*)-(?P<job>{_UUID})(?:-c[0-9]+)?", re.DOTALL)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def new_job_id() -> str:
    """A fresh job id: a random (version 4) UUID, never derived from the clock."""
    return str(uuid.uuid4())


def check_job_id(job_id: str) -> str:
    """Return ``job_id`` in canonical form; raise InvalidJobId unless it is a UUID."""
    try:
        parsed = uuid.UUID(job_id)
    except (ValueError, TypeError, AttributeError):
        raise InvalidJobId(f"job id {job_id!r} is not a UUID") from None
    if parsed.version == 1:
        raise InvalidJobId(f"job id {job_id!r} is a time-based (version 1) UUID; use uuid4")
    return str(parsed)


def task_name(task_id: int | str) -> str:
    """Task id as used in record names: ints become ``00003``; strings are checked."""
    if isinstance(task_id, bool):
        raise PathError("task id must be an int or a string")
    if isinstance(task_id, int):
        if task_id < 0:
            raise PathError(f"task id must be >= 0, got {task_id}")
        return f"{task_id:05d}"
    if not _TASK_ID_RE.match(task_id):
        raise PathError(
            f"task id {task_id!r} must be 1-128 characters of letters, digits, '.', '_', '-'"
        )
    return task_id


def attempt_name(task_id: int | str, attempt: int) -> str:
    """Directory name of one task attempt: ``<task>-<attempt>``."""
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
        raise PathError(f"attempt number must be an int >= 0, got {attempt!r}")
    return f"{task_name(task_id)}-{attempt}"


@dataclass(frozen=True)
class Destination:
    """A bucket and a key prefix (no leading or trailing '/'; '' for the whole bucket)."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, uri: str) -> Destination:
        """Parse ``s3://bucket/prefix`` (``s3a://``, ``s3n://`` accepted). One trailing '/' is
        dropped; an empty, '.' or '..' component anywhere is refused (``s3://b//`` or
        ``s3://b/$UNSET/`` must never widen to the whole bucket). ``s3://b`` and ``s3://b/``
        name the whole bucket (prefix '')."""
        if not isinstance(uri, str):
            raise PathError(f"destination must be an s3:// URI string, got {type(uri).__name__}")
        for scheme in ("s3://", "s3a://", "s3n://"):
            if uri.startswith(scheme):
                rest = uri[len(scheme) :]
                break
        else:
            raise PathError(f"{uri!r} is not an s3:// URI (s3://bucket/prefix)")
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise PathError(f"{uri!r} names no bucket (s3://bucket/prefix)")
        if not _BUCKET_RE.fullmatch(bucket):
            raise PathError(
                f"{uri!r}: {bucket!r} is not a bucket name (letters, digits, '.', '-', '_')"
            )
        if prefix.endswith("/"):
            prefix = prefix[:-1]
            if not prefix:
                raise PathError(
                    f"{uri!r} has an empty path component (an unset variable?); "
                    f"name the whole bucket as s3://{bucket}"
                )
        if prefix and any(c in ("", ".", "..") for c in prefix.split("/")):
            raise PathError(
                f"{uri!r} has an empty, '.' or '..' path component (an unset variable?); "
                "give the prefix exactly"
            )
        if len(prefix.encode("utf-8", "surrogatepass")) > MAX_PREFIX_BYTES:
            raise PathError(f"{uri!r}: the prefix is longer than an S3 key allows")
        if _has_surrogate(prefix):
            raise PathError(f"{uri!r} is not valid Unicode (a lone surrogate)")
        return cls(bucket, prefix)

    @property
    def whole_bucket(self) -> bool:
        """True when this destination is a whole bucket (no prefix)."""
        return not self.prefix

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    @property
    def list_prefix(self) -> str:
        """Prefix that lists exactly this destination: ``prefix + '/'`` (never the bare
        prefix, so ``dataset1`` does not match ``dataset10``), or '' for a whole bucket."""
        return f"{self.prefix}/" if self.prefix else ""

    def key(self, rel: str) -> str:
        """Object key of a path relative to the destination."""
        return f"{self.list_prefix}{rel}"

    def rel(self, key: str) -> str | None:
        """Path of ``key`` relative to the destination, or None when it is outside."""
        lp = self.list_prefix
        if not key.startswith(lp) or len(key) == len(lp):
            return None
        return key[len(lp) :]

    def job_dir(self, job_id: str) -> str:
        """Key prefix (ending in '/') of the job's own records."""
        return self.key(f"{MAGIC_JOB_PREFIX}{job_id}/")

    def uri_of(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"


@dataclass(frozen=True)
class JobLayout:
    """Keys of one job's records under a destination."""

    dest: Destination
    job_id: str

    @property
    def root(self) -> str:
        return self.dest.job_dir(self.job_id)

    @property
    def marker(self) -> str:
        return self.root + JOB_MARKER

    @property
    def journal(self) -> str:
        return self.root + JOURNAL_NAME

    @property
    def plan(self) -> str:
        return self.root + PLAN_NAME

    @property
    def partitions(self) -> str:
        return self.root + PARTITIONS_NAME

    @property
    def replace(self) -> str:
        """The replace plan: the older objects a replace-mode commit deletes."""
        return self.root + REPLACE_NAME

    @property
    def pendingsets_dir(self) -> str:
        return self.root + "pendingsets/"

    @property
    def tasks_dir(self) -> str:
        return self.root + "tasks/"

    def pendingset(self, task_id: int | str) -> str:
        """Where a committed task's pendingset lives: one name per task (the last
        committed attempt overwrites it; a re-run attempt never fails on it)."""
        return f"{self.pendingsets_dir}{task_name(task_id)}{PENDINGSET_SUFFIX}"

    def attempt_dir(self, task_id: int | str, attempt: int) -> str:
        return f"{self.tasks_dir}{attempt_name(task_id, attempt)}/"

    def pending_record(self, task_id: int | str, attempt: int, rel: str) -> str:
        """Key of the ``.pending`` record of output ``rel`` (reference 001's
        ``__magic/<job>/<task>/__base/<rel>.pending``)."""
        return f"{self.attempt_dir(task_id, attempt)}{BASE}/{rel}{PENDING_SUFFIX}"

    @property
    def success(self) -> str:
        return self.dest.key(SUCCESS_NAME)


def is_magic_component(component: str) -> bool:
    return component.startswith(MAGIC)


def magic_destination(path: str) -> str:
    """Map a path under a magic directory to where its data finally goes (paper, table III).

    The first component starting with ``__magic`` and everything up to the last ``__base``
    after it are dropped; without a ``__base`` only the ``__magic`` component is dropped.
    ``.pending``/``.pendingset`` records are not data: they map to themselves, as do paths
    with no magic component.
    """
    if path.endswith((PENDING_SUFFIX, PENDINGSET_SUFFIX)):
        return path
    parts = path.split("/")
    try:
        m = next(i for i, c in enumerate(parts) if is_magic_component(c))
    except StopIteration:
        return path
    tail = parts[m + 1 :]
    bases = [i for i, c in enumerate(tail) if c == BASE]
    if bases:
        tail = tail[bases[-1] + 1 :]
    return "/".join(parts[:m] + tail)


def pending_record_destination(record_key: str) -> str:
    """Final key of the upload described by a ``.pending`` record key."""
    if not record_key.endswith(PENDING_SUFFIX):
        raise PathError(f"{record_key!r} is not a .pending record")
    return magic_destination(record_key[: -len(PENDING_SUFFIX)])


def check_relative_path(rel: str) -> str:
    """Validate an output path relative to the destination; return it unchanged.

    Any character S3 accepts is kept (spaces, unicode, '%', '+', '#'); rejected are
    absolute paths, empty/'.'/'..' components, trailing '/', reserved names
    (``__magic*``, ``__base``, ``_SUCCESS`` at the root) and record suffixes.
    """
    if not rel or rel.startswith("/") or rel.endswith("/"):
        raise PathError(f"output path {rel!r} must be relative, non-empty, not end with '/'")
    parts = rel.split("/")
    for c in parts:
        if c in ("", ".", ".."):
            raise PathError(f"output path {rel!r} has an empty, '.' or '..' component")
        if is_magic_component(c) or c == BASE:
            raise PathError(f"output path {rel!r} uses a reserved name ({c!r})")
    if rel == SUCCESS_NAME:
        raise PathError("output path '_SUCCESS' is reserved for the job summary")
    if rel.endswith((PENDING_SUFFIX, PENDINGSET_SUFFIX)):
        raise PathError(f"output path {rel!r} ends with a record suffix")
    if len(rel.encode("utf-8")) > 900:
        raise PathError(f"output path {rel!r} is too long for an S3 key")
    return rel


def _split_name(name: str) -> tuple[str, str, str]:
    """A file name as (leading dots, stem, rest): the stem runs to the first '.' after the
    leading dots; the naming rule puts the job id at the end of the stem."""
    lead = len(name) - len(name.lstrip("."))
    stem, dot, ext = name[lead:].partition(".")
    return name[:lead], stem, dot + ext


def job_id_of_name(name: str) -> str | None:
    """The job whose naming rule made file name ``name``, or None: the stem ends with
    ``-<jobid>`` or ``-<jobid>-c<digits>`` (a canonical, non-time-based UUID). An id
    anywhere else (a directory, inside another id, mid-stem) makes no owner."""
    _, stem, _ = _split_name(name)
    m = _JOB_TAG_RE.fullmatch(stem)
    if m is None:
        return None
    job = m.group("job")
    return job if uuid.UUID(job).version != 1 else None


def job_id_of_key(key: str) -> str | None:
    """The job that owns object ``key`` by structure: the naming rule's slot in its file
    name (the last path component); directories never count."""
    return job_id_of_name(key.rpartition("/")[2])


def with_job_id(rel: str, job_id: str) -> str:
    """Put the job id in the naming rule's slot of the file name unless it is exactly
    there already: ``a=1/part-00003.snappy.parquet`` -> ``a=1/part-00003-<jobid>.snappy.parquet``
    (leading dots stay). Every object a job creates is then owned by it and by no other job
    (:func:`job_id_of_key`), which is how cleanup tells its uploads from anyone else's."""
    job_id = check_job_id(job_id)
    head, sep, name = rel.rpartition("/")
    if job_id_of_name(name) == job_id:
        return rel
    lead, stem, rest = _split_name(name)
    if not stem:  # a name of dots only: the id goes after them
        return f"{head}{sep}{name}-{job_id}"
    return f"{head}{sep}{lead}{stem}-{job_id}{rest}"


def output_name(task_index: int, job_id: str, extension: str = "", *, file_index: int = 0) -> str:
    """Spark-style unique file name: ``part-00003-<jobid>-c000<extension>`` (the job id in
    the naming rule's slot, so :func:`job_id_of_name` gives it back)."""
    if task_index < 0 or file_index < 0:
        raise PathError("task and file indexes must be >= 0")
    if extension and not extension.startswith("."):
        extension = "." + extension
    return f"part-{task_index:05d}-{job_id}-c{file_index:03d}{extension}"


def key_carries_job(key: str, job_id: str) -> bool:
    """True when ``key`` is job ``job_id``'s by the naming rule (its id in the file name's
    slot), never because the id occurs somewhere in the key."""
    return job_id_of_key(key) == job_id


def partition_of(rel: str) -> str:
    """Partition directory of an output path: its parent directory ('' at the root)."""
    return rel.rpartition("/")[0]


def parse_hive_partition(directory: str) -> tuple[tuple[str, str], ...]:
    """Parse ``k1=v1/k2=v2`` into ((k1, v1), (k2, v2)); values are Hive-unescaped (%XX).

    Raises PathError when a component is not ``k=v`` with a non-empty key.
    """
    if not directory:
        raise PathError("the destination root is not a partition directory")
    out: list[tuple[str, str]] = []
    for comp in directory.split("/"):
        k, eq, v = comp.partition("=")
        if not eq or not k:
            raise PathError(f"{directory!r}: component {comp!r} is not a k=v partition")
        out.append((unquote(k), unquote(v)))
    return tuple(out)


def check_partitioned_path(rel: str) -> str:
    """For the partitioned committer: the file must sit in a ``k=v/...`` directory.
    Returns the partition directory."""
    part = partition_of(rel)
    try:
        parse_hive_partition(part)
    except PathError as exc:
        raise PathError(f"partitioned output {rel!r} is not in a k=v directory: {exc}") from None
    return part


def is_job_record(rel: str) -> bool:
    """True for keys (relative to the destination) inside any job's magic directory."""
    return any(is_magic_component(c) for c in rel.split("/")[:-1])


def job_id_of_dir(component: str) -> str | None:
    """Job id from a ``__magic_job-<id>`` directory name, or None."""
    if not component.startswith(MAGIC_JOB_PREFIX):
        return None
    try:
        return check_job_id(component[len(MAGIC_JOB_PREFIX) :].rstrip("/"))
    except InvalidJobId:
        return None
