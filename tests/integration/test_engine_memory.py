"""Bounded memory, measured in a fresh process: a 2 GiB generator-fed upload (8 MiB parts,
8 in flight) stays under baseline + (concurrency + 2) x part size + 64 MiB; a file upload
holds no part in memory at all, over plain HTTP (sendfile) and over HTTPS (blocks
checksummed as they are written, the checksum in a trailer)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_perf_commit import perf_target

from zerorename.perf.model import run_in_child
from zerorename.servers.targets import S3Target
from zerorename.units import MiB


def run_child(s3: S3Target, *args: str) -> dict[str, Any]:
    """Run ``python args...`` with ``s3``'s credentials; its stdout is one JSON report."""
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": s3.access_key or "",
        "AWS_SECRET_ACCESS_KEY": s3.secret_key or "",
    }
    out = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.stdout)
    return report


def test_two_gib_stream_peak_rss_is_bounded(rgw_s3: S3Target) -> None:
    """The ``upload`` scenario's engine client from a generator (``--source stream``), in
    the harness's fresh child process: its peak RSS grows by less than the engine's bound."""
    target = perf_target(rgw_s3)
    params = {"size": 2048 * MiB, "part_size": 8 * MiB, "concurrency": 8, "source": "stream"}
    report = run_in_child("zerorename.perf.clients:upload_zerorename", target, params)
    sys.stderr.write(f"\n[zerorename] 2 GiB stream memory: {report}\n")
    assert report["verified"] == 1.0  # the object was 2 GiB (checked by the run)
    assert report["growth_mib"] < (8 + 2) * 8 + 64


_FILE_UPLOAD = r"""
import json, sys
from zerorename.engine import EngineConfig, UploadEngine
from zerorename.portal import run

args = json.loads(sys.argv[1])


def rss(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)


async def main():
    config = EngineConfig(
        endpoint_url=args["endpoint_url"], region="us-east-1", addressing_style="path",
        part_size=args["part_size"], max_concurrency=args["concurrency"],
        ca_bundle=args.get("ca_bundle"), trailer_checksum=args.get("trailer", "auto"),
    )
    async with UploadEngine(config) as engine:
        await engine.put_object(args["bucket"], args["key"] + ".warm", b"w")
        baseline = rss("VmRSS")
        pending = await engine.upload(args["bucket"], args["key"], args["path"], defer=True)
        peak = rss("VmHWM")
        zero_copy = engine._client.zero_copy_bytes
        trailer_bodies = engine.stats.trailer_bodies
        checksums = engine.stats.trailer_checksums
        await engine.abort(pending)
        await engine.delete_object(args["bucket"], args["key"] + ".warm")
    return {
        "bytes": pending.length, "parts": len(pending.parts), "growth_mib": (peak - baseline) >> 20,
        "zero_copy_bytes": zero_copy, "trailer_bodies": trailer_bodies,
        "trailer_checksums": checksums,
    }


print(json.dumps(run(main())))
"""


def big_file(path: Path, size: int) -> Path:
    with open(path, "wb") as f:
        block = os.urandom(MiB)
        for i in range(size // MiB):
            f.write(i.to_bytes(8, "little") + block[8:])
    return path


def file_upload_report(
    s3: S3Target, tmp_path: Path, size: int, concurrency: int, name: str, **extra: Any
) -> dict[str, Any]:
    """Upload a ``size``-byte file in 16 MiB parts, ``concurrency`` in flight, in a fresh
    child process (its own RSS); the child's report, also written to stderr."""
    args = {
        "endpoint_url": s3.endpoint_url,
        "bucket": s3.bucket,
        "key": s3.key(f"{name}.bin"),
        "path": str(big_file(tmp_path / "big.bin", size)),
        "part_size": 16 * MiB,
        "concurrency": concurrency,
        "ca_bundle": s3.ca_bundle,
        **extra,
    }
    report: dict[str, Any] = run_child(s3, "-c", _FILE_UPLOAD, json.dumps(args))
    sys.stderr.write(f"\n[zerorename] {size // MiB} MiB file upload ({name}): {report}\n")
    return report


def test_a_file_upload_holds_no_parts_in_memory(rgw_s3: S3Target, tmp_path: Path) -> None:
    """512 MiB from a file, 16 MiB parts, 16 in flight: parts are ranges of the file, read
    in 1 MiB blocks while they are sent (or not at all: sendfile), so the peak RSS grows
    by far less than one part per part in flight (16 x 16 MiB = 256 MiB)."""
    size = 512 * MiB
    report = file_upload_report(rgw_s3, tmp_path, size, 16, "file-memory")
    assert (report["bytes"], report["parts"]) == (size, 32)
    assert report["zero_copy_bytes"] == size
    assert report["growth_mib"] < 48


@pytest.mark.parametrize(
    "moto_s3", [pytest.param("moto-https", marks=pytest.mark.https)], indirect=True
)
def test_a_file_upload_over_https_holds_no_parts_in_memory(
    moto_s3: S3Target, tmp_path: Path
) -> None:
    """128 MiB from a file over HTTPS (moto; kept small: moto holds it in RAM), 16 MiB
    parts, all 8 in flight: each part goes aws-chunked with a trailing checksum, 1 MiB
    blocks read, checksummed and written through TLS one at a time, so the peak RSS grows
    by far less than the parts in flight (8 x 16 MiB = 128 MiB)."""
    size = 128 * MiB
    report = file_upload_report(moto_s3, tmp_path, size, 8, "file-memory-tls")
    assert (report["bytes"], report["parts"]) == (size, 8)
    assert (report["zero_copy_bytes"], report["trailer_bodies"]) == (0, 8)
    assert report["growth_mib"] < 48


@pytest.mark.parametrize(
    "moto_s3", [pytest.param("moto-https", marks=pytest.mark.https)], indirect=True
)
def test_a_two_pass_file_upload_over_https_holds_no_parts_in_memory(
    moto_s3: S3Target, tmp_path: Path
) -> None:
    """256 MiB over HTTPS without trailers (``trailer_checksum="never"``: the path a store
    that refuses them gets), 16 MiB parts, all 16 in flight: a checksum pass into one
    reused buffer, then each 1 MiB block written through TLS in 256 KiB writes. The peak
    RSS grows by far less than the parts in flight (256 MiB); with 1 MiB writes and fresh
    checksum blocks it grew 74-87 MiB here (about 3 MiB queued per connection), now ~46."""
    size = 256 * MiB
    report = file_upload_report(
        moto_s3, tmp_path, size, 16, "file-memory-tls-two-pass", trailer="never"
    )
    assert (report["bytes"], report["parts"]) == (size, 16)
    assert (report["zero_copy_bytes"], report["trailer_bodies"]) == (0, 0)
    assert report["trailer_checksums"] is None
    assert report["growth_mib"] < 64
