"""Spools of pendingsets: bytes in memory up to a limit, then segments of one spill file,
read back in order; parsed the same wherever they are held."""

from __future__ import annotations

import pytest

from zerorename.committers.codec.pending import (
    PendingRecord,
    PendingSetHeader,
    pendingset_bytes,
    read_pendingset,
)
from zerorename.committers.commit import spool as spool_mod
from zerorename.committers.commit.spool import SpillFile, Spool, parse_spool
from zerorename.committers.errors import RecordFormatError
from zerorename.committers.store import READ_CHUNK
from zerorename.engine.results import PartInfo, PendingUpload

JOB = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"
LOC = "s3://bkt/x.pendingset"


def pendingset(n: int) -> bytes:
    def rec(i: int) -> PendingRecord:
        part = PartInfo(1, f'"{i:032x}"', 7)
        return PendingRecord(PendingUpload("bkt", f"d/f {i}.bin", f"u{i}", (part,), 7), JOB, "t", 0)

    return pendingset_bytes(PendingSetHeader(JOB, "t", 0), (rec(i) for i in range(n)))


def filled(spill: SpillFile, data: bytes, limit: int, chunk: int = 1000) -> Spool:
    sp = Spool(spill, memory_limit=limit)
    for i in range(0, len(data), chunk):
        sp.write(data[i : i + chunk])
    return sp


def test_spill_file_segments() -> None:
    spill = SpillFile()
    assert spill.size == 0
    a = spill.append(b"hello ")
    b = spill.append(b"world")
    assert (a, b) == ((0, 6), (6, 5))
    assert spill.read(*b) == b"world" and spill.read(*a) == b"hello "
    spill.close()
    spill.close()  # twice is fine


def test_spool_keeps_memory_until_the_limit_then_spills_everything_in_order() -> None:
    data = bytes(range(256)) * 40  # 10,240 bytes
    spill = SpillFile()
    small = filled(spill, data[:3000], limit=4096)
    assert small.in_memory and spill.size == 0
    big = filled(spill, data, limit=4096)
    assert not big.in_memory and spill.size == len(data)
    small.spill()
    assert not small.in_memory and spill.size == len(data) + 3000
    assert big.data() == data and small.data() == data[:3000]
    spill.close()


def test_spilled_chunks_come_back_in_read_sized_pieces() -> None:
    data = b"z" * (2 * READ_CHUNK + 10)
    spill = SpillFile()
    sp = filled(spill, data, limit=0, chunk=len(data))
    pieces = list(sp.chunks())
    assert [len(p) for p in pieces] == [READ_CHUNK, READ_CHUNK, 10]
    spill.close()


@pytest.mark.parametrize("where", ["memory", "spilled", "streamed"])
def test_parse_spool_gives_the_same_records_wherever_the_bytes_are(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = pendingset(30)
    header, records = read_pendingset(data, LOC, expect_job_id=JOB)
    if where == "streamed":  # larger than SPOOL_MEMORY: parsed by the incremental scanner
        monkeypatch.setattr(spool_mod, "SPOOL_MEMORY", 100)
    spill = SpillFile()
    sp = filled(spill, data, limit=len(data) if where == "memory" else 0)
    assert sp.in_memory is (where == "memory")
    assert list(parse_spool(sp, LOC, JOB)) == [*records, header]
    truncated = filled(spill, data[:-30], limit=0)
    with pytest.raises(RecordFormatError, match=r"x\.pendingset"):
        list(parse_spool(truncated, LOC, JOB))
    spill.close()
