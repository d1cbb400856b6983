"""The measured clients of the ``upload``, ``many`` and ``sweep`` scenarios.

Each function runs in a fresh child process (see model.run_in_child), prepares its data,
measures only the transfer (wall time, this process's CPU time, peak RSS), then checks
what arrived and deletes it (untimed). Clients:

- ``zerorename``: the engine with the scenario's settings (checksum CRC32C by default,
  unsigned payload, sliced bodies).
- ``zerorename-matched``: the engine with exactly ``boto3-matched``'s settings (used when
  botocore cannot compute the engine's checksum without awscrt, e.g. CRC32C).
- ``boto3-default``: boto3/s3transfer as users run it: default botocore config (payload
  signed with SHA-256 over plain HTTP, CRC32 checksums when supported) with a
  TransferConfig of the same part size and concurrency, and a pool as large.
- ``boto3-matched``: the same with the engine's settings: unsigned payload, checksums
  only as asked, and the same checksum algorithm (or CRC32 when botocore cannot
  compute it).
- ``boto3-when-required``: ``boto3-default`` with checksums only where S3 requires them
  (``request_checksum_calculation="when_required"``): boto3 >= 1.36 as Ceph and MinIO users
  run it, since stores that refuse its trailing checksums over HTTPS exist.
- ``obstore``: the Rust object_store client (obstore) with the same part size and
  concurrency, where it is installed (no checksums).

Over HTTPS every client verifies the endpoint with the target's CA bundle: the engine
(``EngineConfig.ca_bundle``), boto3 (``verify=``), obstore (``client_options
root_certificate``, added to the system roots).
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from zerorename.perf.model import Meter, Target
from zerorename.units import GiB, MiB

if TYPE_CHECKING:
    from obstore.store import ClientConfig  # a type only: not importable at run time

MB = 1_000_000
_BLOCK = MiB


def botocore_checksums() -> set[str]:
    """Checksum algorithms botocore can compute here (CRC32C/CRC64 need awscrt)."""
    if importlib.util.find_spec("awscrt") is None:
        return {"CRC32", "SHA256", "SHA1", "none"}
    return {"CRC32", "CRC32C", "SHA256", "SHA1", "CRC64NVME", "none"}


def make_data(size: int) -> bytes:
    """``size`` random bytes, built in one allocation (a bytearray copied into bytes would
    double the peak RSS before the measurement starts)."""
    return os.urandom(size)


def blocks(size: int) -> Iterator[bytes]:
    """``size`` bytes as 1 MiB blocks, each a fresh object (as a real producer makes)."""
    seed = os.urandom(_BLOCK)
    sent = i = 0
    while sent < size:
        n = min(_BLOCK, size - sent)
        block = bytearray(seed[:n])
        block[: min(8, n)] = i.to_bytes(8, "little")[:n]
        yield bytes(block)
        sent += n
        i += 1


class StreamReader(io.RawIOBase):
    """A non-seekable binary file over :func:`blocks` (for clients that read files)."""

    def __init__(self, size: int) -> None:
        self._it = blocks(size)
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._it)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def _source(params: dict[str, Any]) -> Any:
    """The upload's source: the data file's path, bytes in memory, or a generator."""
    kind = params.get("source", "file")
    if kind == "file":
        return params["path"]
    if kind == "stream":
        return blocks(int(params["size"]))
    return make_data(int(params["size"]))


def _metrics(m: Meter, nbytes: int, **extra: float) -> dict[str, float]:
    # growth_mib: peak RSS during the transfer over the RSS just before it
    out = {
        "mb_s": nbytes / MB / m.wall,
        "cpu_s_per_gib": m.cpu / (nbytes / GiB),
        "peak_rss_mib": m.peak_rss / MiB,
        "growth_mib": (m.peak_rss - m.base_rss) / MiB,
        "wall_s": m.wall,
    }
    out.update(extra)
    return out


def _engine_config(target: Target, params: dict[str, Any]) -> Any:
    return target.engine_config(
        part_size=int(params["part_size"]),
        max_concurrency=int(params["concurrency"]),
        max_pool_connections=int(params.get("pool") or params["concurrency"]),
        checksum=params.get("checksum", "CRC32C"),
    )


# --- one large object ------------------------------------------------------------------------


def upload_zerorename(target: Target, params: dict[str, Any]) -> dict[str, float]:
    from zerorename.engine import UploadEngine
    from zerorename.portal import run

    source = _source(params)
    size = int(params["size"])
    key = target.key("upload", uuid.uuid4().hex)

    async def main() -> dict[str, float]:
        async with UploadEngine(_engine_config(target, params)) as engine:
            with Meter() as m:
                await engine.upload(target.bucket, key, source)
            info = await engine.head_object(target.bucket, key)
            if info is None or info.size != size:
                raise RuntimeError(f"uploaded object is {info}, expected {size} bytes")
            await engine.delete_object(target.bucket, key)
            return _metrics(m, size, verified=1.0, **_trailer_metrics(target, engine))

    return run(main())


def _trailer_metrics(target: Target, engine: Any) -> dict[str, float]:
    """Over HTTPS: the bodies sent read-once with a trailing checksum and those re-sent the
    two-pass way (a store refusing trailers), from the engine's stats."""
    if not target.tls:
        return {}
    st = engine.stats
    return {
        "trailer_bodies": float(st.trailer_bodies),
        "trailer_fallbacks": float(st.trailer_fallbacks),
    }


def _transfer_config(params: dict[str, Any]) -> Any:
    from boto3.s3.transfer import TransferConfig

    part = int(params["part_size"])
    return TransferConfig(
        multipart_threshold=part,
        multipart_chunksize=part,
        max_concurrency=int(params["concurrency"]),
        use_threads=True,
    )


def _boto3(
    target: Target, params: dict[str, Any], matched: bool | str
) -> tuple[Any, dict[str, Any]]:
    """A boto3 client and the ExtraArgs for a boto3 run (see the module docstring);
    ``matched``: False (default), True (matched) or "when_required"."""
    pool = int(params.get("pool") or params["concurrency"])
    if matched == "when_required":
        client = target.plain_boto3_client(
            max_pool_connections=pool, request_checksum_calculation="when_required"
        )
        return client, {}
    if not matched:
        return target.plain_boto3_client(max_pool_connections=pool), {}
    client = target.plain_boto3_client(
        max_pool_connections=pool,
        s3={"payload_signing_enabled": False},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    algo = params.get("matched_checksum", "CRC32")
    return client, ({} if algo == "none" else {"ChecksumAlgorithm": algo})


def _upload_boto3(target: Target, params: dict[str, Any], matched: bool | str) -> dict[str, float]:
    client, extra = _boto3(target, params, matched)
    config = _transfer_config(params)
    size = int(params["size"])
    key = target.key("upload", uuid.uuid4().hex)
    source = _source(params)
    client.head_bucket(Bucket=target.bucket)  # connect + credentials before timing
    with Meter() as m:
        if isinstance(source, str):
            client.upload_file(source, target.bucket, key, ExtraArgs=extra, Config=config)
        elif not isinstance(source, bytes):
            reader = io.BufferedReader(StreamReader(size), buffer_size=_BLOCK)
            client.upload_fileobj(reader, target.bucket, key, ExtraArgs=extra, Config=config)
        else:
            client.upload_fileobj(
                io.BytesIO(source), target.bucket, key, ExtraArgs=extra, Config=config
            )
    got = client.head_object(Bucket=target.bucket, Key=key)["ContentLength"]
    if got != size:
        raise RuntimeError(f"uploaded object has {got} bytes, expected {size}")
    client.delete_object(Bucket=target.bucket, Key=key)
    return _metrics(m, size, verified=1.0)


def upload_boto3_default(target: Target, params: dict[str, Any]) -> dict[str, float]:
    return _upload_boto3(target, params, matched=False)


def upload_boto3_matched(target: Target, params: dict[str, Any]) -> dict[str, float]:
    return _upload_boto3(target, params, matched=True)


def upload_boto3_when_required(target: Target, params: dict[str, Any]) -> dict[str, float]:
    return _upload_boto3(target, params, matched="when_required")


def _obstore(target: Target) -> Any:
    from obstore.store import S3Store

    kwargs: dict[str, Any] = {"region": target.region}
    if target.endpoint_url:
        kwargs["endpoint"] = target.endpoint_url
    if target.access_key and target.secret_key:
        kwargs["access_key_id"] = target.access_key
        kwargs["secret_access_key"] = target.secret_key
    kwargs["virtual_hosted_style_request"] = target.addressing_style == "virtual"
    options: ClientConfig = {"allow_http": not target.tls}
    if target.ca_bundle:
        from pathlib import Path

        options["root_certificate"] = Path(target.ca_bundle).read_text(encoding="ascii")
    return S3Store(target.bucket, client_options=options, **kwargs)


def upload_obstore(target: Target, params: dict[str, Any]) -> dict[str, float]:
    import obstore

    store = _obstore(target)
    size = int(params["size"])
    key = target.key("upload", uuid.uuid4().hex)
    source = _source(params)
    body: Any = source
    if isinstance(source, str):
        from pathlib import Path

        body = Path(source)
    with Meter() as m:
        obstore.put(
            store,
            key,
            body,
            chunk_size=int(params["part_size"]),
            max_concurrency=int(params["concurrency"]),
        )
    got = obstore.head(store, key)["size"]
    if got != size:
        raise RuntimeError(f"uploaded object has {got} bytes, expected {size}")
    obstore.delete(store, key)
    return _metrics(m, size, verified=1.0)


# --- many objects ------------------------------------------------------------------------------


def _many_metrics(m: Meter, count: int, size: int) -> dict[str, float]:
    out = _metrics(m, count * size, verified=1.0)
    out["objects_s"] = count / m.wall
    out["cpu_ms_per_object"] = m.cpu * 1000 / count
    return out


def many_zerorename(target: Target, params: dict[str, Any]) -> dict[str, float]:
    from zerorename.engine import UploadEngine
    from zerorename.portal import run

    count, size = int(params["count"]), int(params["size"])
    data = make_data(size)
    base = target.key("many", uuid.uuid4().hex)
    keys = [f"{base}/obj-{i:07d}" for i in range(count)]
    conc = int(params["concurrency"])

    async def main() -> dict[str, float]:
        async with UploadEngine(_engine_config(target, params)) as engine:
            sem = asyncio.Semaphore(conc)

            async def one(key: str) -> None:
                async with sem:
                    await engine.upload(target.bucket, key, data)

            with Meter() as m:
                async with asyncio.TaskGroup() as tg:
                    for key in keys:
                        tg.create_task(one(key))
            listed = [o async for o in engine.list_objects(target.bucket, base + "/")]
            if len(listed) != count or any(o.size != size for o in listed):
                raise RuntimeError(f"{len(listed)} objects listed, expected {count} of {size} B")
            await engine.delete_objects(target.bucket, keys)
            return {**_many_metrics(m, count, size), **_trailer_metrics(target, engine)}

    return run(main())


def _many_boto3(target: Target, params: dict[str, Any], matched: bool | str) -> dict[str, float]:
    from s3transfer.manager import TransferManager

    client, extra = _boto3(target, params, matched)
    count, size = int(params["count"]), int(params["size"])
    data = make_data(size)
    base = target.key("many", uuid.uuid4().hex)
    keys = [f"{base}/obj-{i:07d}" for i in range(count)]
    client.head_bucket(Bucket=target.bucket)
    with Meter() as m, TransferManager(client, _transfer_config(params)) as manager:
        futures = [
            manager.upload(io.BytesIO(data), target.bucket, key, extra_args=extra) for key in keys
        ]
        for f in futures:
            f.result()
    _check_and_delete_boto3(client, target.bucket, base, keys, size)
    return _many_metrics(m, count, size)


def _check_and_delete_boto3(
    client: Any, bucket: str, base: str, keys: list[str], size: int
) -> None:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=base + "/")
    listed = [o for p in pages for o in p.get("Contents", [])]
    if len(listed) != len(keys) or any(o["Size"] != size for o in listed):
        raise RuntimeError(f"{len(listed)} objects listed, expected {len(keys)} of {size} B")
    for i in range(0, len(keys), 1000):
        batch = [{"Key": k} for k in keys[i : i + 1000]]
        client.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})


def many_boto3_default(target: Target, params: dict[str, Any]) -> dict[str, float]:
    return _many_boto3(target, params, matched=False)


def many_boto3_matched(target: Target, params: dict[str, Any]) -> dict[str, float]:
    return _many_boto3(target, params, matched=True)


def many_boto3_when_required(target: Target, params: dict[str, Any]) -> dict[str, float]:
    return _many_boto3(target, params, matched="when_required")


def many_obstore(target: Target, params: dict[str, Any]) -> dict[str, float]:
    import obstore

    store = _obstore(target)
    count, size = int(params["count"]), int(params["size"])
    data = make_data(size)
    base = target.key("many", uuid.uuid4().hex)
    keys = [f"{base}/obj-{i:07d}" for i in range(count)]
    conc = int(params["concurrency"])

    async def main() -> None:
        sem = asyncio.Semaphore(conc)

        async def one(key: str) -> None:
            async with sem:
                await obstore.put_async(store, key, data)

        async with asyncio.TaskGroup() as tg:
            for key in keys:
                tg.create_task(one(key))

    with Meter() as m:
        asyncio.run(main())
    listed = [o for batch in obstore.list(store, base + "/") for o in batch]
    if len(listed) != count or any(o["size"] != size for o in listed):
        raise RuntimeError(f"{len(listed)} objects listed, expected {count} of {size} B")
    obstore.delete(store, keys)
    return _many_metrics(m, count, size)
