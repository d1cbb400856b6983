"""The S3 servers' folder (issue 21): what moved from ``zerorename.testing`` to
``zerorename.servers`` still imports by its old path, as the moved module itself; the perf
harness's Target and the tests' S3Target are one class; the rgw.sh launcher is found at its
new place, and ``python -m`` runs the sink by either path."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

OLD = "zerorename.testing"
NEW = "zerorename.servers"
TESTING = Path(__file__).resolve().parents[2] / "src" / "zerorename" / "testing"

#: the modules (and the sink's package) that moved from testing/ to servers/, same names
MOVED = (
    "errors",
    "faultproxy",
    "faultrules",
    "proxybody",
    "requestlog",
    "servers",
    "service",
    "sink",
    "targets",
    "tls",
    "wsgiserver",
)


def test_the_aliases_are_exactly_the_moved_modules() -> None:
    """A module (or package) of testing/ that imports as another one is an alias: MOVED
    lists each; what stays (the in-memory store and its helpers) is itself."""
    aliases = set()
    for path in sorted(TESTING.iterdir()):
        stem = path.stem if path.suffix == ".py" else path.name
        if stem.startswith("__") or not (path.suffix == ".py" or (path / "__init__.py").is_file()):
            continue
        name = f"{OLD}.{stem}"
        if importlib.import_module(name).__name__ != name:
            aliases.add(stem)
    assert aliases == set(MOVED)


@pytest.mark.parametrize("name", MOVED)
def test_an_old_path_is_the_moved_module(name: str) -> None:
    moved = importlib.import_module(f"{NEW}.{name}")
    assert importlib.import_module(f"{OLD}.{name}") is moved
    assert moved.__name__ == f"{NEW}.{name}"
    namespace: dict[str, Any] = {}
    exec(f"from {OLD}.{name} import *", namespace)  # as old code wrote it, too
    public = getattr(moved, "__all__", [n for n in vars(moved) if not n.startswith("_")])
    assert public
    for attr in public:
        assert namespace[attr] is getattr(moved, attr), attr


def test_the_old_names_that_tests_and_users_import_give_the_same_objects() -> None:
    from zerorename import servers, testing
    from zerorename.servers.errors import RgwNotInstalled, ServerStartError, TestingError
    from zerorename.servers.faultproxy import FaultProxy
    from zerorename.servers.servers import MotoServer, RgwServer
    from zerorename.servers.sink import SinkServer
    from zerorename.servers.targets import Target
    from zerorename.testing.faultproxy import FaultProxy as OldFaultProxy
    from zerorename.testing.servers import MotoServer as OldMotoServer
    from zerorename.testing.servers import RgwServer as OldRgwServer
    from zerorename.testing.sink import SinkServer as OldSinkServer
    from zerorename.testing.targets import S3Target

    pairs = [
        (OldFaultProxy, FaultProxy),
        (OldMotoServer, MotoServer),
        (OldRgwServer, RgwServer),
        (OldSinkServer, SinkServer),
        (S3Target, Target),
        (testing.TestingError, TestingError),
        (testing.ServerStartError, ServerStartError),
        (testing.RgwNotInstalled, RgwNotInstalled),
        (servers.TestingError, TestingError),
    ]
    assert all(old is new for old, new in pairs)


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
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"servers/*.sh"' in pyproject


@pytest.mark.parametrize("module", [f"{NEW}.sink", f"{OLD}.sink"])
def test_python_m_runs_the_sink_by_either_path(module: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "usage: python -m zerorename.servers.sink" in out.stdout
