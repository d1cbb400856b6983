"""The Spark adapter's engine cache never closes an engine under its user (issue 20, "also
seen"): more threads than the cache holds each take an engine of their own configuration,
all hold them at once (a barrier: counting, not timing), then each uses its engine
against moto. Before the fix the cache closed its oldest engines as the later threads
arrived, and their users failed with "the engine is not open"."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from zerorename.engine import EngineConfig
from zerorename.servers.targets import S3Target
from zerorename.spark_adapter import bridge as bridge_mod
from zerorename.spark_adapter.bridge import LoopBridge

EXTRA = 4  # threads beyond the cache's bound


@pytest.fixture
def bridge() -> Iterator[LoopBridge]:
    b = LoopBridge()
    yield b
    b.close()


def _configs(s3: S3Target, n: int) -> list[EngineConfig]:
    """``n`` distinct configurations of one endpoint (one cache entry each)."""
    return [s3.engine_config(max_concurrency=i + 1) for i in range(n)]


def test_an_engine_in_use_is_never_closed_and_idle_ones_are(
    bridge: LoopBridge, moto_s3: S3Target
) -> None:
    n = bridge_mod.MAX_ENGINES + EXTRA
    configs = _configs(moto_s3, n)
    holding = threading.Barrier(n + 1)
    done = threading.Barrier(n + 1)
    release = threading.Barrier(n + 1)
    errors: list[str] = []
    turns = [threading.Event() for _ in range(n + 1)]
    turns[0].set()

    def user(i: int) -> None:
        turns[i].wait(timeout=120)  # one after another: thread i takes the (i+1)-th engine
        engine = bridge.engine(configs[i])
        turns[i + 1].set()
        holding.wait(timeout=120)  # every thread holds its engine: the cache has overflowed
        try:
            bridge.run(engine.put_object(moto_s3.bucket, moto_s3.key(f"o{i}"), b"x"))
        except Exception as exc:
            errors.append(f"user {i}: {type(exc).__name__}: {exc}")
        done.wait(timeout=120)
        release.wait(timeout=120)  # held until the test has counted the open engines
        del engine

    threads = [threading.Thread(target=user, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    assert turns[n].wait(timeout=120)
    holding.wait(timeout=120)
    done.wait(timeout=120)
    assert errors == [], errors
    listed = moto_s3.boto3_client().list_objects_v2(Bucket=moto_s3.bucket, Prefix=moto_s3.prefix)
    assert sorted(o["Key"] for o in listed.get("Contents", [])) == sorted(
        moto_s3.key(f"o{i}") for i in range(n)
    )
    # bounded: the cache holds MAX_ENGINES, the EXTRA it retired are open while held
    assert bridge.engines_open() == (bridge_mod.MAX_ENGINES, EXTRA)
    release.wait(timeout=120)
    for t in threads:
        t.join(timeout=120)
    # their users let go: the next miss closes them, and the cache stays bounded
    extra = bridge.engine(moto_s3.engine_config(max_concurrency=n + 1))
    assert bridge.engines_open() == (bridge_mod.MAX_ENGINES, 0)
    bridge.run(extra.put_object(moto_s3.bucket, moto_s3.key("after"), b"y"))


def test_a_retired_engine_is_closed_by_bridge_close_while_held(
    bridge: LoopBridge, moto_s3: S3Target
) -> None:
    configs = _configs(moto_s3, bridge_mod.MAX_ENGINES + 1)
    first = bridge.engine(configs[0])
    for cfg in configs[1:]:
        bridge.engine(cfg)
    assert bridge.engines_open() == (bridge_mod.MAX_ENGINES, 1)
    bridge.run(first.put_object(moto_s3.bucket, moto_s3.key("held"), b"x"))  # still open
    bridge.close()
    assert bridge.engines_open() == (0, 0)
    with pytest.raises(Exception, match="not open"):
        bridge.run(first.put_object(moto_s3.bucket, moto_s3.key("late"), b"x"))
