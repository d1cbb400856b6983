"""The S3 servers' folder (issue 21): the perf harness's Target and the tests' S3Target are
one class, importing it loads no engine, and the rgw.sh launcher is found at its new place.
What moved from ``zerorename.testing`` imports by its old path: test_moved_paths.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_one_target_for_the_harness_and_the_tests() -> None:
    """perf.model.Target is the servers' Target: a test's target (its prefix ends with '/')
    and a benchmark's (a run's directory) name their keys as each did before."""
    from zerorename.perf.model import Target as PerfTarget
    from zerorename.servers.targets import S3Target, Target

    assert PerfTarget is Target and S3Target is Target
    test = Target(name="moto", endpoint_url="http://h:1", bucket="b", prefix="t-0123abcd/")
    assert test.key("k/x.bin") == "t-0123abcd/k/x.bin"
    assert test.with_prefix("").key("k") == "k"
    bench = Target("sink", "http://h:1", "b", prefix="zerorename-perf/run-1")
    assert bench.key("commit", "c1") == "zerorename-perf/run-1/commit/c1"
    assert bench.destination("commit", "c1") == (
        "s3://b/zerorename-perf/run-1/commit/c1",
        "zerorename-perf/run-1/commit/c1/",
    )
    assert Target.from_json(bench.to_json()) == bench
    assert "secret" not in repr(Target("x", None, "b", access_key="AK", secret_key="secret"))


def test_importing_the_target_loads_no_engine() -> None:
    """The perf harness's baseline children read their Target from perf.model: it must not
    load the engine (aiobotocore) nor boto3 (a test of perf_helpers checks the children)."""
    code = (
        "import sys\n"
        "import zerorename.perf.model, zerorename.servers.targets\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('aiobotocore', 'boto3', 'botocore') or m.startswith('zerorename.engine')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_rgw_launcher_is_packaged_with_the_servers() -> None:
    from zerorename.servers.servers import rgw_script

    script = rgw_script()
    assert script.parent.name == "servers" and script.name == "rgw.sh"
    pyproject = (Path(__file__).resolve().parents[3] / "pyproject.toml").read_text()
    assert '"servers/*.sh"' in pyproject
