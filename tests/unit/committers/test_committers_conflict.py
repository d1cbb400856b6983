"""Conflict plans for fail/append/replace per destination or per touched partition."""

from __future__ import annotations

import json

import pytest

from zerorename.committers.conflict import (
    ConflictMode,
    ConflictScope,
    OldObject,
    is_foreign,
    parse_replace_plan,
    plan_conflicts,
    replace_plan_record,
    still_planned,
)
from zerorename.committers.errors import CommitterConfigError, PathError, RecordFormatError
from zerorename.committers.paths import Destination

JOB = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"
DEST = Destination.parse("s3://bkt/tables/t 1")


def test_parse_modes() -> None:
    assert ConflictMode.parse("FAIL") is ConflictMode.FAIL
    assert ConflictMode.parse(ConflictMode.APPEND) is ConflictMode.APPEND
    with pytest.raises(CommitterConfigError, match="conflict mode"):
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
    # the id elsewhere than the file name's slot does not make an object this job's
    assert is_foreign(DEST, f"tables/t 1/run={JOB}/old.csv", JOB)
    assert is_foreign(DEST, f"tables/t 1/rerun-of-{JOB}-b.csv", JOB)
    assert is_foreign(DEST, f"tables/t 1/x-{JOB}-draft.csv", JOB)


PREFIXES = ("tables/t 1/",)


def test_replace_plan_round_trips_and_checks_every_entry() -> None:
    old = [OldObject("tables/t 1/old.csv", "abc"), OldObject("tables/t 1/ü #1.csv", "d-2")]
    data = replace_plan_record(old)
    assert parse_replace_plan(data, "loc", DEST, JOB, PREFIXES) == old
    bad_entries = [
        {"key": f"tables/t 1/new-{JOB}.csv", "etag": "e"},  # this job's own file
        {"key": "tables/t 10/old.csv", "etag": "e"},  # a sibling destination
        {"key": "tables/t 1/__magic_job-x/job.json", "etag": "e"},  # a record
        {"key": "elsewhere/old.csv", "etag": "e"},
        {"key": "", "etag": "e"},
        {"key": 3, "etag": "e"},
        {"key": "tables/t 1/a", "etag": None},
        {"key": "tables/t 1/a"},
        ["tables/t 1/a", "e"],
    ]
    for entry in bad_entries:
        doc = json.dumps({"version": 1, "objects": [{"key": "tables/t 1/a", "etag": "e"}, entry]})
        with pytest.raises(RecordFormatError, match="loc"):
            parse_replace_plan(doc.encode(), "loc", DEST, JOB, PREFIXES)
    for doc_text in ("", "[]", '{"version": 2, "objects": []}', '{"version": 1}', "[" * 10**5):
        with pytest.raises(RecordFormatError):
            parse_replace_plan(doc_text.encode(), "loc", DEST, JOB, PREFIXES)
    # a partition plan: only entries under the touched partitions
    with pytest.raises(RecordFormatError):
        parse_replace_plan(data, "loc", DEST, JOB, ("tables/t 1/y=1/",))


def test_only_the_planned_version_of_an_object_is_deleted() -> None:
    planned = {"tables/t 1/old.csv": "abc"}
    assert still_planned(planned, "tables/t 1/old.csv", '"abc"')
    assert not still_planned(planned, "tables/t 1/old.csv", '"rewritten"')
    assert not still_planned(planned, "tables/t 1/late.csv", '"abc"')
    assert not still_planned({"k": ""}, "k", "")
