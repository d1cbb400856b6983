"""Conflict plans for fail/append/replace per destination or per touched partition."""

from __future__ import annotations

import pytest

from zerorename.committers.conflict import (
    ConflictMode,
    ConflictScope,
    is_foreign,
    plan_conflicts,
)
from zerorename.committers.errors import PathError
from zerorename.committers.paths import Destination

JOB = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"
DEST = Destination.parse("s3://b/tables/t 1")


def test_parse_modes() -> None:
    assert ConflictMode.parse("FAIL") is ConflictMode.FAIL
    assert ConflictMode.parse(ConflictMode.APPEND) is ConflictMode.APPEND
    with pytest.raises(PathError):
        ConflictMode.parse("overwrite-ish")


def test_fail_destination_checks_whole_destination_with_if_none_match() -> None:
    p = plan_conflicts(ConflictMode.FAIL, ConflictScope.DESTINATION, DEST, ["y=1"])
    assert p.check_prefixes == ("tables/t 1/",)
    assert p.replace_prefixes == ()
    assert p.if_none_match
    assert not p.needs_partitions


def test_partition_scope_uses_touched_partitions_only() -> None:
    p = plan_conflicts(
        ConflictMode.FAIL, ConflictScope.PARTITIONS, DEST, ["y=2/m=1", "y=1", "y=2/m=1/"]
    )
    assert p.check_prefixes == ("tables/t 1/y=1/", "tables/t 1/y=2/m=1/")
    assert p.needs_partitions
    r = plan_conflicts(ConflictMode.REPLACE, ConflictScope.PARTITIONS, DEST, ["y=1"])
    assert r.replace_prefixes == ("tables/t 1/y=1/",) and r.check_prefixes == ()
    assert not r.if_none_match
    a = plan_conflicts(ConflictMode.APPEND, ConflictScope.PARTITIONS, DEST, ["y=1"])
    assert a.check_prefixes == a.replace_prefixes == () and not a.needs_partitions
    with pytest.raises(PathError):
        plan_conflicts(ConflictMode.REPLACE, ConflictScope.PARTITIONS, DEST, ["", "y=1"])


def test_replace_destination() -> None:
    p = plan_conflicts(ConflictMode.REPLACE, ConflictScope.DESTINATION, DEST)
    assert p.replace_prefixes == ("tables/t 1/",)


def test_foreign_objects() -> None:
    assert is_foreign(DEST, "tables/t 1/old.csv", JOB)
    assert is_foreign(DEST, "tables/t 1/_SUCCESS", JOB)
    assert not is_foreign(DEST, f"tables/t 1/new-{JOB}.csv", JOB)
    assert not is_foreign(DEST, "tables/t 1/__magic_job-x/job.json", JOB)
    assert not is_foreign(DEST, "tables/t 10/old.csv", JOB)  # outside: never touched
