"""The engine's folders (issue 21): every module path of before still imports (a row of
zerorename/_moved.py), as the moved module itself (a patch through an old path patches
the module the code runs); the package's lazy exports and what a pickle names are the new
paths; the engine's config error has one class under two names; and UploadEngine's
operations are members its methods delegate to."""

from __future__ import annotations

import importlib
import inspect
import pickle
from typing import Any

import pytest

from zerorename._moved import MOVED as TABLE

PACKAGE = "zerorename.engine"

#: old module (flat, before issue 21) -> where it lives now in the package: the engine's rows
#: of zerorename/_moved.py (whose own test checks every row; these also check the names
#: other code imported and the star imports)
MOVED = {
    old.removeprefix(f"{PACKAGE}."): new.removeprefix(f"{PACKAGE}.")
    for old, new in TABLE.items()
    if old.startswith(f"{PACKAGE}.") and new.startswith(f"{PACKAGE}.")
}


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_path_is_the_moved_module(old: str, new: str) -> None:
    moved = importlib.import_module(f"{PACKAGE}.{new}")
    assert importlib.import_module(f"{PACKAGE}.{old}") is moved
    assert moved.__name__ == f"{PACKAGE}.{new}"
    namespace: dict[str, Any] = {}
    exec(f"from {PACKAGE}.{old} import *", namespace)  # as old code wrote it, too
    public = getattr(moved, "__all__", [n for n in vars(moved) if not n.startswith("_")])
    assert public
    for name in public:
        assert namespace[name] is getattr(moved, name), name


def test_a_patch_through_an_old_path_reaches_the_moved_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from zerorename.engine.ops import objects

    monkeypatch.setattr(f"{PACKAGE}.store.DELETE_BATCH", 7)
    assert objects.DELETE_BATCH == 7


def test_the_old_paths_that_other_code_imports_give_the_same_objects() -> None:
    """What the committers, the in-memory store, perf and the tests imported by old paths."""
    from zerorename.engine.completion import OnResult, _Gate, check_target
    from zerorename.engine.store import DELETE_BATCH, GET_CAP, check_cap, too_large
    from zerorename.engine.writers import AfterCreate

    from zerorename.engine import records, results
    from zerorename.engine.bodies import writers
    from zerorename.engine.ops import completion, objects
    from zerorename.engine.wire import client, fastpath

    pairs = [
        (OnResult, completion.OnResult),
        (_Gate, completion._Gate),
        (check_target, completion.check_target),
        (DELETE_BATCH, objects.DELETE_BATCH),
        (GET_CAP, objects.GET_CAP),
        (check_cap, objects.check_cap),
        (too_large, objects.too_large),
        (AfterCreate, writers.AfterCreate),
        (records.PendingUpload, results.PendingUpload),
        (importlib.import_module(f"{PACKAGE}.client").make_session, client.make_session),
        (importlib.import_module(f"{PACKAGE}.fastpath").complete_body, fastpath.complete_body),
    ]
    assert all(old is new for old, new in pairs)


def test_the_package_exports_name_the_new_paths() -> None:
    """``from zerorename.engine import X`` (its lazy exports) gives the moved classes."""
    import zerorename.engine as engine
    from zerorename.engine.bodies import writers
    from zerorename.engine.results import BatchResult, PendingUpload, UploadInfo

    assert engine.PendingUpload is PendingUpload
    assert engine.BatchResult is BatchResult and engine.UploadInfo is UploadInfo
    assert engine.AsyncUploadWriter is writers.AsyncUploadWriter
    assert engine.SyncUploadWriter is writers.SyncUploadWriter
    for name in engine.__all__:
        value = getattr(engine, name)
        module = getattr(value, "__module__", None) or value.__name__
        old = {f"{PACKAGE}.{m}" for m in MOVED}
        assert module not in old, f"{name} comes from {module}"


def test_a_pickle_names_the_new_path_and_an_old_one_still_loads() -> None:
    from zerorename.engine.results import UploadResult

    result = UploadResult("b", "k", "etag", 5, 1, "id")
    blob = pickle.dumps(result, protocol=0)
    assert f"{PACKAGE}.results".encode() in blob
    assert f"{PACKAGE}.records".encode() not in blob
    old = blob.replace(f"{PACKAGE}.results".encode(), f"{PACKAGE}.records".encode())
    assert pickle.loads(old) == result


def test_the_engine_config_error_is_one_class_with_its_old_name_beside() -> None:
    from zerorename import errors as root
    from zerorename.engine import EngineConfig, errors

    assert errors.ConfigError is errors.EngineConfigError
    assert errors.EngineConfigError.__name__ == "EngineConfigError"
    assert issubclass(errors.EngineConfigError, errors.EngineError)
    assert issubclass(errors.EngineConfigError, root.ConfigError)
    assert errors.EngineConfigError is not root.ConfigError
    with pytest.raises(errors.ConfigError, match="part_size") as info:
        EngineConfig(part_size=1)
    assert type(info.value) is errors.EngineConfigError


def test_upload_engine_owns_its_operations_as_members() -> None:
    """No mixin: UploadEngine's completion and object methods are thin delegates to the
    members it builds, with their signatures (so every caller is unchanged)."""
    from zerorename.engine import UploadEngine
    from zerorename.engine.ops.completion import Completion
    from zerorename.engine.ops.objects import Objects

    assert UploadEngine.__mro__ == (UploadEngine, object)
    engine = UploadEngine()
    assert isinstance(engine._completion, Completion)
    assert isinstance(engine._objects, Objects)
    delegated = {
        Completion: ("complete", "abort", "complete_many", "abort_many", "list_uploads"),
        Objects: (
            "put_object",
            "get_object",
            "iter_object",
            "head_object",
            "list_objects",
            "list_prefixes",
            "delete_object",
            "delete_objects",
        ),
    }
    for member, names in delegated.items():
        for name in names:
            ours = inspect.signature(getattr(UploadEngine, name)).parameters
            theirs = inspect.signature(getattr(member, name)).parameters
            common = [p for p in theirs if p in ours]
            assert list(ours) == common, name  # the member may take more (a batch's limiter)


async def test_a_member_refuses_to_send_before_the_engine_opens() -> None:
    from zerorename.engine import UploadEngine, errors

    engine = UploadEngine()
    with pytest.raises(errors.EngineError, match="not open"):
        await engine.head_object("bucket", "key")
    with pytest.raises(errors.EngineError, match="not open"):
        [u async for u in engine.list_uploads("bucket", "prefix")]
