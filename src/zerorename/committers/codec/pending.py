"""The committers' persistent records: ``.pending``, ``.pendingset`` and ``_SUCCESS``.

Written in S3A's formats, so Hadoop's own classes read them (``SinglePendingCommit``
version 2, ``PendingSet`` version 3, ``SuccessData``, see :mod:`.success`), and read
in S3A's formats and in zerorename 0.1's (version 1). UTF-8, ``ensure_ascii=False`` so
keys with spaces, unicode, '%', '+' and '#' round-trip exactly. Hadoop ignores members it
does not know, so ours stay: ``parts`` (number, etag, size, checksum per part),
``checksumAlgorithm`` and ``taskAttempt``. An S3A ``.pending`` has ``etags`` and no part
sizes: such a record completes from its ETags, and its :attr:`PendingRecord.unchecked`
names the checks that needed the sizes.

A pendingset is written with its header members first and the ``commits`` array last,
one commit per line; it is plain JSON, and :class:`PendingSetParser` reads it
incrementally (see :mod:`.jsonstream`), wherever ``commits`` is and however it is laid
out (S3A writes it pretty-printed or compact). A small pendingset held in memory is read
a line at a time (:func:`read_pendingset`), the same records and errors, faster.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from zerorename.committers.codec.hadoop import (
    add_counters,
    check_iostatistics,
    counters_of,
    iso_date,
    s3a_uri,
    snapshot,
    uri_names,
)
from zerorename.committers.codec.jsonstream import (
    ArrayEnd,
    ArrayStart,
    End,
    Event,
    Item,
    JsonStreamError,
    LayoutMismatch,
    Member,
    iter_line_events,
    iter_object_stream,
)
from zerorename.committers.codec.success import (
    LEGACY_SUCCESS_NAME,
    MAX_SUCCESS_FILENAMES,
    SUCCESS_NAME,
    SuccessData,
)
from zerorename.committers.codec.validate import MAX_INT, MAX_TIME, Fields, Fingerprints, load_json
from zerorename.committers.errors import RecordFormatError
from zerorename.engine.errors import RecordError
from zerorename.engine.planning import MAX_PARTS
from zerorename.engine.results import PartInfo, PendingUpload

__all__ = [
    "LEGACY_PENDINGSET_VERSION",
    "LEGACY_PENDING_VERSION",
    "LEGACY_SUCCESS_NAME",
    "MAX_SUCCESS_FILENAMES",
    "PENDINGSET_VERSION",
    "PENDING_VERSION",
    "SUCCESS_NAME",
    "PendingRecord",
    "PendingSetHeader",
    "PendingSetParser",
    "SuccessData",
    "Unchecked",
    "encode_pendingset",
    "parse_pendingset",
    "pendingset_bytes",
    "read_pendingset",
    "stream_error",
]

#: S3A ``SinglePendingCommit``'s version, which zerorename writes
PENDING_VERSION = 2
#: S3A ``PendingSet``'s version, which zerorename writes (its commits: PENDING_VERSION)
PENDINGSET_VERSION = 3
#: zerorename 0.1's versions, still read
LEGACY_PENDING_VERSION = 1
LEGACY_PENDINGSET_VERSION = 1
#: pendingset version -> the version of its commits
_COMMIT_VERSION = {PENDINGSET_VERSION: PENDING_VERSION, LEGACY_PENDINGSET_VERSION: 1}
_COMMITS = "commits"
#: the latest time a record may hold, in milliseconds
_MAX_MS = int(MAX_TIME * 1000)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _str_map(value: Any, what: str, location: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise RecordFormatError(f"{what} must map strings to strings", location=location)
    return dict(value)


def _check_names(**values: Any) -> None:
    for name, value in values.items():
        if not isinstance(value, str) or not value:
            raise TypeError(f"{name} must be a non-empty string")


class Unchecked(enum.Enum):
    """A check a record could not get: S3A's ``.pending`` carries ETags, no part sizes."""

    #: the parts add up to the record's length (the sizes are not known)
    PART_SIZES = "part sizes add up to the length"


def _etag_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(e, str) and e for e in value):
        raise TypeError("etags must be a list of non-empty strings")
    if len(value) > MAX_PARTS:
        raise ValueError(f"etags holds {len(value)} entries, an upload has at most {MAX_PARTS}")
    return value


def _parts_of(
    raw_parts: Any, etags: list[str] | None, length: int
) -> tuple[tuple[PartInfo, ...], tuple[Unchecked, ...]]:
    """The parts of a record: from ``parts`` (ours, with sizes) when present, else from
    S3A's ``etags`` alone, numbered 1..n; their sizes are then unknown (0, the last one
    carrying the whole length, so the upload's sum holds) and said so."""
    if raw_parts is not None:
        if not isinstance(raw_parts, list):
            raise TypeError("parts must be a list")
        if len(raw_parts) > MAX_PARTS:
            raise ValueError(f"parts holds {len(raw_parts)} entries, at most {MAX_PARTS}")
        parts = tuple([PartInfo.from_dict(p) for p in raw_parts])
        if etags is not None and etags != [p.etag for p in parts]:
            raise ValueError("etags and parts disagree")
        unchecked: tuple[Unchecked, ...] = ()
    elif etags is None:
        raise KeyError("etags")
    else:
        n = len(etags)
        parts = tuple(
            PartInfo(i + 1, etag, length if i == n - 1 else 0) for i, etag in enumerate(etags)
        )
        unchecked = (Unchecked.PART_SIZES,)
    if not parts:
        raise ValueError("no parts (S3 completes no upload of no parts)")
    return parts, unchecked


@dataclass(frozen=True)
class PendingRecord:
    """One deferred upload (S3A ``SinglePendingCommit``) with the job and task that made it.

    ``job_id`` and ``task_id`` may be empty in a record S3A wrote (a magic task's
    ``.pending``); ``unchecked`` names the checks the record could not get."""

    upload: PendingUpload
    job_id: str
    task_id: str
    attempt: int
    saved: float = field(default_factory=time.time)
    text: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)
    unchecked: tuple[Unchecked, ...] = ()

    def iostatistics(self) -> dict[str, Any]:
        """The upload's statistics under S3A's names (what S3A's output stream counts)."""
        u = self.upload
        return snapshot(
            {"stream_write_block_uploads": len(u.parts), "stream_write_bytes": u.length}
        )

    def to_dict(self) -> dict[str, Any]:
        """The record as S3A's version 2 plus our members, with its ``iostatistics``."""
        u = self.upload
        d: dict[str, Any] = {
            "version": PENDING_VERSION,
            "uri": s3a_uri(u.bucket, u.key),
            "bucket": u.bucket,
            "destinationKey": u.key,
            "uploadId": u.upload_id,
            "created": round(u.created * 1000),
            "saved": round(self.saved * 1000),
            "date": iso_date(self.saved),
            "jobId": self.job_id,
            "taskId": self.task_id,
            "taskAttempt": self.attempt,
            "text": self.text,
            "etags": [p.etag for p in u.parts],
            "length": u.length,
            "checksumAlgorithm": u.checksum_algorithm,
            "extraData": dict(self.extra),
        }
        if Unchecked.PART_SIZES not in self.unchecked:
            d["parts"] = [p.to_dict() for p in u.parts]
        d["iostatistics"] = self.iostatistics()
        return d

    def to_json(self) -> str:
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: Any, *, location: str = "") -> PendingRecord:
        """Validate and convert a version 2 (S3A) or version 1 (zerorename 0.1) record;
        RecordFormatError names ``location`` on any problem."""
        if type(d) is not dict and not isinstance(d, Mapping):
            raise RecordFormatError("a pending commit must be a JSON object", location=location)
        version = d.get("version")
        if type(version) is not int or version not in (PENDING_VERSION, LEGACY_PENDING_VERSION):
            raise RecordFormatError(
                f"pending commit version {version!r} is not supported (this zerorename "
                f"reads version {PENDING_VERSION}, S3A's, and {LEGACY_PENDING_VERSION})",
                location=location,
            )
        legacy = version == LEGACY_PENDING_VERSION
        etags: list[str] | None = None
        try:
            bucket, key, upload_id = d["bucket"], d["destinationKey"], d["uploadId"]
            if legacy:
                job_id, task_id, raw_parts = d["jobId"], d["taskId"], d["parts"]
            else:  # S3A: the ids may be empty (or Java's null), etags required, parts ours
                job_id, task_id, raw_parts = d.get("jobId"), d.get("taskId"), d.get("parts")
                job_id = "" if job_id is None else job_id
                task_id = "" if task_id is None else task_id
                etags = _etag_list(d["etags"])
            # one test for the usual record; the name of a bad field is looked for after
            if not (
                type(bucket) is str
                and bucket
                and type(key) is str
                and key
                and type(upload_id) is str
                and upload_id
                and type(job_id) is str
                and (job_id or not legacy)
                and type(task_id) is str
                and (task_id or not legacy)
            ):
                _check_names(bucket=bucket, destinationKey=key, uploadId=upload_id)
                if legacy:
                    _check_names(jobId=job_id, taskId=task_id)
                elif not (isinstance(job_id, str) and isinstance(task_id, str)):
                    raise TypeError("jobId and taskId must be strings")
            length, created, saved = d["length"], d["created"], d["saved"]
            if not (type(length) is int and type(created) is int and type(saved) is int):
                raise TypeError("length, created and saved must be integers")
            if not (0 <= length <= MAX_INT and 0 <= created <= _MAX_MS and 0 <= saved <= _MAX_MS):
                raise ValueError(
                    "length must be 0..2^63-1 bytes, created and saved times in ms "
                    "between 1970 and 9999"
                )
            if legacy:
                etags = _etag_list(d.get("etags"))
            parts, unchecked = _parts_of(raw_parts, etags, length)
            count = d.get("partCount")  # S3A writes it (its getter): the ETags' count
            if count is not None and (type(count) is not int or count != len(parts)):
                raise ValueError(f"partCount {count!r} is not the number of parts ({len(parts)})")
            algo = d.get("checksumAlgorithm")
            if algo is not None and not isinstance(algo, str):
                raise TypeError("checksumAlgorithm must be a string or null")
            attempt = d.get("taskAttempt", 0)
            if type(attempt) is not int or not 0 <= attempt <= MAX_INT:
                raise TypeError("taskAttempt must be an integer >= 0")
            check_iostatistics(d.get("iostatistics"))
            upload = PendingUpload(
                bucket=bucket,
                key=key,
                upload_id=upload_id,
                parts=parts,
                length=length,
                created=created / 1000.0,
                checksum_algorithm=algo,
            )
        except (KeyError, TypeError, ValueError, RecordError) as exc:
            what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise RecordFormatError(
                f"malformed pending commit: {what}", location=location
            ) from None
        uri = d.get("uri")
        if uri is not None and (not isinstance(uri, str) or not uri_names(uri, bucket, key)):
            raise RecordFormatError(f"uri {uri!r} does not match bucket and key", location=location)
        text = d.get("text", "")
        extra = d.get("extraData")
        return cls(
            upload=upload,
            job_id=job_id,
            task_id=task_id,
            attempt=attempt,
            saved=saved / 1000.0,
            text=text if isinstance(text, str) else "",
            extra={} if extra is None or extra == {} else _str_map(extra, "extraData", location),
            unchecked=unchecked,
        )

    @classmethod
    def from_json(cls, data: str | bytes, *, location: str = "") -> PendingRecord:
        return cls.from_dict(load_json(data, "pending commit", location), location=location)


@dataclass(frozen=True)
class PendingSetHeader:
    """A pendingset's members other than ``commits`` (S3A ``PendingSet``). ``job_id`` may
    be empty in a set S3A wrote (its magic committer sets the id on each commit only)."""

    job_id: str
    task_id: str
    attempt: int
    saved: float = field(default_factory=time.time)
    extra: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": PENDINGSET_VERSION,
            "jobId": self.job_id,
            "taskId": self.task_id,
            "taskAttempt": self.attempt,
            "saved": round(self.saved * 1000),
            "date": iso_date(self.saved),
            "extraData": dict(self.extra),
        }


def encode_pendingset(
    header: PendingSetHeader,
    records: Iterable[PendingRecord],
    *,
    iostatistics: Mapping[str, Any] | None = None,
) -> Iterator[bytes]:
    """Chunks of a pendingset: header members (and ``iostatistics``, the set's sum, when
    given) first, ``commits`` last, one per line, each as :meth:`PendingRecord.to_json`."""
    head = header.to_dict()
    if iostatistics is not None:
        head["iostatistics"] = dict(iostatistics)
    text = _dumps(head)
    yield (text[:-1] + ',"commits":[').encode("utf-8")
    first = True
    for rec in records:
        yield (("\n" if first else ",\n") + rec.to_json()).encode("utf-8")
        first = False
    yield b"\n]}\n"


def pendingset_bytes(header: PendingSetHeader, records: Iterable[PendingRecord]) -> bytes:
    """A whole pendingset, its ``iostatistics`` the sum of its commits' (as S3A's)."""
    recs: Sequence[PendingRecord] = records if isinstance(records, Sequence) else list(records)
    total: dict[str, int] = {}
    for rec in recs:
        add_counters(total, counters_of(rec.iostatistics()))
    stats = snapshot(total)
    return b"".join(encode_pendingset(header, recs, iostatistics=stats))


class PendingSetParser:
    """Turns scanner events of one pendingset into validated :class:`PendingRecord` s.

    Feed every event to :meth:`handle`; it returns a record for each commit. Call
    :meth:`finish` after the last event: it returns the header, and raises unless the
    file parsed to its end. Reads version 3 (S3A's, commits of version 2) and version 1
    (zerorename 0.1, commits of version 1); ``commits`` may come anywhere in the object.
    No two commits may name one destination key. ``expect_job_id`` rejects a record
    whose job id is another (an empty one too: pass None for a set S3A wrote).
    """

    _HEADER_TYPES: Mapping[str, type | tuple[type, ...]] = {
        "version": int,
        "jobId": str,
        "taskId": str,
        "taskAttempt": int,
        "saved": int,
        "date": str,
        "extraData": dict,
        "iostatistics": dict,
    }

    def __init__(self, location: str, *, expect_job_id: str | None = None) -> None:
        self.location = location
        self.expect_job_id = expect_job_id
        self.count = 0
        self.bytes = 0
        self._members: dict[str, Any] = {}
        self._ended = False
        self._saw_commits = False
        #: the version the commits must have once the set's version is known
        self._commit_version: int | None = None
        #: versions of the commits seen before the set's version
        self._early_versions: set[int] = set()
        self._keys = Fingerprints()

    def handle(self, ev: Event) -> PendingRecord | None:
        if isinstance(ev, Item):
            where = f"{self.location} (commit #{self.count + 1})"
            rec = PendingRecord.from_dict(ev.value, location=where)
            self._check_version(ev.value["version"], where)
            self._check_job(rec.job_id)
            if not self._keys.add(hash(rec.upload.key)):
                raise RecordFormatError(
                    f"destination {rec.upload.key!r} is written by more than one commit of "
                    f"the pendingset (S3A refuses it too)",
                    location=where,
                )
            self.count += 1
            self.bytes += rec.upload.length
            return rec
        if isinstance(ev, Member):
            want = self._HEADER_TYPES.get(ev.key)
            if want is not None and (not isinstance(ev.value, want) or isinstance(ev.value, bool)):
                raise RecordFormatError(
                    f"pendingset member {ev.key!r} has the wrong type", location=self.location
                )
            if ev.key == "version":
                self._set_version(ev.value)
            elif ev.key == "jobId":
                self._check_job(ev.value)
            elif ev.key == "iostatistics":
                try:
                    check_iostatistics(ev.value)
                except TypeError as exc:
                    raise RecordFormatError(f"pendingset {exc}", location=self.location) from None
            self._members[ev.key] = ev.value
        elif isinstance(ev, ArrayStart):
            self._saw_commits = True
        elif isinstance(ev, End):
            self._ended = True
        elif isinstance(ev, ArrayEnd):
            pass
        return None

    def _set_version(self, version: int) -> None:
        commit_version = _COMMIT_VERSION.get(version)
        if commit_version is None:
            raise RecordFormatError(
                f"pendingset version {version!r} is not supported (this zerorename reads "
                f"version {PENDINGSET_VERSION}, S3A's, and {LEGACY_PENDINGSET_VERSION})",
                location=self.location,
            )
        self._commit_version = commit_version
        for v in self._early_versions:
            self._check_version(v, self.location)

    def _check_version(self, version: int, where: str) -> None:
        if self._commit_version is None:
            self._early_versions.add(version)
        elif version != self._commit_version:
            raise RecordFormatError(
                f"a commit of version {version} in a pendingset whose commits are version "
                f"{self._commit_version}",
                location=where,
            )

    def _check_job(self, job_id: str) -> None:
        if self.expect_job_id is not None and job_id != self.expect_job_id:
            raise RecordFormatError(
                f"belongs to job {job_id!r}, not to job {self.expect_job_id!r}",
                location=self.location,
            )

    def finish(self) -> PendingSetHeader:
        if not self._ended:
            raise RecordFormatError(
                "pendingset ended before its closing '}' (truncated)", location=self.location
            )
        m = self._members
        if "version" not in m:
            raise RecordFormatError("pendingset has no version", location=self.location)
        if not self._saw_commits:
            raise RecordFormatError("pendingset has no commits array", location=self.location)
        legacy = m["version"] == LEGACY_PENDINGSET_VERSION
        job_id = m.get("jobId", "")
        if legacy and not job_id:
            raise RecordFormatError("pendingset has no jobId", location=self.location)
        if "jobId" not in m:
            self._check_job(job_id)  # a set without an id is no job's to expect
        f = Fields(m, "pendingset", self.location)
        return PendingSetHeader(
            job_id=job_id,
            task_id=f.str_("taskId", required=False, empty=True),
            attempt=f.int_("taskAttempt", required=False),
            saved=f.int_("saved", required=False, hi=_MAX_MS) / 1000.0,
            extra=_str_map(m.get("extraData"), "extraData", self.location),
        )


def stream_error(exc: JsonStreamError, location: str) -> RecordFormatError:
    """A scanner error as a record error naming the object."""
    return RecordFormatError(
        f"not a valid pendingset (corrupt or truncated): {exc}", location=location
    )


def parse_pendingset(
    chunks: Iterable[bytes], location: str, *, expect_job_id: str | None = None
) -> Iterator[PendingRecord | PendingSetHeader]:
    """Sync convenience: yields each record, then the header once the file parsed to its end."""
    parser = PendingSetParser(location, expect_job_id=expect_job_id)
    try:
        for ev in iter_object_stream(chunks, _COMMITS):
            rec = parser.handle(ev)
            if rec is not None:
                yield rec
    except JsonStreamError as exc:
        raise stream_error(exc, location) from None
    yield parser.finish()


def read_pendingset(
    data: bytes, location: str, *, expect_job_id: str | None = None
) -> tuple[PendingSetHeader, list[PendingRecord]]:
    """A whole pendingset held in memory: its header and records, decoded a line at a time
    when it has the layout :func:`encode_pendingset` writes, else by the incremental
    scanner; the same records and the same errors either way."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None  # the scanner names the bad byte
    if text is not None:
        parser = PendingSetParser(location, expect_job_id=expect_job_id)
        records: list[PendingRecord] = []
        try:
            for ev in iter_line_events(text, _COMMITS):
                rec = parser.handle(ev)
                if rec is not None:
                    records.append(rec)
            return parser.finish(), records
        except LayoutMismatch:
            pass  # the events so far were the scanner's too: start over with it
    records = []
    for item in parse_pendingset((data,), location, expect_job_id=expect_job_id):
        if isinstance(item, PendingRecord):
            records.append(item)
        else:
            return item, records
    raise AssertionError("parse_pendingset ends with the header")  # pragma: no cover
