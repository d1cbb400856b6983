"""Checks a job commit runs on every record before acting on it (invariant 7): strict JSON,
typed fields with ranges, a plan that names only the job's own pendingsets, uploads that
obey the task-side output rules, and no upload twice. Pure: no I/O, no event loop.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterable
from typing import Any, Protocol

from zerorename.committers.codec.jsonstream import DECODE_ERRORS, STRICT_DECODER
from zerorename.committers.errors import PathError, RecordFormatError
from zerorename.committers.paths import Destination, check_relative_path
from zerorename.engine.results import PendingUpload


class HasUpload(Protocol):
    """A record naming one upload (a ``PendingRecord``; kept structural so this module
    does not import the records it checks)."""

    @property
    def upload(self) -> PendingUpload: ...


#: the largest integer a record field may hold (sizes, counts, millisecond timestamps)
MAX_INT = 2**63 - 1
#: the latest timestamp a record may hold (9999-12-31T23:59:59Z, in seconds)
MAX_TIME = 253402300799.0


def load_json(data: bytes | str, what: str, location: str) -> Any:
    """Decode a record's JSON: UTF-8, plain JSON; every failure (bad bytes, NaN, 1e400, a
    too long integer, too deep nesting) is a RecordFormatError naming ``location``."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
    except UnicodeDecodeError as exc:
        raise RecordFormatError(f"{what} is not UTF-8: {exc}", location=location) from None
    try:
        return STRICT_DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise RecordFormatError(
            f"{what} is not valid JSON (corrupt or truncated?): {exc}", location=location
        ) from None
    except RecursionError:
        raise RecordFormatError(f"{what} is nested too deeply", location=location) from None
    except DECODE_ERRORS as exc:
        raise RecordFormatError(
            f"{what} holds a value no record may hold: {exc}", location=location
        ) from None


class Fields:
    """Typed access to a record's members: each getter checks type and range and raises
    a RecordFormatError that names the record, the field and why."""

    def __init__(self, d: Any, what: str, location: str) -> None:
        if not isinstance(d, dict):
            raise RecordFormatError(f"{what} is malformed: not a JSON object", location=location)
        self.d: dict[str, Any] = d
        self.what = what
        self.location = location

    def fail(self, name: str, why: str) -> RecordFormatError:
        return RecordFormatError(f"{self.what} is malformed: {name}: {why}", location=self.location)

    def _get(self, name: str, default: Any, required: bool) -> Any:
        if name not in self.d:
            if required:
                raise self.fail(name, "missing")
            return default
        return self.d[name]

    def str_(
        self, name: str, *, required: bool = True, default: str = "", empty: bool = False
    ) -> str:
        v = self._get(name, default, required)
        if not isinstance(v, str):
            raise self.fail(name, f"must be a string, not {type(v).__name__}")
        if not v and not empty:
            raise self.fail(name, "must not be empty")
        return v

    def opt_str(self, name: str) -> str | None:
        v = self._get(name, None, False)
        if v is not None and not isinstance(v, str):
            raise self.fail(name, f"must be a string or null, not {type(v).__name__}")
        return v

    def int_(
        self,
        name: str,
        *,
        lo: int = 0,
        hi: int = MAX_INT,
        required: bool = True,
        default: int = 0,
    ) -> int:
        v = self._get(name, default, required)
        if type(v) is not int:
            raise self.fail(name, f"must be an integer, not {type(v).__name__}")
        if not lo <= v <= hi:
            raise self.fail(name, f"{v} is outside {lo}..{hi}")
        return v

    def time_(self, name: str, *, required: bool = True, default: float = 0.0) -> float:
        """Seconds since the epoch (an integer or a finite float) up to year 9999."""
        v = self._get(name, default, required)
        if type(v) not in (int, float):
            raise self.fail(name, f"must be a number, not {type(v).__name__}")
        if not (0 <= v <= MAX_TIME and math.isfinite(v)):  # a long int compares exactly
            raise self.fail(name, f"{v!r} is not a time between 1970 and 9999")
        return float(v)

    def str_list(self, name: str, *, required: bool = True, most: int | None = None) -> list[str]:
        v = self._get(name, [], required)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.fail(name, "must be a list of strings")
        if most is not None and len(v) > most:
            raise self.fail(name, f"holds {len(v)} entries, at most {most} allowed")
        return list(v)

    def str_map(self, name: str) -> dict[str, str]:
        v = self._get(name, {}, False)
        if v is None:
            return {}
        if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
            raise self.fail(name, "must map strings to strings")
        return dict(v)

    def choice(self, name: str, allowed: Iterable[str]) -> str:
        v = self.str_(name)
        options = sorted(allowed)
        if v not in options:
            raise self.fail(name, f"{v!r} is not one of {options}")
        return v


def malformed(
    name: str, what: str, exc: RecordFormatError, dest_uri: str, job_id: str
) -> RecordFormatError:
    """A bad job record (``what`` as its parser names it) as one line: which record of
    which job, the field and why, and what to do."""
    where = exc.location
    detail = exc.detail.removeprefix(f"{what} ")
    err = RecordFormatError(
        f"{name} of job {job_id} {detail}; nothing was changed: inspect it with "
        f"`zerorename inspect {where}` or abort the job with "
        f"`zerorename jobs abort {dest_uri} {job_id}`"
    )
    err.location = where
    return err


def check_output_key(rec: HasUpload, dest: Destination, location: str) -> str:
    """An upload a job commit may complete lands where a task may write: the
    destination's bucket, under its prefix, at a path the task-side rules accept (no
    empty/'.'/'..' segment, nothing in any ``__magic*`` directory, no ``__base``, no
    record suffix, not the root ``_SUCCESS``). Returns the relative path."""
    u = rec.upload
    rel = dest.rel(u.key) if u.bucket == dest.bucket else None
    if rel is None:
        raise RecordFormatError(
            f"upload {u.uri} is outside the destination {dest.uri}", location=location
        )
    try:
        check_relative_path(rel)
    except PathError as exc:
        raise RecordFormatError(
            f"upload {u.uri} is not a path a task may write: {exc}", location=location
        ) from None
    return rel


class Fingerprints:
    """A set of 64-bit fingerprints in one flat array (open addressing, 16 bytes per
    entry at most): remembers every upload of a commit in far less memory than the
    keys themselves, so the duplicate check does not hold the pendingsets."""

    _EMPTY = 0

    def __init__(self, capacity: int = 1024) -> None:
        size = 1 << max(4, (capacity * 2 - 1).bit_length())
        self._slots = array("Q", bytes(8 * size))
        self._mask = size - 1
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, fp: int) -> bool:
        """Add ``fp``; False when it was there already."""
        fp = (fp & 0xFFFFFFFFFFFFFFFF) or 1
        slots, mask = self._slots, self._mask
        i = fp & mask
        while True:
            v = slots[i]
            if v == fp:
                return False
            if v == self._EMPTY:
                slots[i] = fp
                self._count += 1
                if self._count * 2 > len(slots):
                    self._grow()
                return True
            i = (i + 1) & mask

    def _grow(self) -> None:
        old = self._slots
        size = len(old) * 2
        self._slots = array("Q", bytes(8 * size))
        self._mask = size - 1
        self._count = 0
        for v in old:
            if v != self._EMPTY:
                self.add(v)


class UploadSet:
    """The uploads of one commit seen so far: the same upload id or the same destination
    key twice (in one pendingset or across them) is a record error. Fingerprints are the
    process's string hashes, so a false alarm is possible with odds of about n^2 / 2^65."""

    def __init__(self) -> None:
        self._seen = Fingerprints()

    def add(self, rec: HasUpload, location: str) -> None:
        u = rec.upload
        if not self._seen.add(hash(("key", u.bucket, u.key))):
            raise RecordFormatError(
                f"upload {u.uri} appears twice in the job's pendingsets (a destination key "
                f"is completed once): remove the duplicate or abort the job",
                location=location,
            )
        if not self._seen.add(hash(("id", u.upload_id))):
            raise RecordFormatError(
                f"upload id {u.upload_id!r} of {u.uri} appears twice in the job's "
                f"pendingsets: remove the duplicate or abort the job",
                location=location,
            )
