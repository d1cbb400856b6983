"""The perf harness from its command line, every scenario at a tiny size, on real servers.

These are smoke tests of the harness (targets, child runs, JSON, plots, tables, notes),
not measurements: no figure is compared with a time or a rate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from zerorename.servers.servers import RgwServer

TINY = {
    "upload": ["--size", "6MiB", "--part-size", "5MiB", "--concurrency", "2"],
    "many": ["--count", "12", "--size", "4KiB", "--concurrency", "4"],
}


def perf(
    args: list[str], tmp_path: Path, env: dict[str, str] | None = None, *, plot: bool = False
) -> dict[str, Any]:
    """Run ``python -m zerorename.perf ARGS --json F`` (and ``--plot P`` with ``plot``: a
    PNG costs ~1.5 s of matplotlib, so the runs whose plot function is checked elsewhere
    leave it out); return the JSON document."""
    out_json, out_png = tmp_path / "out.json", tmp_path / "out.png"
    outputs = ["--json", str(out_json), *(["--plot", str(out_png)] if plot else [])]
    proc = subprocess.run(
        [sys.executable, "-m", "zerorename.perf", *args, *outputs],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert proc.returncode == 0, f"{args}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "median [min-max]" in proc.stdout
    if plot:
        assert out_png.stat().st_size > 1000 and out_png.read_bytes()[:4] == b"\x89PNG"
    doc: dict[str, Any] = json.loads(out_json.read_text())
    doc["_stdout"] = proc.stdout
    return doc


def check_doc(doc: dict[str, Any], scenario: str, reps: int) -> None:
    assert doc["scenario"] == scenario
    assert doc["versions"]["zerorename"] and doc["machine"]["cpus"] >= 1
    clients = {s["client"] for s in doc["samples"]}
    per_client = {c: [s for s in doc["samples"] if s["client"] == c] for c in clients}
    groups = {s["group"] for s in doc["samples"]}
    for c, samples in per_client.items():
        assert len(samples) == reps * len({s["group"] for s in samples}), c
        for s in samples:
            assert s["metrics"]["verified"] == 1.0, s
    # every summary row is the median of that client's samples in its group
    for row in doc["summary"]:
        values = sorted(
            s["metrics"][row["metric"]]
            for s in doc["samples"]
            if s["client"] == row["client"] and s["group"] == row["group"]
        )
        assert row["min"] == values[0] and row["max"] == values[-1]
        assert row["min"] <= row["median"] <= row["max"]
    assert groups


def check_ratios(doc: dict[str, Any], pairs: set[tuple[str, str]]) -> None:
    """Every ratio is the median of one client over the median of its baseline (the same
    run), and at least ``pairs`` are there."""
    summary = {(r["client"], r["metric"]): r["median"] for r in doc["summary"]}
    for r in doc["ratios"]:
        mine, base = summary[(r["client"], r["metric"])], summary[(r["baseline"], r["metric"])]
        assert r["ratio"] == pytest.approx(mine / base)
    assert {(r["client"], r["baseline"]) for r in doc["ratios"]} >= pairs


def test_many_against_the_sink_with_every_baseline(tmp_path: Path) -> None:
    """No --clients: every baseline runs next to ours (the defaults are the upload's but
    the floor: many_scenario.CLIENTS; the README's first perf example runs every upload
    client on the sink, test_perf_tls.py every one of them over TLS with these checks;
    awscrt and the floor: test_perf_floor.py)."""
    args = ["many", "--target", "sink", "--reps", "1", *TINY["many"]]
    doc = perf(args, tmp_path)
    check_doc(doc, "many", reps=1)
    clients = {s["client"] for s in doc["samples"]}
    assert {"zerorename", "zerorename-matched", "boto3-default", "boto3-matched"} <= clients
    assert "obstore" in clients
    check_ratios(doc, {("zerorename", "boto3-default"), ("zerorename-matched", "boto3-matched")})
    assert doc["target"]["name"] == "sink"
    assert "secret" not in json.dumps(doc["settings"]).lower()
    # no --latency-ms: no proxy in the runs, so no request count (test_perf_tune.py: with it)
    for s in doc["samples"]:
        assert "requests" not in s["metrics"] and "latency_ms" not in s["params"], s


def test_upload_against_the_sink_repeats_every_run_and_plots(tmp_path: Path) -> None:
    """The repetitions (reps samples per client, the figures their medians and ranges) and
    the bar plot are the harness's own, the same for every scenario: shown once, with the
    upload, on two clients (a ratio needs two: obstore's child is the cheapest baseline's;
    every client: the test above)."""
    args = ["upload", "--target", "sink", "--reps", "2", *TINY["upload"]]
    doc = perf([*args, "--clients", "zerorename,obstore"], tmp_path, plot=True)
    check_doc(doc, "upload", reps=2)
    assert {s["client"] for s in doc["samples"]} == {"zerorename", "obstore"}
    assert sorted(s["rep"] for s in doc["samples"]) == [0, 0, 1, 1]
    check_ratios(doc, {("zerorename", "obstore")})
    for s in doc["samples"]:
        assert "requests" not in s["metrics"] and "latency_ms" not in s["params"], s


def test_upload_against_moto(tmp_path: Path) -> None:
    """The embedded moto target over HTTP, with our client and boto3's two (whose checksums
    differ over HTTP and HTTPS); every client on moto over HTTPS: test_perf_tls.py. (The
    sweep on the sink: test_perf_tune.py, with --latency-ms.)"""
    clients = "zerorename,boto3-default,boto3-matched"
    args = ["upload", "--target", "moto", "--reps", "1", "--clients", clients]
    doc = perf([*args, *TINY["upload"]], tmp_path)
    check_doc(doc, "upload", reps=1)
    assert doc["target"]["name"] == "moto"
    assert {s["client"] for s in doc["samples"]} == set(clients.split(","))


def test_many_against_an_endpoint_url_with_credentials_from_the_environment(
    rgw_server: RgwServer, tmp_path: Path
) -> None:
    """The user's path: an endpoint URL and an existing bucket, AWS-chain credentials."""
    import boto3

    boto3.client(
        "s3",
        endpoint_url=rgw_server.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id=rgw_server.access_key,
        aws_secret_access_key=rgw_server.secret_key,
    ).create_bucket(Bucket="perf-url-target")
    env = {
        "AWS_ACCESS_KEY_ID": rgw_server.access_key,
        "AWS_SECRET_ACCESS_KEY": rgw_server.secret_key,
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    # the three ways credentials are found: the engine's (aiobotocore), boto3's, obstore's
    # (the matched clients find them as their namesakes do)
    clients = "zerorename,boto3-default,obstore"
    args = ["many", "--target", rgw_server.endpoint_url, "--bucket", "perf-url-target"]
    doc = perf([*args, "--reps", "1", "--clients", clients, *TINY["many"]], tmp_path, env)
    check_doc(doc, "many", reps=1)
    assert {s["client"] for s in doc["samples"]} == set(clients.split(","))
    assert doc["target"]["name"] == "url"
    assert rgw_server.secret_key not in json.dumps(doc) + doc["_stdout"]


def test_upload_against_an_rgw_the_harness_starts(rgw_server: RgwServer, tmp_path: Path) -> None:
    doc = perf(
        [
            *["upload", "--target", "rgw", "--reps", "1"],
            *["--clients", "zerorename,boto3-default", *TINY["upload"]],
        ],
        tmp_path,
    )
    check_doc(doc, "upload", reps=1)
    assert doc["target"]["name"] == "rgw"
    assert {s["client"] for s in doc["samples"]} == {"zerorename", "boto3-default"}


def test_bad_target_and_missing_bucket_are_clear_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """In this process (the harness's main, as ``python -m zerorename.perf`` calls it: the
    refusal comes before any child or server, so a process of its own adds nothing)."""
    from zerorename.perf.harness import main

    for args, words in (
        (["upload", "--target", "nowhere"], "unknown target 'nowhere'"),
        (["upload", "--target", "http://127.0.0.1:9"], "needs --bucket"),
    ):
        code = main(args)
        err = capsys.readouterr().err
        assert code == 1 and words in err, err
        assert len(err.strip().splitlines()) == 1, err  # one line


def test_a_run_that_times_out_is_reported_and_the_others_go_on(tmp_path: Path) -> None:
    out_json = tmp_path / "out.json"
    args = ["many", "--target", "sink", "--reps", "1", "--count", "4", "--size", "1KiB"]
    args += ["--clients", "zerorename,boto3-default", "--run-timeout", "0.01"]
    proc = subprocess.run(
        [sys.executable, "-m", "zerorename.perf", *args, "--json", str(out_json)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "2 run(s) FAILED" in proc.stdout
    doc = json.loads(out_json.read_text())
    assert {f["client"] for f in doc["failures"]} == {"zerorename", "boto3-default"}
    assert all("--run-timeout" in f["error"] for f in doc["failures"])
    assert doc["samples"] == []


def test_the_harness_loads_without_the_engine() -> None:
    """``zerorename perf`` starts without importing the engine (aiobotocore, aiohttp: ~0.7 s
    of CPU at every start), the committers or the other commands (through the command's
    entry point, ~1.1 s in all): its children import what their runs use, and the harness
    on an embedded target uses none of it (a URL target checks the engine's endpoint rule:
    the refusals in test_url_secrets.py)."""
    code = (
        "import sys; from zerorename.perf.harness import main, build_parser; build_parser(); "
        "from zerorename.perf.targets import target_problem; target_problem('sink', {}); "
        "from zerorename.cli import main; "
        "main(['perf', 'many', '--json', '/nonexistent/out.json']); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('aiobotocore', 'aiohttp', 'boto3', 'botocore') or m.startswith('zerorename.engine') "
        "or m.startswith(('zerorename.committers', 'zerorename.commands', "
        "'zerorename.cli.commands', 'zerorename.cli.jobs'))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "--json: directory /nonexistent does not exist" in proc.stderr  # the command ran
    assert proc.stdout.strip() == "[]", proc.stdout
