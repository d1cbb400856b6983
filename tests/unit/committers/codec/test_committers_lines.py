"""The line-at-a-time pendingset decoder against the incremental scanner: the writer's
layout is decoded without the scanner, and on any input, valid or corrupt, both give the
same records and header or the same error."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import pytest

from zerorename.committers.codec.jsonstream import (
    LayoutMismatch,
    iter_line_events,
    iter_object_stream,
)
from zerorename.committers.codec.pending import (
    PendingRecord,
    PendingSetHeader,
    parse_pendingset,
    pendingset_bytes,
    read_pendingset,
)
from zerorename.committers.errors import RecordFormatError
from zerorename.engine.results import PartInfo, PendingUpload

JOB = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"
LOC = "s3://bkt/task 3.pendingset"
KEYS = ["d/a b.csv", "d/ünï/ß€.txt", "d/p%2F+#?&=.bin", 'd/"q"\\x', "d/new\nline", "d/\u2028sep"]


def record(i: int) -> PendingRecord:
    key = f"{KEYS[i % len(KEYS)]}-{i}"
    parts = tuple(PartInfo(n, f'"{n + i:032x}"', 5 + n, f"c{n}==") for n in range(1, 2 + i % 3))
    up = PendingUpload(
        "bkt", key, f"u-{i}", parts, sum(p.size for p in parts), 1700000000.5, "CRC32C"
    )
    return PendingRecord(up, JOB, "00003", 1, saved=1700000001.0, extra={"k": "v"})


def pendingset(n: int) -> bytes:
    header = PendingSetHeader(JOB, "00003", 1, saved=1700000002.0, extra={"a": "b"})
    return pendingset_bytes(header, (record(i) for i in range(n)))


Outcome = tuple[PendingSetHeader, list[PendingRecord]] | str


def scanner(data: bytes) -> Outcome:
    """The reference: the incremental scanner (fed one chunk, so that a UTF-8 error names
    the same position)."""
    records: list[PendingRecord] = []
    try:
        for item in parse_pendingset([data], LOC, expect_job_id=JOB):
            if isinstance(item, PendingRecord):
                records.append(item)
            else:
                return item, records
    except RecordFormatError as exc:
        return f"error: {exc}"
    raise AssertionError("no header")


def lines(data: bytes) -> Outcome:
    try:
        return read_pendingset(data, LOC, expect_job_id=JOB)
    except RecordFormatError as exc:
        return f"error: {exc}"


@pytest.mark.parametrize("n", [0, 1, 2, 40])
def test_writer_layout_is_decoded_line_at_a_time(n: int) -> None:
    data = pendingset(n)
    events = list(iter_line_events(data.decode(), "commits"))  # no LayoutMismatch
    assert events == list(iter_object_stream([data], "commits"))
    header, records = lines(data)  # type: ignore[misc]
    assert [r.upload.key for r in records] == [record(i).upload.key for i in range(n)]
    assert records == [record(i) for i in range(n)] and header.extra == {"a": "b"}


def reformat(indent: int | None, separators: tuple[str, str] | None = None) -> bytes:
    return json.dumps(json.loads(pendingset(3)), indent=indent, separators=separators).encode()


OTHER_LAYOUTS: dict[str, Callable[[], bytes]] = {
    "pretty": lambda: reformat(1),
    "one line": lambda: reformat(None),
    "two on a line": lambda: pendingset(4).replace(b",\n{", b", {", 1),
    "crlf": lambda: pendingset(3).replace(b"\n", b"\r\n"),
    "members after": lambda: pendingset(2).replace(b"\n]}\n", b'\n],"more":1}\n'),
    "space before ]}": lambda: pendingset(2).replace(b"\n]}", b"\n ]}"),
    "blank lines": lambda: pendingset(2).replace(b",\n", b",\n\n"),
    "nested duplicate": lambda: pendingset(2).replace(b'"a":"b"', b'"a":"x","a":"b"', 1),
}


@pytest.mark.parametrize("name", sorted(OTHER_LAYOUTS))
def test_other_layouts_fall_back_to_the_scanner(name: str) -> None:
    data = OTHER_LAYOUTS[name]()
    with pytest.raises(LayoutMismatch):
        list(iter_line_events(data.decode(), "commits"))
    want = scanner(data)
    assert not isinstance(want, str), want  # valid JSON: the scanner reads it
    assert lines(data) == want


CORRUPT: dict[str, Callable[[bytes], bytes]] = {
    "truncated in a record": lambda s: s[: s.rindex(b"uploadId")],
    "truncated before ]}": lambda s: s[: s.rindex(b"]}")],
    "truncated after ]": lambda s: s[: s.rindex(b"]}") + 1],
    "no comma": lambda s: s.replace(b"},\n{", b"}\n{", 1),
    "comma after last": lambda s: s.replace(b"}\n]}", b"},\n]}", 1),
    "garbage after": lambda s: s + b"x",
    "duplicate member": lambda s: s.replace(b'"taskId":"00003",', b'"taskId":"0","taskId":"1",', 1),
    "commits twice": lambda s: s.replace(b'"version":3,', b'"version":3,"commits":[],', 1),
    "bad version": lambda s: s.replace(b'"version":3,', b'"version":7,', 1),
    "other job": lambda s: s.replace(JOB.encode(), b"11111111-2222-4333-8444-555555555555", 1),
    "bad record": lambda s: s.replace(b'"uploadId"', b'"uploadID"', 2),
    "record not an object": lambda s: s.replace(b"\n{", b"\n[1],\n{", 1),
    "not utf-8": lambda s: s.replace(b"\xc3\xbc", b"\xc3", 1),
    "utf-16": lambda s: s.decode().encode("utf-16"),
    "empty": lambda s: b"",
    "no commits": lambda s: s[: s.index(b',"commits"')] + b"}",
}


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_corrupt_input_gives_the_scanners_error(name: str) -> None:
    data = CORRUPT[name](pendingset(4))
    want = scanner(data)
    assert isinstance(want, str) and LOC in want, want
    assert lines(data) == want


def test_random_damage_gives_the_same_outcome_as_the_scanner() -> None:
    rng = random.Random(20240611)
    whole = pendingset(6)
    alphabet = b'{}[],:"\n \\x1'
    for _ in range(600):
        data = bytearray(whole)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(max(1, len(data)))
            what = rng.random()
            if what < 0.3 or not data:
                del data[at:]
            elif what < 0.6:
                data[at] = rng.choice(alphabet)
            elif what < 0.8:
                data.insert(at, rng.choice(alphabet))
            else:
                del data[at]
        got, want = lines(bytes(data)), scanner(bytes(data))
        assert got == want, bytes(data)
