"""Part planning and input validation: pure, no loop, no server."""

import pytest

from zerorename.engine.errors import ConfigError, PlanError, StreamTooLarge
from zerorename.engine.planning import (
    MAX_OBJECT_SIZE,
    MAX_PART_SIZE,
    MAX_PARTS,
    MIN_PART_SIZE,
    GiB,
    MiB,
    TiB,
    plan_known_size,
    stream_capacity,
    stream_part_size,
    upload_prefix,
    validate_bucket,
    validate_key,
)


def test_small_and_empty_objects_are_one_part() -> None:
    assert plan_known_size(0, 8 * MiB).count == 1
    plan = plan_known_size(1, 8 * MiB)
    assert (plan.count, plan.part_length(1)) == (1, 1)


def test_known_size_uses_configured_part_size_when_it_fits() -> None:
    plan = plan_known_size(100 * MiB + 3, 8 * MiB)
    assert plan.part_size == 8 * MiB
    assert plan.count == 13
    assert sum(plan.part_length(n) for n in range(1, plan.count + 1)) == 100 * MiB + 3
    assert plan.part_length(13) == 4 * MiB + 3


def test_known_size_grows_part_size_to_fit_10000_parts() -> None:
    size = 1 * TiB
    plan = plan_known_size(size, 5 * MiB)
    assert plan.count <= MAX_PARTS
    assert plan.part_size % MiB == 0
    assert MIN_PART_SIZE <= plan.part_size <= MAX_PART_SIZE
    assert plan.part_size * plan.count >= size


def test_five_tib_fits_and_more_is_refused() -> None:
    plan = plan_known_size(MAX_OBJECT_SIZE, 5 * MiB)
    assert plan.count <= MAX_PARTS and plan.part_size <= MAX_PART_SIZE
    with pytest.raises(PlanError, match="5 TiB"):
        plan_known_size(MAX_OBJECT_SIZE + 1, 5 * MiB)


@pytest.mark.parametrize("bad", [0, 5 * MiB - 1, 5 * GiB + 1])
def test_part_size_out_of_range_is_refused(bad: int) -> None:
    with pytest.raises(ConfigError, match="5 MiB"):
        plan_known_size(10, bad)


def test_stream_part_sizes_grow_and_cover_five_tib_from_8_mib() -> None:
    assert stream_part_size(1, 8 * MiB) == 8 * MiB
    assert stream_part_size(1000, 8 * MiB) == 8 * MiB
    assert stream_part_size(1001, 8 * MiB) == 16 * MiB
    assert stream_part_size(MAX_PARTS, 5 * MiB) <= MAX_PART_SIZE
    assert stream_capacity(8 * MiB) == MAX_OBJECT_SIZE
    sizes = [stream_part_size(n, 5 * MiB) for n in range(1, MAX_PARTS + 1)]
    assert sizes == sorted(sizes)
    with pytest.raises(StreamTooLarge):
        stream_part_size(MAX_PARTS + 1, 8 * MiB)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "ab",
        "has space",
        "s3://bucket",
        "a/b",
        "-lead",
        "trail-",
        "a..b",
        "x" * 64,
        "x" * 256,
        "Upper",
        "bucket_legacy",
        "192.168.1.1",
        "None",
    ],
)
def test_bad_bucket_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="invalid bucket name") as info:
        validate_bucket(name)
    # the message states the rule the check applies (3-63, not the legacy 255)
    assert "3-63 characters" in str(info.value)


@pytest.mark.parametrize("name", [None, 5, b"bucket"])
def test_non_string_buckets_are_refused(name: object) -> None:
    with pytest.raises(ConfigError, match="must be a string"):
        validate_bucket(name)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name", ["abc", "my-bucket.data", "a1b", "x" * 63, "zr-test-0123456789ab", "1.2.3.4.5"]
)
def test_good_bucket_names_pass(name: str) -> None:
    validate_bucket(name)


def test_keys() -> None:
    with pytest.raises(ConfigError, match="non-empty"):
        validate_key("")
    with pytest.raises(ConfigError, match="1024"):
        validate_key("é" * 513)
    with pytest.raises(ConfigError, match="not valid Unicode"):
        validate_key("a\ud800b")
    with pytest.raises(ConfigError, match="must be a string"):
        validate_key(None)  # type: ignore[arg-type]
    validate_key("é" * 512)
    validate_key("a b/ü+%#?=.parquet")


def test_upload_prefix_is_a_directory_unless_asked() -> None:
    assert upload_prefix("data/set1") == "data/set1/"
    assert upload_prefix("data/set1/") == "data/set1/"
    assert upload_prefix("") == ""
    assert upload_prefix("data/set1", directory=False) == "data/set1"
