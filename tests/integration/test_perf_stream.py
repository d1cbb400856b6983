"""``zerorename perf stream`` on real servers at a tiny size: the runs report their
figures, a wrong destination makes a run fail instead of reporting, and behind the proxy a
batch commit is the 6 sequential requests the in-memory store test counts (no figure is
compared with a time)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from perf_helpers import perf, perf_target, run_observed
from zerorename.perf.model import ChildFailed, run_in_child
from zerorename.perf.scenarios.commit.verify import cleanup
from zerorename.perf.scenarios.stream import scenario as ss
from zerorename.servers.targets import S3Target

FIGURES = ("commit_p50_ms", "commit_p99_ms", "commit_max_ms", "batches", "files", "verified")
COUNTS = ("requests", "sequential_requests", "sequential_requests_max")


def parse(*argv: str) -> Any:
    import argparse

    parser = argparse.ArgumentParser()
    ss.add_arguments(parser)
    return parser.parse_args(list(argv))


def listing(s3: S3Target) -> tuple[list[str], list[str]]:
    """(object keys, pending upload keys) under the test's prefix."""
    c = s3.boto3_client()
    objs = [
        o["Key"]
        for page in c.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix=s3.prefix)
        for o in page.get("Contents", [])
    ]
    ups = c.list_multipart_uploads(Bucket=s3.bucket, Prefix=s3.prefix).get("Uploads", [])
    return objs, [u["Key"] for u in ups]


def runs_on(s3: S3Target, *argv: str) -> dict[str, Any]:
    target = perf_target(s3)
    args = parse("--files", "3", "--batches", "2", "--files-per-task", "2", *argv)
    return {r.client: r for r in ss.plan(args, target)}


@pytest.mark.parametrize("client", ss.CLIENTS)
def test_each_client_runs_verifies_and_leaves_nothing(moto_s3: S3Target, client: str) -> None:
    """Each client's run reports its figures, and a run deletes what it wrote (the frame
    both clients' runs share: the baseline's shows it). zerorename's run is kept, to see
    what it wrote: 3 files per batch in 2 tasks (2 + 1 files), 1 warm-up + 2 batches: 9
    files, the query's log, nothing else (no job record, no note, no pending upload)."""
    run = runs_on(moto_s3)[client]
    kept = client == "zerorename"
    m, loaded = run_observed(run.func, perf_target(moto_s3), {**run.params, "keep": kept})
    # the baseline's child loads boto3 alone (never the committers and the engine)
    assert kept or loaded == ["boto3"], loaded
    assert set(FIGURES) <= set(m) and not set(COUNTS) & set(m)
    assert (m["batches"], m["files"], m["verified"]) == (2.0, 3.0, 1.0)
    assert 0 < m["commit_p50_ms"] <= m["commit_p99_ms"] <= m["commit_max_ms"]
    if kept:
        run_prefix = kept_stream_run(moto_s3)
        assert cleanup(moto_s3.boto3_client(), moto_s3.bucket, run_prefix) == 10
    assert listing(moto_s3) == ([], [])


def kept_stream_run(s3: S3Target) -> str:
    """Check the kept run's destination (see above); its prefix."""
    keys, uploads = listing(s3)
    assert uploads == []
    data = [k for k in keys if k.endswith(".bin")]
    assert len(data) == 9
    (log_key,) = [k for k in keys if not k.endswith(".bin")]
    assert "/_zerorename_streams/" in log_key and log_key.endswith("/log.json")
    doc = json.loads(s3.boto3_client().get_object(Bucket=s3.bucket, Key=log_key)["Body"].read())
    assert doc["last_batch"] == 2 and doc["pending"] is None
    assert doc["totals"]["batches"] == 3 and doc["totals"]["files"] == 9
    return log_key.split("_zerorename_streams/")[0]


def test_a_wrong_destination_fails_the_run_instead_of_reporting(moto_s3: S3Target) -> None:
    """A pending upload left after the batches: the run reports no figure (the harness
    records it as failed) and still cleans up. The run checks what it listed (the pending
    uploads here; the objects in every run above, which would miss files otherwise) with
    stream_check.destination_problems, whose every refusal (a committed file missing, ...)
    tests/unit/perf/test_perf_stream_check.py shows without a server."""
    run = runs_on(moto_s3)["zerorename"]
    with pytest.raises(ChildFailed) as err:
        run_in_child(run.func, perf_target(moto_s3), {**run.params, "inject": "upload"})
    text = str(err.value)
    assert "StreamVerificationError" in text and "1 multipart uploads left" in text
    assert "the run's figures are not reported" in text
    assert listing(moto_s3) == ([], [])


def test_on_the_sink_behind_the_proxy_a_batch_commit_is_6_sequential_requests(
    tmp_path: Path,
) -> None:
    """The harness end to end: per files value the sink and the baseline, every figure,
    ratios, and the chains. A batch commit sends 6 requests one after another, as
    tests/unit/spark_adapter/stream/test_streaming_sink.py counts on the in-memory store:
    the append job commit's 6 rounds, the sink's requests sent with them (the log and the
    job notes read with the first, the intent with the journal, the log's commit with the journal's
    `succeeded`, the job's note deleted with the journal). The baseline: the
    completes at once, then the PUT. 600 ms per request, so requests sent together overlap
    even when a loaded machine stalls the sender between them (at 200 ms a fresh-clone run
    at load 7 counted 7 rounds in one batch: two requests sent together did not overlap)."""
    args = ["stream", "--target", "sink", "--reps", "1", "--files", "1,4"]
    doc = perf([*args, "--batches", "2", "--latency-ms", "600"], tmp_path)
    assert not doc["failures"]
    got = {(s["client"], s["params"]["files"]): s["metrics"] for s in doc["samples"]}
    assert set(got) == {(c, n) for c in ss.CLIENTS for n in (1, 4)}
    for (client, n), m in got.items():
        assert set(FIGURES) | set(COUNTS) <= set(m), (client, n)
        if client == "zerorename":
            assert m["sequential_requests"] == m["sequential_requests_max"] == 6
        else:
            assert (m["requests"], m["sequential_requests"]) == (n + 1, 2)
    # one task per file: each more file is one more pendingset read and one more complete
    assert got[("zerorename", 4)]["requests"] - got[("zerorename", 1)]["requests"] == 3 * 2
    rated = {(r["group"], r["metric"]) for r in doc["ratios"]}
    assert ("files=4", "commit_p50_ms") in rated and ("files=1", "sequential_requests") in rated
    out = doc["_stdout"]
    assert "6 sequential: GetObject > PutObject > CompleteMultipartUpload > " in out
    # the last round: the journal's delete, beside it the second listings of the job's
    # uploads and records (a straggler's late ones); the chain names one of them
    last = r"(DeleteObjects|ListObjectsV2|ListMultipartUploads)\n"
    assert re.search(r"CompleteMultipartUpload > ListObjectsV2 > DeleteObjects > " + last, out)
    assert "verified after every run" in out
