"""``zerorename put DIR s3://bucket/prefix/``: a directory as ONE job, all or nothing
(issue 25 item 4), on moto and RGW. The command runs as a user runs it (a subprocess);
the kill test SIGKILLs it at a random point, then finishes with ``jobs resume`` or
``jobs abort`` and checks that the prefix holds every file or none, and no upload."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import check_document, run, run_sub, target_env, use_target
from zerorename.servers.faultproxy import FaultProxy, FaultRule
from zerorename.servers.targets import S3Target
from zerorename.units import MiB


def make_tree(root: Path, small: int, large: int = 0) -> dict[str, bytes]:
    """``small`` small files over a few directories (names with spaces and unicode) and
    ``large`` 6 MiB files (two parts at --part-size 5m); returns rel -> content."""
    rng = random.Random(small * 1000 + large)
    files: dict[str, bytes] = {}
    for i in range(small):
        rel = f"d{i % 7}/sub {i % 3}/f ü{i}.txt" if i % 2 else f"top{i}.csv"
        files[rel] = rng.randbytes(rng.randrange(0, 2000))
    for i in range(large):
        files[f"big/blob{i}.bin"] = rng.randbytes(6 * MiB + i)
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def keyed(rel: str, job_id: str) -> str:
    """The key a job gives file ``rel`` (its job id in the name's stem)."""
    head, _, name = rel.rpartition("/")
    stem, dot, ext = name.partition(".")
    return f"{head}{'/' if head else ''}{stem}-{job_id}{dot}{ext}"


def objects(s3: S3Target, prefix: str) -> dict[str, int]:
    c = s3.boto3_client()
    out: dict[str, int] = {}
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix=prefix):
        out.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
    return out


def pending(s3: S3Target, prefix: str) -> list[str]:
    got = s3.boto3_client().list_multipart_uploads(Bucket=s3.bucket, Prefix=prefix)
    return [u["Key"] for u in got.get("Uploads", [])]


def test_a_directory_is_one_job(s3: S3Target, tmp_path: Path) -> None:
    # 48 small files: every directory of make_tree's (7 x 3 and the top), six times the
    # files uploading at once (--files 8); and two files of two parts
    files = make_tree(tmp_path / "tree", 48, 2)
    assert len({rel.rpartition("/")[0] for rel in files}) == 7 * 3 + 2
    prefix = s3.prefix + "dir"
    dest = f"s3://{s3.bucket}/{prefix}/"
    out = run_sub(s3, "put", str(tmp_path / "tree"), dest, "--part-size", "5m", "--json")
    assert out.returncode == 0, out.stderr
    doc = check_document(out.stdout)
    job = doc["jobId"]
    assert (doc["files"], doc["bytes"]) == (len(files), sum(map(len, files.values())))
    want = {f"{prefix}/{keyed(rel, job)}": len(data) for rel, data in files.items()}
    got = objects(s3, prefix + "/")
    assert got.pop(f"{prefix}/_SUCCESS") > 0
    assert got == want
    c = s3.boto3_client()
    for rel in ["big/blob0.bin", "big/blob1.bin", *random.sample(sorted(files), 5)]:
        body = c.get_object(Bucket=s3.bucket, Key=f"{prefix}/{keyed(rel, job)}")["Body"].read()
        assert body == files[rel], rel
    assert pending(s3, prefix + "/") == []
    # fail: the destination holds files now, so another upload is refused at its commit,
    # and what it had uploaded is rolled back
    make_tree(tmp_path / "more", 3)
    out = run_sub(s3, "put", str(tmp_path / "more"), dest, "--conflict", "fail")
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert "conflict" in out.stderr.lower()
    assert objects(s3, prefix + "/").keys() == {f"{prefix}/_SUCCESS", *want}
    assert pending(s3, prefix + "/") == []


def test_unsupported_entries_are_refused_before_any_upload(
    moto_s3: S3Target,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s3 = moto_s3
    tree = tmp_path / "tree"
    make_tree(tree, 5)
    os.symlink("/etc/hostname", tree / "link")
    os.mkfifo(tree / "pipe")
    (tree / "bad\x1bname").write_bytes(b"x")
    (tree / "_SUCCESS").write_bytes(b"x")
    prefix = s3.prefix + "refused"
    out = run_sub(s3, "put", str(tree), f"s3://{s3.bucket}/{prefix}/")
    lines = out.stderr.splitlines()
    assert out.returncode == 1 and len(lines) == 5, out.stderr
    assert {ln.split(":", 2)[1].strip() for ln in lines[:4]} == {
        "link",
        "pipe",
        "bad\\x1bname",
        "_SUCCESS",
    }
    assert "\x1b" not in out.stderr and "nothing was uploaded" in lines[-1]
    assert objects(s3, prefix) == {} and pending(s3, prefix) == []
    use_target(s3, monkeypatch)  # the same in this process (quicker)
    argv = ["put", str(tree), f"s3://{s3.bucket}/{prefix}/", "--skip-unsupported"]
    code, _, err = run(capsys, *argv)
    assert code == 0 and err.count("(skipped)") == 4, err
    assert len(objects(s3, prefix + "/")) == 5 + 1  # and _SUCCESS


def test_killed_at_a_random_point_then_resumed_or_aborted(s3: S3Target, tmp_path: Path) -> None:
    """SIGKILL anywhere (the seed is printed): afterwards ``jobs resume`` or ``jobs abort``
    leaves every file visible or none, and no pending upload."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"seed {seed}")
    files = make_tree(tmp_path / "tree", 40, 1)
    prefix = s3.prefix + "killed"
    dest = f"s3://{s3.bucket}/{prefix}"
    argv = ["put", str(tmp_path / "tree"), dest + "/", "--part-size", "5m", "--files", "4"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "zerorename.cli", *argv],
        env=target_env(s3),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    # a random point after the job is set up (before that nothing was sent: see the
    # Ctrl-C test), in its uploads or its commit, or after it ended
    c = s3.boto3_client()
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if c.list_objects_v2(Bucket=s3.bucket, Prefix=f"{prefix}/__magic").get("KeyCount"):
            break
        time.sleep(0.05)
    delay = rng.uniform(0.0, 4.0)
    time.sleep(delay)
    print(f"killed {delay:.2f}s after the job was set up")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    listed = run_sub(s3, "jobs", "list", dest, "--json")
    jobs = check_document(listed.stdout)["jobs"]
    if jobs:
        (job,) = jobs
        action = rng.choice(["resume", "abort"])
        out = run_sub(s3, "jobs", action, dest, job["jobId"], "--json")
        if out.returncode == 1:  # resume of a job that never committed; abort after _SUCCESS
            action = {"resume": "abort", "abort": "resume"}[action]
            out = run_sub(s3, "jobs", action, dest, job["jobId"], "--json")
        assert out.returncode == 0, (seed, out.stderr)
        print(f"jobs {action}: {out.stdout.strip()}")
        assert check_document(out.stdout)["command"] == f"jobs {action}"
    got = {k for k in objects(s3, prefix + "/") if "__magic" not in k}
    got.discard(f"{prefix}/_SUCCESS")
    if got:  # all of it (of the job, or of a run that ended before the kill)
        (top0,) = (k for k in got if k.startswith(f"{prefix}/top0-"))
        job_id = jobs[0]["jobId"] if jobs else top0[len(f"{prefix}/top0-") : -len(".csv")]
        assert got == {f"{prefix}/{keyed(rel, job_id)}" for rel in files}, seed
    assert objects(s3, f"{prefix}/__magic") == {}, seed
    assert pending(s3, prefix + "/") == [], seed


def test_ctrl_c_leaves_nothing(
    moto_s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    """Ctrl-C while the files go up: the job is aborted (nothing visible, nothing
    pending), the clean-up notice then one line, exit 130. Every part takes 2 s through
    the proxy, so the upload is still going when the first progress line comes (at 61
    small files it could end before that line on a loaded machine: the job committed and
    the exit was 0)."""
    s3 = moto_s3
    proxy: FaultProxy = fault_proxy(s3.endpoint_url)
    proxy.add_rule(FaultRule(operation="UploadPart", fault="latency", delay=2.0))
    make_tree(tmp_path / "tree", 60, 1)
    prefix = s3.prefix + "interrupted"
    argv = ["put", str(tmp_path / "tree"), f"s3://{s3.bucket}/{prefix}/", "--progress"]
    argv += ["--part-size", "5m", "--files", "2"]
    argv += ["--endpoint-url", proxy.url, "--addressing-style", "path"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "zerorename.cli", *argv],
        env=target_env(s3),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()  # --progress piped: a plain line once files go up
    assert first.startswith("put 61 files:"), first
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    said = [ln for ln in err.splitlines() if ln.startswith("zerorename:")]
    # the first Ctrl-C starts the job's abort: a line says it finishes first, then the outcome
    assert len(said) == 2 and "finishing the clean-up first" in said[0], err
    assert "was aborted, nothing is visible" in said[1], err
    assert objects(s3, prefix + "/") == {} and pending(s3, prefix + "/") == []
