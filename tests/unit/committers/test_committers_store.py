"""Pure helpers of the store layer: multipart ETags, 'is this our completed object',
record checks, exception-group unwrapping."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from zerorename.aio import first_error
from zerorename.committers.codec.pending import PendingRecord
from zerorename.committers.errors import RecordFormatError
from zerorename.committers.paths import Destination
from zerorename.committers.store import Check, check_record, is_ours
from zerorename.engine.results import (
    ObjectInfo,
    PartInfo,
    PendingUpload,
    is_completed_object,
    multipart_etag,
    unproven_reason,
)

JOB = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"
DEST = Destination.parse("s3://bkt/t")


def up(key: str = f"t/y=1/f-{JOB}.csv", etags: tuple[str, ...] = ()) -> PendingUpload:
    etags = etags or (hashlib.md5(b"a").hexdigest(), hashlib.md5(b"b").hexdigest())
    parts = tuple(PartInfo(i + 1, f'"{e}"', 5) for i, e in enumerate(etags))
    return PendingUpload("bkt", key, "u", parts, 5 * len(parts))


def test_multipart_etag_matches_s3s_rule() -> None:
    u = up()
    want = hashlib.md5(hashlib.md5(b"a").digest() + hashlib.md5(b"b").digest()).hexdigest()
    assert multipart_etag(u) == f"{want}-2"
    assert multipart_etag(up(etags=("not-md5",))) is None


def test_is_completed_object() -> None:
    u = up()
    good = ObjectInfo("bkt", u.key, 10, f'"{multipart_etag(u)}"', 0.0)
    assert is_completed_object(u, good)
    assert not is_completed_object(u, None)
    assert not is_completed_object(u, ObjectInfo("bkt", u.key, 11, good.etag, 0.0))
    assert not is_completed_object(u, ObjectInfo("bkt", u.key, 10, '"abc-2"', 0.0))
    # a same-size object whose ETag is not a multipart one (another writer's single PUT)
    # proves nothing: it is never taken for ours (issue 20, finding 6)
    assert not is_completed_object(u, ObjectInfo("bkt", u.key, 10, '"0123"', 0.0))


def test_is_ours_only_on_proof_for_every_check() -> None:
    u = up()
    exact = ObjectInfo("bkt", u.key, 10, f'"{multipart_etag(u)}"', 0.0)
    plain = ObjectInfo("bkt", u.key, 10, f'"{hashlib.md5(b"x").hexdigest()}"', 0.0)  # a PUT
    wrong = ObjectInfo("bkt", u.key, 10, '"abc-2"', 0.0)  # another upload's parts
    short = ObjectInfo("bkt", u.key, 9, exact.etag, 0.0)
    for why in Check:
        assert is_ours(u, exact, why)
        for other in (plain, wrong, short, None):
            assert not is_ours(u, other, why)
    # part ETags that are not MD5s (encrypted stores): nothing can be proven, nothing is ours
    kms = up(etags=("kms-part-1", "kms-part-2"))
    assert not any(is_ours(kms, ObjectInfo("bkt", kms.key, 10, '"x-2"', 0.0), w) for w in Check)
    assert "not MD5s" in unproven_reason(kms, ObjectInfo("bkt", kms.key, 10, '"x-2"', 0.0))
    assert "another writer's" in unproven_reason(u, plain)
    assert unproven_reason(u, None) == "no object is at the key"


def test_check_record() -> None:
    ok = PendingRecord(up(), JOB, "t", 0)
    check_record(ok, DEST, JOB, "loc", partitioned=True)
    bad = [
        PendingRecord(up(key=f"t10/f-{JOB}.csv"), JOB, "t", 0),  # sibling destination
        PendingRecord(up(key="t/y=1/f.csv"), JOB, "t", 0),  # no job id in key
        PendingRecord(up(key=f"t/y={JOB}/f.csv"), JOB, "t", 0),  # only in a directory
        PendingRecord(up(key=f"t/y=1/f-{JOB}-x.csv"), JOB, "t", 0),  # not in the slot
        PendingRecord(up(), "11111111-2222-4333-8444-555555555555", "t", 0),
    ]
    for rec in bad:
        with pytest.raises(RecordFormatError, match="loc"):
            check_record(rec, DEST, JOB, "loc", partitioned=False)
    flat = PendingRecord(up(key=f"t/f-{JOB}.csv"), JOB, "t", 0)
    check_record(flat, DEST, JOB, "loc", partitioned=False)
    with pytest.raises(RecordFormatError):
        check_record(flat, DEST, JOB, "loc", partitioned=True)


def test_first_error_prefers_real_failures() -> None:
    cancel = asyncio.CancelledError
    err = KeyError("k")
    group = BaseExceptionGroup("g", [cancel(), ExceptionGroup("inner", [err])])
    assert first_error(group) is err
    assert first_error(err) is err
