"""One error policy (issue 12, section 2): one root, one family per package, one
configuration family, boundaries that map what crosses them (map_exceptions), and the
README's error table naming every public error class.

The boundary tests talk to moto over HTTP (a bucket that does not exist, or failures
injected on the wire by the FaultProxy): each public call maps an engine failure into
the committers' family, with the engine's error as the cause.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import zerorename
from needs import need_module
from zerorename.errors import ConfigError, ZeroRenameError, map_exceptions
from zerorename.servers.targets import S3Target

README = Path(__file__).resolve().parents[1] / "README.md"

#: the modules that hold the families (every public error class of the package)
ERROR_MODULES = (
    "zerorename.errors",
    "zerorename.engine.errors",
    "zerorename.committers.errors",
    "zerorename.spark_adapter.errors",
    "zerorename.testing.errors",
    "zerorename.perf.errors",
)
FAMILIES = {
    "zerorename.engine.errors": "EngineError",
    "zerorename.committers.errors": "CommitterError",
    "zerorename.spark_adapter.errors": "SparkAdapterError",
    "zerorename.testing.errors": "TestingError",
    "zerorename.perf.errors": "PerfError",
}


def error_classes(module: ModuleType) -> list[type[BaseException]]:
    """The public exception classes a module defines (not the ones it imports)."""
    return [
        obj
        for name, obj in vars(module).items()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and obj.__module__ == module.__name__
        and not name.startswith("_")
    ]


def all_error_classes() -> Iterator[type[BaseException]]:
    for name in ERROR_MODULES:
        yield from error_classes(importlib.import_module(name))


# ---------------------------------------------------------------- the hierarchy


def test_the_root_is_exported_from_the_package() -> None:
    assert zerorename.ZeroRenameError is ZeroRenameError
    assert issubclass(ConfigError, ZeroRenameError) and issubclass(ConfigError, ValueError)


@pytest.mark.parametrize("module", sorted(FAMILIES))
def test_every_class_is_in_its_family_under_the_root(module: str) -> None:
    mod = importlib.import_module(module)
    family = getattr(mod, FAMILIES[module])
    assert family.__bases__ == (ZeroRenameError,)
    classes = error_classes(mod)
    assert family in classes
    outside = [c.__name__ for c in classes if not issubclass(c, family)]
    assert not outside, f"{module}: not under {family.__name__}: {outside}"


def test_existing_names_keep_their_bases() -> None:
    """What callers catch today still catches the same errors."""
    from zerorename.committers import errors as ce
    from zerorename.engine import errors as ee
    from zerorename.spark_adapter import errors as se

    value_errors = [ee.ConfigError, ee.PlanError, ee.RecordError, ce.PathError]
    value_errors += [ce.InvalidJobId, ce.RecordFormatError, se.OptionError]
    for cls in value_errors:
        assert issubclass(cls, ValueError), cls
    assert issubclass(se.BridgeError, RuntimeError)
    assert issubclass(ee.ConfigError, ee.EngineError)  # `except EngineError` still sees it
    assert issubclass(ee.BucketNotFound, ee.S3Error) and issubclass(ee.SourceChanged, ee.PlanError)
    assert issubclass(ce.ConflictError, ce.JobCommitError)
    assert issubclass(ce.RecordNotFound, ce.RecordFormatError)


def test_configuration_errors_are_one_family_and_each_layer_keeps_its_own() -> None:
    from zerorename.committers.errors import CommitterConfigError, CommitterError
    from zerorename.engine.errors import ConfigError as EngineConfigError
    from zerorename.engine.errors import EngineError
    from zerorename.spark_adapter.errors import OptionError, SparkAdapterError

    for cls, family in [
        (EngineConfigError, EngineError),
        (CommitterConfigError, CommitterError),
        (OptionError, SparkAdapterError),
    ]:
        assert issubclass(cls, ConfigError) and issubclass(cls, family), cls
    # the bug: a Spark option error was an engine error (OptionError(.., engine ConfigError))
    assert not issubclass(OptionError, EngineError)
    assert not issubclass(CommitterConfigError, EngineError)


def test_engine_configuration_refusals_are_caught_by_the_root_config_error() -> None:
    from zerorename.engine import EngineConfig

    with pytest.raises(ConfigError, match="max_concurrency"):
        EngineConfig(max_concurrency=0)


def test_spark_options_are_caught_by_the_root_config_error() -> None:
    options = need_module("zerorename.spark_adapter.options")
    with pytest.raises(ConfigError, match="s3://"):
        options.WriteOptions.parse({"path": "/local/dir"})


# ---------------------------------------------------------------- map_exceptions


class Low(Exception):
    pass


class LowChild(Low):
    pass


class High(ZeroRenameError):
    pass


class HighConfig(High, ConfigError):
    pass


MAP = {LowChild: HighConfig, Low: High}


def test_a_mapped_error_keeps_its_cause_and_says_what_was_done() -> None:
    original = Low("GetObject s3://b/k failed")
    with pytest.raises(High) as info, map_exceptions(MAP, context="opening job 1"):
        raise original
    assert type(info.value) is High
    assert str(info.value) == "opening job 1: GetObject s3://b/k failed"
    assert info.value.__cause__ is original and info.value.__suppress_context__


def test_the_first_match_wins() -> None:
    with pytest.raises(HighConfig), map_exceptions(MAP):
        raise LowChild("x")
    with pytest.raises(High) as info, map_exceptions({Low: High, LowChild: HighConfig}):
        raise LowChild("x")
    assert type(info.value) is High


@pytest.mark.parametrize(
    "exc",
    [KeyError("unmapped"), High("already ours"), asyncio.CancelledError(), KeyboardInterrupt()],
    ids=["unmapped", "family", "cancelled", "interrupt"],
)
def test_what_is_not_mapped_passes_unchanged(exc: BaseException) -> None:
    with pytest.raises(type(exc)) as info, map_exceptions(MAP):
        raise exc
    assert info.value is exc


def test_a_callable_target_builds_the_error() -> None:
    def make(exc: Exception) -> High:
        return High(f"made from {type(exc).__name__}")

    with pytest.raises(High, match="made from Low") as info, map_exceptions({Low: make}):
        raise Low("x")
    assert isinstance(info.value.__cause__, Low)


def test_an_exception_group_is_mapped_by_its_first_real_error() -> None:
    leaf = Low("the real failure")
    group = BaseExceptionGroup("tasks", [asyncio.CancelledError(), leaf])
    with pytest.raises(High) as info, map_exceptions(MAP):
        raise group
    assert info.value.__cause__ is leaf
    ours = High("ours")
    with pytest.raises(High) as info2, map_exceptions(MAP):
        raise ExceptionGroup("tasks", [ours])
    assert info2.value is ours
    with pytest.raises(BaseExceptionGroup), map_exceptions(MAP):  # an interrupt is kept
        raise BaseExceptionGroup("tasks", [leaf, KeyboardInterrupt()])


async def test_async_with_maps_the_same() -> None:
    async with map_exceptions(MAP):
        pass
    with pytest.raises(High):
        async with map_exceptions(MAP):
            await asyncio.sleep(0)
            raise Low("x")
    with pytest.raises(HighConfig, match=r"^coroutine: y$") as info:
        async with map_exceptions(MAP, context="coroutine"):
            await asyncio.sleep(0)
            raise LowChild("y")
    assert isinstance(info.value.__cause__, LowChild)


SOURCES: list[type[Exception]] = [Low, LowChild, KeyError, OSError, High, HighConfig]


@given(
    cls=st.sampled_from(SOURCES),
    message=st.text(max_size=40),
    context=st.text(max_size=20),
)
def test_any_error_is_mapped_as_documented(
    cls: type[Exception], message: str, context: str
) -> None:
    """Mapped: the first matching target, the message prefixed, the cause kept; else the
    very same error."""
    original = cls(message)
    try:
        with map_exceptions(MAP, context=context):
            raise original
    except BaseException as exc:  # the property covers every outcome
        got = exc
    if cls in (Low, LowChild):
        assert type(got) is (HighConfig if cls is LowChild else High)
        assert got.__cause__ is original
        text = str(original) or cls.__name__
        assert str(got) == (f"{context}: {text}" if context else text)
    else:
        assert got is original


# ---------------------------------------------------------------- the README's table


def readme_error_section() -> str:
    text = README.read_text()
    match = re.search(r"<!-- error-table:start -->(.*?)<!-- error-table:end -->", text, re.S)
    assert match, "README has no error table (<!-- error-table:start/end -->)"
    return match.group(1)


def test_every_public_error_class_is_in_the_readme_table() -> None:
    table = readme_error_section()
    named = set(re.findall(r"`(?:[\w.]+\.)?(\w+)`", table))
    missing = sorted({c.__name__ for c in all_error_classes()} - named)
    assert not missing, f"README's error table does not name {missing}"


def test_the_readme_table_has_one_row_per_family() -> None:
    rows = [r for r in readme_error_section().splitlines() if r.startswith("| `")]
    first = [re.match(r"\| `(\w+)`", r).group(1) for r in rows]  # type: ignore[union-attr]
    assert first == ["ZeroRenameError", "ConfigError", *FAMILIES.values()]


# ---------------------------------------------------------------- boundaries on moto

#: a small retry budget: an injected failure that persists exhausts it at once
SMALL_RETRY = dict(max_attempts=2, base_delay=0.01, max_delay=0.02, max_elapsed=10)


def missing_bucket() -> str:
    return f"zerorename-no-such-bucket-{uuid.uuid4().hex[:12]}"


def small_engine(s3: S3Target) -> Any:
    from zerorename.engine import RetryConfig, UploadEngine

    return UploadEngine(s3.engine_config(retry=RetryConfig(**SMALL_RETRY)))


async def call(obj: Any, method: str, *args: Any) -> Any:
    return await getattr(obj, method)(*args)


async def test_wrap_engine_errors_maps_a_real_engine_failure(moto_s3: S3Target) -> None:
    from zerorename.committers.errors import CommitterError, wrap_engine_errors
    from zerorename.engine.errors import BucketNotFound

    bucket = missing_bucket()
    async with small_engine(moto_s3) as engine:
        with pytest.raises(CommitterError) as info:
            async with wrap_engine_errors(f"opening a job at s3://{bucket}/t"):
                await engine.get_object(bucket, "t/__magic_job-x/job.json")
    assert isinstance(info.value.__cause__, BucketNotFound)
    assert str(info.value).startswith(f"opening a job at s3://{bucket}/t: ")
    assert "NoSuchBucket" in str(info.value) and "\n" not in str(info.value)


async def on_missing_bucket(s3: S3Target, step: str) -> None:
    """``open_job`` or ``Job.status`` of a committer whose bucket does not exist."""
    from zerorename.committers import MagicCommitter

    async with small_engine(s3) as engine:
        committer = MagicCommitter(engine, f"s3://{missing_bucket()}/table")
        job_id = str(uuid.uuid4())
        if step == "open_job":
            await call(committer, "open_job", job_id)
        else:
            await call(committer.job(job_id), "status")


async def attempt_failing_on_the_wire(
    s3: S3Target,
    fault_proxy: Callable[..., Any],
    step: str,
    operation: str,
) -> None:
    """A magic job set up through a proxy, then every ``operation`` request answered 500
    while a task attempt runs ``step`` (setup, or abort after a good setup)."""
    from zerorename.committers import MagicCommitter
    from zerorename.engine import RetryConfig, UploadEngine
    from zerorename.servers.faultproxy import FaultRule

    assert s3.endpoint_url is not None
    proxy = fault_proxy(s3.endpoint_url)
    config = s3.with_endpoint(proxy.url).engine_config(retry=RetryConfig(**SMALL_RETRY))
    async with UploadEngine(config) as engine:
        committer = MagicCommitter(engine, f"s3://{s3.bucket}/{s3.prefix}table")
        job = await committer.setup_job()
        ta = job.task_attempt(0)
        if step == "abort":
            await ta.setup()
        proxy.add_rule(FaultRule(operation=operation, fault="internal_error"))
        await call(ta, step)


def _engine_error() -> type[BaseException]:
    from zerorename.engine.errors import EngineError

    return EngineError


def _committer_error() -> type[BaseException]:
    from zerorename.committers.errors import CommitterError

    return CommitterError


#: what each job call's error says it was doing (committer.py wraps them)
JOB_CALLS = {"open_job": "opening job ", "status": "reading the status of job "}


@pytest.mark.parametrize("step", list(JOB_CALLS))
async def test_job_calls_map_engine_errors(moto_s3: S3Target, step: str) -> None:
    from zerorename.engine.errors import BucketNotFound

    with pytest.raises(_committer_error()) as info:
        await on_missing_bucket(moto_s3, step)
    assert isinstance(info.value.__cause__, BucketNotFound)
    assert str(info.value).startswith(JOB_CALLS[step])
    assert "\n" not in str(info.value)


#: a task attempt's step, and the operation answered 500 while it runs
ATTEMPT_STEPS = [("setup", "HeadObject"), ("abort", "ListObjectsV2")]


@pytest.mark.parametrize(("step", "operation"), ATTEMPT_STEPS)
async def test_task_attempt_calls_map_engine_errors(
    moto_s3: S3Target, fault_proxy: Callable[..., Any], step: str, operation: str
) -> None:
    with pytest.raises(_committer_error()):
        await attempt_failing_on_the_wire(moto_s3, fault_proxy, step, operation)


# ---------------------------------------------------------------- committers' config errors


def bad_conflict_mode() -> None:
    from zerorename.committers.conflict import ConflictMode

    ConflictMode.parse("overwrite-ish")


def bad_commit_options() -> None:
    from zerorename.committers import CommitOptions

    CommitOptions(window=0)


def unknown_committer_kind() -> None:
    from zerorename.committers.committer import committer_class

    committer_class("rename")


@pytest.mark.parametrize(
    ("refused", "match"),
    [
        pytest.param(bad_conflict_mode, "conflict mode"),
        pytest.param(bad_commit_options, "window"),
        pytest.param(unknown_committer_kind, "rename"),
    ],
)
def test_bad_committer_settings_are_config_errors(refused: Callable[[], None], match: str) -> None:
    from zerorename.committers.errors import CommitterConfigError

    with pytest.raises(CommitterConfigError, match=match):
        refused()
