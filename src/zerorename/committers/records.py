"""The committers' persistent records: ``.pending``, ``.pendingset`` and ``_SUCCESS``.

Versioned JSON, UTF-8, written with ``ensure_ascii=False`` so keys with spaces, unicode,
'%', '+' and '#' round-trip exactly. Field names are S3A's where S3A has one
(``SinglePendingCommit``, ``PendingSet``, ``SuccessData``); our additions are
``parts`` (number, etag, size, checksum per part), ``checksumAlgorithm`` and
``taskAttempt``.

A pendingset is written with its header members first and the ``commits`` array last,
one commit per line; it is plain JSON, and :class:`PendingSetParser` reads it
incrementally (see :mod:`jsonstream`), so a reader never holds the whole file. A small
pendingset held in memory is read a line at a time (:func:`read_pendingset`), the same
records and errors, faster.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from zerorename.committers.errors import RecordFormatError
from zerorename.committers.jsonstream import (
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
from zerorename.committers.validate import MAX_INT, MAX_TIME, Fields, load_json
from zerorename.engine.errors import RecordError
from zerorename.engine.records import PartInfo, PendingUpload

PENDING_VERSION = 1
PENDINGSET_VERSION = 1
SUCCESS_NAME = "zerorename.committers.SuccessData/1"
MAX_SUCCESS_FILENAMES = 100
_COMMITS = "commits"
#: the latest time a record may hold, in milliseconds
_MAX_MS = int(MAX_TIME * 1000)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _date(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


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


@dataclass(frozen=True)
class PendingRecord:
    """One deferred upload (S3A ``SinglePendingCommit``) with the job and task that made it."""

    upload: PendingUpload
    job_id: str
    task_id: str
    attempt: int
    saved: float = field(default_factory=time.time)
    text: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        u = self.upload
        return {
            "version": PENDING_VERSION,
            "uri": u.uri,
            "bucket": u.bucket,
            "destinationKey": u.key,
            "uploadId": u.upload_id,
            "created": round(u.created * 1000),
            "saved": round(self.saved * 1000),
            "date": _date(self.saved),
            "jobId": self.job_id,
            "taskId": self.task_id,
            "taskAttempt": self.attempt,
            "text": self.text,
            "etags": [p.etag for p in u.parts],
            "length": u.length,
            "checksumAlgorithm": u.checksum_algorithm,
            "parts": [p.to_dict() for p in u.parts],
            "extraData": dict(self.extra),
        }

    def to_json(self) -> str:
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: Any, *, location: str = "") -> PendingRecord:
        """Validate and convert; RecordFormatError names ``location`` on any problem."""
        if type(d) is not dict and not isinstance(d, Mapping):
            raise RecordFormatError("a pending commit must be a JSON object", location=location)
        version = d.get("version")
        if version != PENDING_VERSION:
            raise RecordFormatError(
                f"pending commit version {version!r} is not supported (this zerorename "
                f"reads version {PENDING_VERSION})",
                location=location,
            )
        try:
            bucket, key, upload_id = d["bucket"], d["destinationKey"], d["uploadId"]
            raw_parts = d["parts"]
            if not isinstance(raw_parts, list):
                raise TypeError("parts must be a list")
            parts = tuple([PartInfo.from_dict(p) for p in raw_parts])
            job_id, task_id = d["jobId"], d["taskId"]
            # one test for the usual record; the name of a bad field is looked for after
            if not (
                type(bucket) is str
                and bucket
                and type(key) is str
                and key
                and type(upload_id) is str
                and upload_id
                and type(job_id) is str
                and job_id
                and type(task_id) is str
                and task_id
            ):
                _check_names(
                    bucket=bucket,
                    destinationKey=key,
                    uploadId=upload_id,
                    jobId=job_id,
                    taskId=task_id,
                )
            length, created, saved = d["length"], d["created"], d["saved"]
            if not (type(length) is int and type(created) is int and type(saved) is int):
                raise TypeError("length, created and saved must be integers")
            if not (0 <= length <= MAX_INT and 0 <= created <= _MAX_MS and 0 <= saved <= _MAX_MS):
                raise ValueError(
                    "length must be 0..2^63-1 bytes, created and saved times in ms "
                    "between 1970 and 9999"
                )
            algo = d.get("checksumAlgorithm")
            if algo is not None and not isinstance(algo, str):
                raise TypeError("checksumAlgorithm must be a string or null")
            attempt = d.get("taskAttempt", 0)
            if type(attempt) is not int or not 0 <= attempt <= MAX_INT:
                raise TypeError("taskAttempt must be an integer >= 0")
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
        if not parts:
            raise RecordFormatError(
                f"pending commit of {upload.uri} has no parts", location=location
            )
        etags = d.get("etags")
        if etags is not None and etags != [p.etag for p in parts]:
            raise RecordFormatError(f"etags and parts of {upload.uri} disagree", location=location)
        uri = d.get("uri")
        if uri is not None and uri != f"s3://{bucket}/{key}" and uri != f"s3a://{bucket}/{key}":
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
        )

    @classmethod
    def from_json(cls, data: str | bytes, *, location: str = "") -> PendingRecord:
        return cls.from_dict(load_json(data, "pending commit", location), location=location)


@dataclass(frozen=True)
class PendingSetHeader:
    """A pendingset's members other than ``commits`` (S3A ``PendingSet``)."""

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
            "date": _date(self.saved),
            "extraData": dict(self.extra),
        }


def encode_pendingset(
    header: PendingSetHeader, records: Iterable[PendingRecord]
) -> Iterator[bytes]:
    """Chunks of a pendingset: header members first, ``commits`` last, one per line."""
    head = _dumps(header.to_dict())
    yield (head[:-1] + ',"commits":[').encode("utf-8")
    first = True
    for rec in records:
        yield (("\n" if first else ",\n") + rec.to_json()).encode("utf-8")
        first = False
    yield b"\n]}\n"


def pendingset_bytes(header: PendingSetHeader, records: Iterable[PendingRecord]) -> bytes:
    return b"".join(encode_pendingset(header, records))


class PendingSetParser:
    """Turns scanner events of one pendingset into validated :class:`PendingRecord` s.

    Feed every event to :meth:`handle`; it returns a record for each commit. Call
    :meth:`finish` after the last event: it returns the header, and raises unless the
    file parsed to its end. ``expect_job_id`` rejects records of another job.
    """

    _HEADER_TYPES: Mapping[str, type | tuple[type, ...]] = {
        "version": int,
        "jobId": str,
        "taskId": str,
        "taskAttempt": int,
        "saved": int,
        "date": str,
        "extraData": dict,
    }

    def __init__(self, location: str, *, expect_job_id: str | None = None) -> None:
        self.location = location
        self.expect_job_id = expect_job_id
        self.count = 0
        self.bytes = 0
        self._members: dict[str, Any] = {}
        self._ended = False
        self._saw_commits = False

    def handle(self, ev: Event) -> PendingRecord | None:
        if isinstance(ev, Item):
            rec = PendingRecord.from_dict(
                ev.value, location=f"{self.location} (commit #{self.count + 1})"
            )
            self._check_job(rec.job_id)
            self.count += 1
            self.bytes += rec.upload.length
            return rec
        if isinstance(ev, Member):
            want = self._HEADER_TYPES.get(ev.key)
            if want is not None and (not isinstance(ev.value, want) or isinstance(ev.value, bool)):
                raise RecordFormatError(
                    f"pendingset member {ev.key!r} has the wrong type", location=self.location
                )
            if ev.key == "version" and ev.value != PENDINGSET_VERSION:
                raise RecordFormatError(
                    f"pendingset version {ev.value!r} is not supported (this zerorename "
                    f"reads version {PENDINGSET_VERSION})",
                    location=self.location,
                )
            if ev.key == "jobId":
                self._check_job(ev.value)
            self._members[ev.key] = ev.value
        elif isinstance(ev, ArrayStart):
            self._saw_commits = True
        elif isinstance(ev, End):
            self._ended = True
        elif isinstance(ev, ArrayEnd):
            pass
        return None

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
        if not isinstance(m.get("jobId"), str) or not m["jobId"]:
            raise RecordFormatError("pendingset has no jobId", location=self.location)
        f = Fields(m, "pendingset", self.location)
        return PendingSetHeader(
            job_id=m["jobId"],
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


@dataclass
class SuccessData:
    """The ``_SUCCESS`` summary of a committed job (S3A ``SuccessData`` field names)."""

    job_id: str
    committer: str
    description: str = ""
    job_id_source: str = "zerorename"
    timestamp: float = field(default_factory=time.time)
    hostname: str = field(default_factory=socket.gethostname)
    metrics: dict[str, int | float] = field(default_factory=dict)
    diagnostics: dict[str, str] = field(default_factory=dict)
    filenames: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": SUCCESS_NAME,
            "timestamp": round(self.timestamp * 1000),
            "date": _date(self.timestamp),
            "hostname": self.hostname,
            "committer": self.committer,
            "description": self.description,
            "jobId": self.job_id,
            "jobIdSource": self.job_id_source,
            "metrics": dict(self.metrics),
            "diagnostics": dict(self.diagnostics),
            "filenames": list(self.filenames[:MAX_SUCCESS_FILENAMES]),
        }

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=1).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | str, *, location: str = "") -> SuccessData:
        f = Fields(load_json(data, "_SUCCESS", location), "_SUCCESS", location)
        if f.d.get("name") != SUCCESS_NAME:
            raise RecordFormatError(
                f"not a zerorename _SUCCESS record (name {f.d.get('name')!r})", location=location
            )
        metrics = f.d.get("metrics", {})
        if not isinstance(metrics, dict) or not all(
            type(v) in (int, float) for v in metrics.values()
        ):
            raise f.fail("metrics", "must map names to numbers")
        return cls(
            job_id=f.str_("jobId"),
            committer=f.str_("committer"),
            description=f.str_("description", required=False, empty=True),
            job_id_source=f.str_("jobIdSource", required=False, empty=True),
            timestamp=f.int_("timestamp", hi=_MAX_MS) / 1000.0,
            hostname=f.str_("hostname", required=False, empty=True),
            metrics=dict(metrics),
            diagnostics=f.str_map("diagnostics"),
            filenames=f.str_list("filenames", required=False),
        )
