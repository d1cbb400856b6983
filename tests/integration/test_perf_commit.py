"""The ``commit`` perf scenario on real servers: each client's measured function, run in a
child process as the harness runs it, at a tiny size (no wall-clock assertions)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from perf_helpers import perf_target, run_observed
from zerorename.perf.model import Run, Sample, Target, run_in_child
from zerorename.perf.opentarget import TargetError, open_target
from zerorename.perf.scenarios.commit import scenario as cs
from zerorename.perf.scenarios.commit import verify as cv
from zerorename.servers.targets import S3Target

N, SETS = 40, 4
#: what the zerorename run loads (boto3 for its verification, after the measurement)
OURS = ["aiobotocore", "boto3", "zerorename.committers", "zerorename.engine"]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cs.add_arguments(parser)
    return parser.parse_args(list(argv))


def params_for(client: str, target: Target, **extra: Any) -> tuple[str, dict[str, Any]]:
    args = parse("--uploads", str(N), "--pendingsets", str(SETS), "--clients", client)
    (run,) = cs.plan(args, target)
    return run.func, {**run.params, **extra}


def listing(s3: S3Target) -> tuple[list[dict[str, Any]], int]:
    """(objects, pending uploads) under the test's prefix."""
    c = s3.boto3_client()
    objs = [
        o
        for page in c.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix=s3.prefix)
        for o in page.get("Contents", [])
    ]
    ups = c.list_multipart_uploads(Bucket=s3.bucket, Prefix=s3.prefix).get("Uploads", [])
    return objs, len(ups)


def check_client(s3: S3Target, client: str, *, not_kept: bool) -> None:
    """A kept run (the objects checked, then the scenario's cleanup); with ``not_kept``
    also a run that deletes everything it wrote (``_measure``'s own cleanup, the same
    for every client)."""
    target = perf_target(s3)
    # kept: the objects are there, then the scenario's cleanup removes them
    func, params = params_for(client, target, keep=True)
    m, loaded = run_observed(func, target, params)
    # a baseline's child loads boto3 alone: its peak RSS and CPU are never the engine's
    # (the floor builds its requests with the engine's XML helper, before measuring)
    baseline = ["boto3", "zerorename.engine"] if client == "floor" else ["boto3"]
    assert loaded == (baseline if client != "zerorename" else OURS), loaded
    assert m["verified"] == 1.0
    assert m["uploads"] == N
    assert m["completes_s"] > 0 and m["commit_s"] > 0
    assert m["cpu_ms_per_complete"] > 0
    assert m["peak_rss_mib"] >= m["base_rss_mib"] > 0
    objs, pending = listing(s3)
    data = [o for o in objs if "__magic_job-" not in o["Key"] and not o["Key"].endswith("_SUCCESS")]
    assert len(data) == N and {o["Size"] for o in data} == {1024}
    assert pending == 0
    prefixes = {o["Key"].rsplit("/", 1)[0] for o in data}
    assert len(prefixes) == 1 and f"/{cs.NAME}/{client}-" in prefixes.pop() + "/"
    if client == "zerorename":  # the job commit wrote _SUCCESS and deleted its records
        assert any(o["Key"].endswith("/_SUCCESS") for o in objs)
        assert not any("__magic_job-" in o["Key"] for o in objs)
    run_prefix = data[0]["Key"].rsplit("/", 1)[0] + "/"
    assert cv.cleanup(s3.boto3_client(), s3.bucket, run_prefix) == len(objs)
    assert listing(s3) == ([], 0)
    if not_kept:  # the run deletes everything it wrote
        func, params = params_for(client, target)
        assert run_in_child(func, target, params)["verified"] == 1.0
        assert listing(s3) == ([], 0)


@pytest.fixture(scope="module")
def sink() -> Iterator[Target]:
    """The harness's sink target (its own process: the server's CPU is not this one's)."""
    with open_target("sink") as target:
        yield target


def test_a_commit_of_600_uploads_in_12_pendingsets_stays_small(sink: Target) -> None:
    """The job commit runs in a fresh process (the scenario's measured child) whose peak
    RSS stays far under the product goal of 200 MiB, reports its progress, and leaves no
    object or multipart upload behind once the run cleans up. On the sink: the claim is
    the client's (its memory, its progress, its cleanup), and the sink keeps and lists what
    it is sent as any store does, at a fraction of moto's CPU per request (600 uploads
    prepared, completed, listed and deleted)."""
    args = parse("--uploads", "600", "--pendingsets", "12", "--clients", "zerorename")
    (run,) = cs.plan(args, sink)
    m = run_in_child(run.func, sink, run.params)
    assert m["verified"] == 1.0 and m["uploads"] == 600
    assert m["peak_rss_mib"] < 200
    assert m["progress_reports"] >= 1 and m["max_progress_gap_s"] > 0
    c = sink.boto3_client()
    assert c.list_objects_v2(Bucket=sink.bucket, Prefix=sink.prefix).get("Contents", []) == []
    assert c.list_multipart_uploads(Bucket=sink.bucket, Prefix=sink.prefix).get("Uploads", []) == []


#: the run that deletes what it wrote: on moto the latency test's runs (zerorename and
#: boto3-64) are such runs, followed by an empty listing (and the 600-upload run on the
#: sink); on RGW one, by a client that leaves the job's records for the cleanup (boto3
#: only completes)
NOT_KEPT = {"rgw": "boto3-15"}


#: boto3-64 is boto3-15's function with 64 threads: it runs on moto in the latency test
#: below (verified, its prefix deleted after), as zerorename and boto3-15 run on each server
ON_SERVERS = ("zerorename", "boto3-15", "floor")


@pytest.mark.parametrize("client", ON_SERVERS)
def test_client_on_moto(moto_s3: S3Target, client: str) -> None:
    check_client(moto_s3, client, not_kept=NOT_KEPT.get("moto") == client)


@pytest.mark.parametrize("client", ON_SERVERS)
def test_client_on_rgw(rgw_s3: S3Target, client: str) -> None:
    check_client(rgw_s3, client, not_kept=NOT_KEPT.get("rgw") == client)


def test_latency_ms_reports_each_clients_requests_and_chain(moto_s3: S3Target) -> None:
    """With --latency-ms every run's measured phase goes through the fault proxy: each run
    reports its requests and sequential requests, and the notes carry each chain."""
    target = perf_target(moto_s3)
    n = 12
    args = parse(
        "--uploads", str(n), "--pendingsets", str(n), "--latency-ms", "300",
        "--clients", "zerorename,boto3-64",
    )  # fmt: skip
    zr, b64 = cs.plan(args, target)
    assert zr.params["latency_ms"] == b64.params["latency_ms"] == 300.0
    samples = []
    for run in (zr, b64):
        m = run_in_child(run.func, target, run.params)
        assert m["verified"] == 1.0 and m["uploads"] == n
        samples.append(Sample(cs.NAME, run.client, run.params, m))
    zm, bm = samples[0].metrics, samples[1].metrics
    # the job commit reads pendingsets, completes, writes _SUCCESS and more, some of it
    # in sequence; boto3 only completes, all 12 at once (64 threads)
    assert zm["requests"] > n and 1 < zm["sequential_requests"] < zm["requests"]
    assert (bm["requests"], bm["sequential_requests"]) == (n, 1)
    text = "\n".join(cs.notes(samples, args))
    assert "--latency-ms 300: every request went through the fault proxy" in text
    zline = next(ln for ln in text.splitlines() if ln.startswith(f"  zerorename N={n}: "))
    assert f"{zm['requests']:.0f} requests (" in zline
    assert f"{zm['sequential_requests']:.0f} sequential: " in zline
    assert "CompleteMultipartUpload" in zline and "GetObject" in zline
    assert f"  boto3-64 N={n}: {n} requests ({n} CompleteMultipartUpload); 1 sequential" in text
    assert listing(moto_s3) == ([], 0)


def test_latency_ms_needs_an_http_target() -> None:
    https = Target(name="url", endpoint_url="https://s3.example.com", bucket="b")
    with pytest.raises(TargetError, match="http:// endpoints only"):
        cs.plan(parse("--latency-ms", "20"), https)
    with pytest.raises(TargetError, match="not AWS"):
        cs.plan(parse("--latency-ms", "20"), Target(name="aws", endpoint_url=None, bucket="b"))
    for bad in ("0", "-5", "x", "nan"):
        with pytest.raises(SystemExit):
            parse("--latency-ms", bad)
    (run, *_) = cs.plan(parse(), https)
    assert "latency_ms" not in run.params


def test_verify_detects_missing_wrong_size_and_leftovers(moto_s3: S3Target) -> None:
    c = moto_s3.boto3_client()
    job = "0f0e0d0c-0b0a-4908-8706-050403020100"
    prefix = moto_s3.key("run/")
    for i in range(3):
        c.put_object(Bucket=moto_s3.bucket, Key=f"{prefix}f{i}-{job}.bin", Body=b"x" * 1024)
    ok = cv.verify(c, moto_s3.bucket, prefix, expected=3, size=1024, job_id=job)
    assert ok["objects"] == 3
    with pytest.raises(cv.VerificationError, match="3 objects, expected 4"):
        cv.verify(c, moto_s3.bucket, prefix, expected=4, size=1024)
    with pytest.raises(cv.VerificationError, match="not of 2048 bytes"):
        cv.verify(c, moto_s3.bucket, prefix, expected=3, size=2048)
    with pytest.raises(cv.VerificationError, match="without the job id"):
        cv.verify(c, moto_s3.bucket, prefix, expected=3, size=1024, job_id=job[::-1])
    with pytest.raises(cv.VerificationError, match="no _SUCCESS"):
        cv.verify(c, moto_s3.bucket, prefix, expected=3, size=1024, committed_by_job=True)
    c.create_multipart_upload(Bucket=moto_s3.bucket, Key=f"{prefix}left-{job}.bin")
    with pytest.raises(cv.VerificationError, match="1 multipart uploads left"):
        cv.verify(c, moto_s3.bucket, prefix, expected=3, size=1024)
    assert cv.cleanup(c, moto_s3.bucket, prefix) == 3
    assert listing(moto_s3) == ([], 0)
    with pytest.raises(ValueError, match="must end with '/'"):
        cv.cleanup(c, moto_s3.bucket, prefix.rstrip("/"))


def test_a_failing_run_fails_with_its_cause(moto_s3: S3Target) -> None:
    """A run whose preparation cannot work (no such bucket) fails the child with that cause,
    not with the cleanup's error that follows it."""
    from zerorename.perf.model import ChildFailed

    target = perf_target(moto_s3)
    func, params = params_for("zerorename", target)
    missing = Target(**{**target.to_json(), "bucket": "zr-no-such-bucket-perf"})
    with pytest.raises(ChildFailed, match="NoSuchBucket"):
        run_in_child(func, missing, params)


# --- plan, notes, plot (no server) ----------------------------------------------------------


def test_plan_defaults_and_options() -> None:
    target = Target(name="sink", endpoint_url="http://127.0.0.1:1", bucket="b")
    runs = cs.plan(parse(), target)
    assert [r.client for r in runs] == list(cs.CLIENTS)
    assert len({r.group for r in runs}) == 1
    zr, b15, b64, floor = runs
    assert zr.func.endswith(":measure_zerorename") and zr.params["batch_concurrency"] == 64
    # the floor: as many completes in flight as the engine's commit
    assert floor.func.endswith(":measure_floor") and floor.params["batch_concurrency"] == 64
    assert (b15.params["threads"], b64.params["threads"]) == (15, 64)
    for r in runs:
        assert r.params["uploads"] == 5000 and r.params["pendingsets"] == 50
        assert r.params["object_kib"] == 1 and r.params["target"] == "sink"
    runs = cs.plan(parse("--uploads", "1000,5000", "--clients", "zerorename,boto3-64"), target)
    assert [(r.client, r.params["uploads"]) for r in runs] == [
        ("zerorename", 1000),
        ("boto3-64", 1000),
        ("zerorename", 5000),
        ("boto3-64", 5000),
    ]
    assert len({r.group for r in runs}) == 2
    # fewer uploads than pendingsets: one upload per task
    (run,) = cs.plan(parse("--uploads", "3", "--clients", "zerorename"), target)
    assert run.params["pendingsets"] == 3
    for bad in (["--clients", "boto3-7"], ["--uploads", "0"], ["--object-kib", "6000"]):
        with pytest.raises(SystemExit):
            parse(*bad)


def test_every_option_has_a_default_in_its_help() -> None:
    parser = argparse.ArgumentParser()
    cs.add_arguments(parser)
    for action in parser._actions:
        if action.dest != "help":
            assert action.help and "default" in action.help, action.dest


def fake_samples() -> list[Sample]:
    target = Target(name="moto", endpoint_url=None, bucket="b")
    out = []
    for n in (1000, 5000):
        for run in cs.plan(parse("--uploads", str(n)), target):
            for rep in range(3):
                metrics = {
                    "completes_s": 1000.0 + 100 * rep + (500 if run.client == "zerorename" else 0),
                    "peak_rss_mib": 80.0 + rep,
                    "base_rss_mib": 60.0,
                    "verified": 1.0,
                    "prepare_s": 2.0,
                }
                out.append(Sample(cs.NAME, run.client, run.params, metrics, rep))
    return out


def test_notes_and_plot(tmp_path: Path) -> None:
    samples = fake_samples()
    args = parse("--uploads", "1000,5000")
    text = "\n".join(cs.notes(samples, args))
    assert "verified on moto" in text and "zerorename N=5000: 3/3" in text
    assert "boto3-15 N=1000: 3/3" in text
    assert "peak RSS 81 MiB median, 82 max" in text
    assert cs.notes([], args) == []
    png = tmp_path / "commit.png"
    cs.plot(samples, args, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    one = tmp_path / "one.png"
    cs.plot([s for s in samples if s.params["uploads"] == 5000], parse(), str(one))
    assert one.stat().st_size > 0


def test_runs_are_plain_json() -> None:
    import json

    runs: list[Run] = cs.plan(parse(), Target(name="x", endpoint_url=None, bucket="b"))
    for r in runs:
        assert json.loads(json.dumps(r.params)) == r.params


def test_clients_keep_their_order() -> None:
    assert cs._order(iter(["x", "boto3-64", "zerorename", "boto3-64"])) == [
        "zerorename",
        "boto3-64",
        "x",
    ]


def test_ratios_rate_the_commit_only() -> None:
    assert set(cs.RATIO_METRICS) == {
        "completes_s",
        "commit_s",
        "cpu_ms_per_complete",
        "peak_rss_mib",
    }
