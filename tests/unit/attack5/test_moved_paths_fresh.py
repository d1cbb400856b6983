"""Attacks on the moved-paths table (helper attack5; zerorename/_moved.py): old paths in a
fresh process before and after their new ones, reload, pickles of an older driver naming
old paths, ``python -m`` of an old path with a main, names that are prefixes of old paths,
and nothing of the package loaded by the hook until an old path is asked for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[3] / "src")


def python(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=120, env=env
    )


def said(code: str) -> str:
    out = python("-c", code)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize("first", ["old", "new"])
def test_an_old_path_and_its_new_one_are_one_module_in_either_order(first: str) -> None:
    old, new = "zerorename.engine.store", "zerorename.engine.ops.objects"
    a, b = (old, new) if first == "old" else (new, old)
    got = said(
        f"import sys, {a} as a, {b} as b; import zerorename.engine as e\n"
        f"print(a is b, sys.modules['{old}'] is sys.modules['{new}'], e.store is b, b.__name__)"
    )
    assert got == f"True True True {new}"


def test_reloading_an_old_path_reloads_the_one_module() -> None:
    got = said(
        "import importlib, sys, zerorename.committers.jobcommit as j\n"
        "r = importlib.reload(j)\n"
        "print(r is j, sys.modules['zerorename.committers.jobcommit'] is "
        "sys.modules['zerorename.committers.commit.run'] is r)"
    )
    assert got == "True True"


@pytest.mark.parametrize("also_moved", [False, True])
def test_reloading_the_package_installs_no_second_hook(also_moved: bool) -> None:
    """Also after a reload of ``_moved`` itself (a new MovedFinder class)."""
    first = "importlib.reload(zerorename._moved)\n" if also_moved else ""
    got = said(
        "import importlib, sys, zerorename, zerorename._moved\n"
        f"{first}importlib.reload(zerorename)\n"
        "print(sum(type(f).__name__ == 'MovedFinder' for f in sys.meta_path))"
    )
    assert got == "1"


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        ("zerorename.engine.records", "zerorename.engine.results", "PendingUpload"),
        ("zerorename.spark_adapter.jobs", "zerorename.spark_adapter.write", "task_id_for"),
        ("zerorename.committers.successdata", "zerorename.committers.codec.success", "SuccessData"),
    ],
)
@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_a_pickle_naming_an_old_path_loads_in_a_fresh_process(
    old: str, new: str, name: str, protocol: int
) -> None:
    """What an older driver pickled (a class or function by its module path) loads in a
    worker of this version that has imported nothing of the package yet."""
    import importlib
    import pickle

    obj = getattr(importlib.import_module(new), name)
    data = pickle.dumps(obj, protocol=protocol)
    if protocol < 4:  # GLOBAL: "module\nname\n"
        older = data.replace(new.encode() + b"\n", old.encode() + b"\n")
    else:  # STACK_GLOBAL of two short strings (the frame left out: it is optional)
        older = b"".join(
            [
                bytes([0x80, protocol]),
                *(b"\x8c" + bytes([len(s)]) + s.encode() + b"\x94" for s in (old, name)),
                b"\x93\x94.",
            ]
        )
        assert (
            pickle.loads(
                older.replace(bytes([len(old)]) + old.encode(), bytes([len(new)]) + new.encode())
            )
            is obj
        )
    assert older != data
    got = said(
        "import pickle, sys\n"
        f"obj = pickle.loads({older!r})\n"
        f"print(obj.__module__, obj.__qualname__)"
    )
    assert got == f"{new} {name}"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("zerorename.spark_adapter.demo", "zerorename.cli.demo"),
        ("zerorename.perf.commit_scenario", "zerorename.perf.scenarios.commit.scenario"),
    ],
)
def test_python_m_of_an_old_path_runs_the_moved_main(old: str, new: str) -> None:
    by_old, by_new = python("-m", old, "--help"), python("-m", new, "--help")
    assert "usage" in by_new.stdout + by_new.stderr  # its main ran
    assert (by_old.returncode, by_old.stdout, by_old.stderr) == (
        by_new.returncode,
        by_new.stdout,
        by_new.stderr,
    )


@pytest.mark.parametrize(
    "name",
    [
        "zerorename.engine.stor",  # a prefix of an old path
        "zerorename.engine.storex",  # an old path is its prefix
        "zerorename.committers.job",
        "zerorename.perf.commit",
        "zerorename.engine.store.x",  # a submodule of an old path that is no package
    ],
)
def test_a_name_near_an_old_path_is_not_found(name: str) -> None:
    got = said(
        "import importlib.util, sys, zerorename\n"
        f"try:\n    print(importlib.util.find_spec({name!r}))\n"
        "except ModuleNotFoundError as e:\n    print('not found')"
    )
    assert got in ("None", "not found")


def test_the_hook_loads_nothing_until_an_old_path_is_asked_for() -> None:
    got = said(
        "import sys, importlib.util, zerorename\n"
        "before = sorted(m for m in sys.modules if m.startswith('zerorename'))\n"
        "importlib.util.find_spec('zerorename.cli')\n"
        "import zerorename.units\n"
        "after = sorted(m for m in sys.modules if m.startswith('zerorename'))\n"
        "print(before, after)"
    )
    assert got == (
        "['zerorename', 'zerorename._moved'] "
        "['zerorename', 'zerorename._moved', 'zerorename.units']"
    )
