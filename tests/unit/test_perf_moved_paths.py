"""perf's scenarios in perf/scenarios/ (issue 21): every module path of before still
imports, as the moved module itself; the harness's children are started by the new paths
(an old path under ``python -m`` would only run the alias, not the module's main)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PERF = SRC / "zerorename" / "perf"

#: old module path -> where it lives now
MOVED = {
    "zerorename.perf.upload_scenario": "zerorename.perf.scenarios.upload",
    "zerorename.perf.upload_latency": "zerorename.perf.scenarios.upload_latency",
    "zerorename.perf.many_scenario": "zerorename.perf.scenarios.many",
    "zerorename.perf.sweep_scenario": "zerorename.perf.scenarios.sweep",
    "zerorename.perf.spark_scenario": "zerorename.perf.scenarios.spark",
    "zerorename.perf.rename_baseline": "zerorename.perf.scenarios.rename_baseline",
    "zerorename.perf.commit_scenario": "zerorename.perf.scenarios.commit.scenario",
    "zerorename.perf.commit_latency": "zerorename.perf.scenarios.commit.latency",
    "zerorename.perf.commit_verify": "zerorename.perf.scenarios.commit.verify",
    "zerorename.perf.floor_commit": "zerorename.perf.scenarios.commit.floor",
    "zerorename.perf.stream_scenario": "zerorename.perf.scenarios.stream.scenario",
    "zerorename.perf.stream_check": "zerorename.perf.scenarios.stream.check",
    "zerorename.perf.stream_measure": "zerorename.perf.scenarios.stream.measure",
    "zerorename.perf.tune_scenario": "zerorename.perf.scenarios.tune.scenario",
    "zerorename.perf.tunegrid": "zerorename.perf.scenarios.tune.grid",
    "zerorename.perf.tunemodel": "zerorename.perf.scenarios.tune.model",
}


def test_the_aliases_are_exactly_the_moved_modules() -> None:
    """A module of perf/ that imports as another one is an alias; MOVED lists each (perf's
    other modules are the harness's shared parts)."""
    found = set()
    for path in sorted(PERF.glob("*.py")):
        if path.stem not in ("__init__", "__main__"):  # __main__ would run the harness
            name = f"zerorename.perf.{path.stem}"
            if importlib.import_module(name).__name__ != name:
                found.add(name)
    assert found == set(MOVED)


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_path_is_the_moved_module(old: str, new: str) -> None:
    moved = importlib.import_module(new)
    assert importlib.import_module(old) is moved
    assert moved.__name__ == new
    namespace: dict[str, Any] = {}
    exec(f"from {old} import *", namespace)  # as old code wrote it, too
    public = getattr(moved, "__all__", [n for n in vars(moved) if not n.startswith("_")])
    assert public
    for name in public:
        assert namespace[name] is getattr(moved, name), name


def test_the_children_are_started_by_the_new_paths() -> None:
    """Every module named in a string in perf/ (a measure function ``module:function`` run
    in a child, ``python -m module``) is a path that exists as a module, and none is an
    old path: the child imports the module itself, and runs its main."""
    named = set()
    for path in sorted(PERF.rglob("*.py")):
        if path.stem in {m.rpartition(".")[2] for m in MOVED} and path.parent == PERF:
            continue  # an alias names its old path in its docstring
        named |= set(re.findall(r"[\"'](zerorename\.perf[\w.]*)[:\"']", path.read_text()))
    assert named, "no module named by a string in perf/"
    old = sorted(named & set(MOVED))
    assert not old, f"old paths named: {old}"
    for module in sorted(named):
        assert importlib.import_module(module).__name__ == module
