"""Conflict resolution: what a job commit does about objects already in the destination.

Pure decisions only; ``jobcommit`` runs them. Modes (as in S3A's staging committers):

- ``fail``: refuse, before completing anything, when the destination (scope
  ``destination``) or any partition the job writes to (scope ``partitions``) holds an
  object; completes with If-None-Match so a racing writer is caught where supported.
- ``append``: add the new files; names carry the job id, so they never collide.
- ``replace``: complete the new files first, then delete the older objects in the
  destination or in the touched partitions, so readers never see it empty.

Objects inside any job's ``__magic*`` directory are never counted nor deleted, and neither
are this job's own objects (their keys carry its id).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from zerorename.committers.errors import PathError
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
            raise PathError(
                f"conflict mode must be fail, append or replace; got {value!r}"
            ) from None


class ConflictScope(StrEnum):
    DESTINATION = "destination"
    PARTITIONS = "partitions"


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
