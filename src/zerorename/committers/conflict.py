"""Conflict resolution: what a job commit does about objects already in the destination.

Pure decisions only; ``commit.run`` runs them. Modes (as in S3A's staging committers):

- ``fail``: refuse, before completing anything, when the destination (scope
  ``destination``) or any partition the job writes to (scope ``partitions``) holds an
  object; completes with If-None-Match so a racing writer is caught where supported.
- ``append``: add the new files; names carry the job id, so they never collide.
- ``replace``: list the older objects in the destination or in the touched partitions
  before completing anything (the replace plan, kept in the job's directory), complete
  the new files, then delete exactly the planned objects that are still the same (same
  ETag), so readers never see it empty and nothing written after the plan is lost.

Objects inside any job's ``__magic*`` directory are never counted nor deleted, and neither
are this job's own objects (the job id in their file name's slot, :func:`job_id_of_key`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from zerorename.committers.errors import CommitterConfigError, PathError, RecordFormatError
from zerorename.committers.paths import Destination, is_job_record, key_carries_job


class ConflictMode(StrEnum):
    FAIL = "fail"
    APPEND = "append"
    REPLACE = "replace"

    @classmethod
    def parse(cls, value: str | ConflictMode) -> ConflictMode:
        try:
            return cls(value.value if isinstance(value, ConflictMode) else value.lower())
        except ValueError:
            raise CommitterConfigError(
                f"conflict mode must be fail, append or replace; got {value!r}"
            ) from None


class ConflictScope(StrEnum):
    DESTINATION = "destination"
    PARTITIONS = "partitions"

    @classmethod
    def parse(cls, value: str | ConflictScope) -> ConflictScope:
        try:
            return cls(value.value if isinstance(value, ConflictScope) else value.lower())
        except ValueError:
            raise CommitterConfigError(
                f"conflict scope must be destination or partitions; got {value!r}"
            ) from None


@dataclass(frozen=True)
class ConflictPlan:
    """What to do before and after completing: prefixes to check, prefixes to clear."""

    mode: ConflictMode
    scope: ConflictScope
    #: key prefixes (ending in '/', or '' for a whole bucket) that must hold no foreign object.
    check_prefixes: tuple[str, ...]
    #: key prefixes whose foreign objects are deleted after the new files are complete.
    replace_prefixes: tuple[str, ...]
    #: complete with If-None-Match.
    if_none_match: bool

    @property
    def needs_partitions(self) -> bool:
        return self.scope is ConflictScope.PARTITIONS and self.mode is not ConflictMode.APPEND


def plan_conflicts(
    mode: ConflictMode,
    scope: ConflictScope,
    dest: Destination,
    partitions: Iterable[str] = (),
) -> ConflictPlan:
    """Build the plan; ``partitions`` are the touched partition directories (relative
    to ``dest``; only used with scope ``partitions``)."""
    if scope is ConflictScope.PARTITIONS:
        prefixes = tuple(sorted({dest.key(p.rstrip("/") + "/") for p in partitions if p}))
        if any(not p for p in partitions):
            raise PathError("partitioned conflict scope needs every file in a partition directory")
    else:
        prefixes = (dest.list_prefix,)
    if mode is ConflictMode.FAIL:
        return ConflictPlan(mode, scope, prefixes, (), True)
    if mode is ConflictMode.REPLACE:
        return ConflictPlan(mode, scope, (), prefixes, False)
    return ConflictPlan(mode, scope, (), (), False)


def is_foreign(dest: Destination, key: str, job_id: str) -> bool:
    """True when ``key`` is a data object not created by this job: it counts as a
    conflict in ``fail`` mode and is deleted in ``replace`` mode."""
    rel = dest.rel(key)
    if rel is None:
        return False
    return not is_job_record(rel) and not key_carries_job(key, job_id)


@dataclass(frozen=True)
class OldObject:
    """An older object a replace-mode commit planned to delete: its key and the ETag it
    had when listed (an object rewritten since is not the planned one and stays)."""

    key: str
    etag: str


def replace_plan_record(objects: Iterable[OldObject]) -> bytes:
    """The replace plan as stored in the job's directory (JSON)."""
    items = [{"key": o.key, "etag": o.etag} for o in objects]
    return json.dumps({"version": 1, "objects": items}, ensure_ascii=False).encode()


def _plan_entry(item: Any, location: str) -> OldObject:
    if not isinstance(item, dict) or set(item) != {"key", "etag"}:
        raise RecordFormatError("replace plan entries must be {key, etag}", location=location)
    key, etag = item["key"], item["etag"]
    if not isinstance(key, str) or not isinstance(etag, str) or not key:
        raise RecordFormatError("replace plan key and etag must be strings", location=location)
    return OldObject(key, etag)


def parse_replace_plan(
    data: bytes, location: str, dest: Destination, job_id: str, prefixes: Sequence[str]
) -> list[OldObject]:
    """Read and check a replace plan: every entry an older object (not this job's, not a
    record) under one of ``prefixes``. Any bad entry refuses the whole plan, so a record
    that fails validation deletes nothing."""
    try:
        d = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise RecordFormatError(f"replace plan is not JSON: {exc}", location=location) from None
    if not isinstance(d, dict) or d.get("version") != 1 or not isinstance(d.get("objects"), list):
        raise RecordFormatError(
            "replace plan must be {version: 1, objects: [...]}", location=location
        )
    out = [_plan_entry(item, location) for item in d["objects"]]
    for o in out:
        if not any(o.key.startswith(p) for p in prefixes) or not is_foreign(dest, o.key, job_id):
            raise RecordFormatError(
                f"replace plan names {dest.uri_of(o.key)}, not an older object where job "
                f"{job_id} replaces",
                location=location,
            )
    return out


def still_planned(planned: dict[str, str], key: str, etag: str) -> bool:
    """True when the listed object ``key`` (with ``etag`` now) is one the plan deletes."""
    return planned.get(key) == etag.strip('"') and bool(etag)
