"""The ``awscrt`` and ``floor`` clients of the perf harness, at tiny sizes on real servers.

Smoke tests (no figure is compared with a time or a rate): every run is verified by the
client's own check (size, and the part count in the ETag), the floor row is there, and the
``cpu_x_floor`` column is each sample's CPU over the median of this run's floor samples.
awscrt is in the ``perf`` extra, not ``dev``: where it is not installed the runs check
the one-line note that says it was skipped (its figures need it installed).
"""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path
from typing import Any

import pytest
from test_perf_harness import TINY, check_doc, perf

AWSCRT = importlib.util.find_spec("awscrt") is not None
SKIPPED = "awscrt: not installed here (pip install awscrt): skipped"


def check_floor(doc: dict[str, Any], metric: str) -> None:
    """The floor ran and was verified; every sample's cpu_x_floor is its ``metric`` over
    the floor's median in the same run; the table shows the column."""
    floor = [s["metrics"][metric] for s in doc["samples"] if s["client"] == "floor"]
    assert floor and all(v > 0 for v in floor)
    for s in doc["samples"]:
        want = s["metrics"][metric] / statistics.median(floor)
        assert s["metrics"]["cpu_x_floor"] == pytest.approx(want), s
    assert "cpu_x_floor" in doc["_stdout"]
    assert not any(r["metric"] == "cpu_x_floor" for r in doc["ratios"])  # no ratio of ratios


def check_awscrt(doc: dict[str, Any], trailer: float = 1.0) -> None:
    """awscrt ran (its checksum in a trailer, or in a header where the store refuses
    trailers), or the note says it was skipped."""
    clients = {s["client"] for s in doc["samples"]}
    if AWSCRT:
        assert [s["metrics"]["trailer"] for s in doc["samples"] if s["client"] == "awscrt"] == [
            trailer
        ]
        assert any(n.startswith("awscrt: awscrt.s3.S3Client") for n in doc["notes"])
        assert {(r["client"], r["baseline"]) for r in doc["ratios"]} >= {("zerorename", "awscrt")}
    else:
        assert "awscrt" not in clients and SKIPPED in doc["notes"]


#: the upload over HTTP (sendfile) and HTTPS (ssl, trailers) on the sink; moto over HTTPS
#: (its TLS front; its trailing checksums are checked); RGW: test_rgw_upload below
UPLOADS = [("sink", False), ("sink", True), ("moto", True)]


@pytest.mark.parametrize(("target", "tls"), UPLOADS)
def test_upload_awscrt_and_floor(target: str, tls: bool, tmp_path: Path) -> None:
    args = ["upload", "--target", target, "--reps", "1", *TINY["upload"]]
    args += [*(["--tls"] if tls else []), "--clients", "zerorename,awscrt,floor"]
    doc = perf(args, tmp_path)
    check_doc(doc, "upload", reps=1)
    assert doc["failures"] == []
    check_floor(doc, "cpu_s_per_gib")
    check_awscrt(doc)
    (floor,) = [s["metrics"] for s in doc["samples"] if s["client"] == "floor"]
    if tls:  # both parts read once and sent with a trailing checksum, as the engine's
        assert floor["trailer_bodies"] == 2
    else:
        assert "trailer_bodies" not in floor


@pytest.mark.rgw
def test_rgw_upload(tmp_path: Path) -> None:
    """RGW over HTTPS: the floor's parts go the way the store takes them (RGW pacific
    refuses trailers: then two passes), and the object is whole."""
    args = ["upload", "--target", "rgw", "--tls", "--rgw-store", "memstore", "--reps", "1"]
    doc = perf([*args, *TINY["upload"], "--clients", "zerorename,awscrt,floor"], tmp_path)
    check_doc(doc, "upload", reps=1)
    check_floor(doc, "cpu_s_per_gib")
    check_awscrt(doc, trailer=0.0)  # RGW pacific refuses aws-chunked trailers


def test_many_awscrt_and_a_source_the_floor_cannot_read(tmp_path: Path) -> None:
    """awscrt in 'many' (no floor there); the upload from memory skips the floor in a note."""
    args = ["many", "--target", "sink", "--reps", "1", *TINY["many"]]
    doc = perf([*args, "--clients", "zerorename,awscrt"], tmp_path)
    check_doc(doc, "many", reps=1)
    check_awscrt(doc)
    args = ["upload", "--target", "sink", "--reps", "1", *TINY["upload"], "--source", "memory"]
    doc = perf([*args, "--clients", "zerorename,awscrt,floor"], tmp_path)
    assert "floor" not in {s["client"] for s in doc["samples"]}
    assert "floor: measured from a file only (--source file): skipped" in doc["notes"]
    check_awscrt(doc)


def test_commit_floor_column_on_the_sink(tmp_path: Path) -> None:
    args = ["commit", "--target", "sink", "--reps", "1", "--uploads", "20", "--pendingsets", "2"]
    doc = perf([*args, "--prepare-concurrency", "8", "--clients", "zerorename,floor"], tmp_path)
    check_doc(doc, "commit", reps=1)
    check_floor(doc, "cpu_ms_per_complete")
    assert any(n.startswith("floor (commit): ") for n in doc["notes"])
