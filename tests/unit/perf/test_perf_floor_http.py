"""The floor clients' HTTP answer reader (pure: bytes in, answer out)."""

from __future__ import annotations

import pytest

from zerorename.perf.floor import FloorError, read_answer, split_answer
from zerorename.perf.model import Sample
from zerorename.perf.report import add_floor


def test_an_answer_with_a_length_is_cut_where_it_ends() -> None:
    wire = b'HTTP/1.1 200 OK\r\nETag: "e1"\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 2'
    status, headers, body, rest = split_answer(wire) or (0, {}, b"", b"")
    assert (status, headers["etag"], body, rest) == (200, '"e1"', b"hello", b"HTTP/1.1 2")
    assert split_answer(wire[:-16]) is None  # the body is not all there yet
    assert split_answer(b"HTTP/1.1 200 OK\r\nContent-Le") is None


def test_a_chunked_answer_is_decoded() -> None:
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\n10\r\n0\r\n\r\nX"
    answer = split_answer(wire)
    assert answer is not None and answer[2:] == (b"abc10", b"X")
    assert split_answer(wire[:-6]) is None


def test_read_answer_reads_until_whole_and_refuses_a_closed_connection() -> None:
    pieces = [b"HTTP/1.1 404 Not Found\r\nContent-", b"Length: 2\r\n\r\n", b"no"]
    status, _, body, rest = read_answer(lambda n: pieces.pop(0), b"")
    assert (status, body, rest) == (404, b"no", b"")
    with pytest.raises(FloorError, match="closed"):
        read_answer(lambda n: b"", b"HTTP/1.1 200 OK\r\n")
    with pytest.raises(FloorError, match="not an HTTP answer"):
        split_answer(b"garbage\r\n\r\n")


def test_the_floor_column_divides_by_this_runs_floor() -> None:
    samples = [
        Sample("upload", c, {}, {"cpu_s_per_gib": v}, rep, "g")
        for rep, (c, v) in enumerate([("floor", 0.5), ("floor", 0.7), ("floor", 0.6), ("x", 1.8)])
    ]
    samples.append(Sample("upload", "x", {}, {"cpu_s_per_gib": 1.0}, 0, "other group"))
    add_floor(samples, "cpu_s_per_gib")
    assert samples[3].metrics["cpu_x_floor"] == pytest.approx(3.0)
    assert samples[0].metrics["cpu_x_floor"] == pytest.approx(0.5 / 0.6)
    assert "cpu_x_floor" not in samples[4].metrics  # no floor in its group
