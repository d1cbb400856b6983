"""Records, checksums and part chunking: pure."""

import asyncio
import base64
import hashlib
import json
import zlib
from collections.abc import AsyncIterator

import pytest

from zerorename.engine import checksums
from zerorename.engine.bodies.sources import Part, part_stream
from zerorename.engine.config import EngineConfig
from zerorename.engine.errors import ConfigError, PlanError, RecordError
from zerorename.engine.results import PartInfo, PendingUpload
from zerorename.units import MiB


def pending() -> PendingUpload:
    return PendingUpload(
        bucket="bkt",
        key="dir with space/ü+%#?=.parquet",
        upload_id="u-1",
        parts=(PartInfo(1, '"e1"', 5 * MiB, "AAAA"), PartInfo(2, '"e2"', 7, None)),
        length=5 * MiB + 7,
        created=1700000000.5,
        checksum_algorithm="CRC32C",
    )


def test_pending_upload_round_trips_json_exactly() -> None:
    p = pending()
    text = p.to_json()
    assert PendingUpload.from_json(text) == p
    assert json.loads(text)["key"] == "dir with space/ü+%#?=.parquet"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(version=99),
        lambda d: d.pop("upload_id"),
        lambda d: d.update(length=1),
        lambda d: d["parts"].reverse(),
        lambda d: d["parts"][0].update(etag=5),
    ],
)
def test_bad_records_are_refused(mutate) -> None:  # type: ignore[no-untyped-def]
    d = pending().to_dict()
    mutate(d)
    with pytest.raises(RecordError):
        PendingUpload.from_dict(d)


def test_truncated_json_is_refused() -> None:
    with pytest.raises(RecordError, match="not valid JSON"):
        PendingUpload.from_json(pending().to_json()[:-10])


def test_checksums_match_reference_values() -> None:
    data = b"123456789"
    assert base64.b64decode(checksums.compute("CRC32C", data)) == (0xE3069283).to_bytes(4, "big")
    assert base64.b64decode(checksums.compute("CRC32", data)) == zlib.crc32(data).to_bytes(4, "big")
    assert base64.b64decode(checksums.compute("SHA256", data)) == hashlib.sha256(data).digest()
    assert checksums.compute("none", data) is None


def test_engine_config_refuses_bad_values() -> None:
    with pytest.raises(ConfigError, match="part_size"):
        EngineConfig(part_size=MiB)
    with pytest.raises(ConfigError, match="checksum"):
        EngineConfig(checksum="MD5")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        EngineConfig(max_concurrency=0)
    cfg = EngineConfig(aws_access_key_id="AKIDSECRETID", aws_secret_access_key="hunter2secret")
    assert "hunter2secret" not in repr(cfg) and "AKIDSECRETID" not in repr(cfg)


async def _blocks(sizes: list[int]) -> AsyncIterator[bytes]:
    for i, n in enumerate(sizes):
        yield bytes([i % 251]) * n


def _collect(sizes: list[int], part_size: int, size: int | None) -> list[Part]:
    async def main() -> list[Part]:
        return [p async for p in part_stream(_blocks(sizes), part_size=part_size, size=size)]

    return asyncio.run(main())


@pytest.mark.parametrize(
    "sizes",
    [[], [0], [1], [5 * MiB], [5 * MiB + 1], [3 * MiB] * 7, [12 * MiB + 5], [1000] * 6000],
)
def test_part_stream_reassembles_exactly(sizes: list[int]) -> None:
    parts = _collect(sizes, 5 * MiB, None)
    joined = b"".join(bytes(p.body) for p in parts)
    assert joined == b"".join(bytes([i % 251]) * n for i, n in enumerate(sizes))
    assert [p.number for p in parts] == list(range(1, len(parts) + 1))
    assert parts[-1].last and not any(p.last for p in parts[:-1])
    assert all(p.size == 5 * MiB for p in parts[:-1])


def test_part_stream_checks_declared_size() -> None:
    with pytest.raises(PlanError, match="declared"):
        _collect([10], 5 * MiB, 11)
    with pytest.raises(PlanError, match="more than"):
        _collect([10, 10], 5 * MiB, 15)
