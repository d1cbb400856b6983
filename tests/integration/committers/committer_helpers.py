"""Helpers for the committer integration tests: state of a destination as boto3 sees it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from zerorename.committers import (
    CommitOptions,
    MagicCommitter,
    PartitionedCommitter,
    StagingCommitter,
)
from zerorename.engine import UploadEngine
from zerorename.servers.targets import S3Target

ODD = "dätä sét #1+%/"  # spaces, unicode, '#', '+', '%' in every destination


def dest_uri(s3: S3Target, name: str = "out") -> str:
    return f"s3://{s3.bucket}/{s3.prefix}{ODD}{name}"


def dest_prefix(s3: S3Target, name: str = "out") -> str:
    return f"{s3.prefix}{ODD}{name}/"


def objects(s3: S3Target, prefix: str) -> dict[str, bytes]:
    """Every object under prefix with its content."""
    c = s3.boto3_client()
    out: dict[str, bytes] = {}
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            out[o["Key"]] = c.get_object(Bucket=s3.bucket, Key=o["Key"])["Body"].read()
    return out


def data_objects(s3: S3Target, prefix: str) -> dict[str, bytes]:
    """Objects under prefix that are not job records nor _SUCCESS, keyed relative to prefix."""
    return {
        k[len(prefix) :]: v
        for k, v in objects(s3, prefix).items()
        if "__magic" not in k and not k.endswith("/_SUCCESS")
    }


def uploads(s3: S3Target, prefix: str) -> list[str]:
    c = s3.boto3_client()
    resp = c.list_multipart_uploads(Bucket=s3.bucket, Prefix=prefix)
    return [u["Key"] for u in resp.get("Uploads", [])]


@asynccontextmanager
async def engine_for(s3: S3Target, **overrides: Any) -> AsyncIterator[UploadEngine]:
    async with UploadEngine(s3.engine_config(**overrides)) as eng:
        yield eng


KINDS = {"magic": MagicCommitter, "staging": StagingCommitter, "partitioned": PartitionedCommitter}


def committer(
    kind: str, eng: UploadEngine, uri: str, conflict: str = "append", tmp: Any = None, **opts: Any
) -> Any:
    if tmp is not None:
        opts.setdefault("staging_dir", tmp)
    return KINDS[kind](eng, uri, conflict=conflict, options=CommitOptions(**opts))


async def write(ta: Any, rel: str, data: bytes) -> None:
    """Write one output through whichever committer the attempt belongs to."""
    async with ta.open(rel) as out:
        await out.write(data)


def bucket_state(s3: S3Target) -> tuple[dict[str, bytes], list[tuple[str, str]]]:
    """The whole bucket: every object with its bytes, every pending upload (key, id)."""
    c = s3.boto3_client()
    objs: dict[str, bytes] = {}
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket):
        for o in page.get("Contents", []):
            objs[o["Key"]] = c.get_object(Bucket=s3.bucket, Key=o["Key"])["Body"].read()
    ups: list[tuple[str, str]] = []
    for page in c.get_paginator("list_multipart_uploads").paginate(Bucket=s3.bucket):
        ups += [(u["Key"], u["UploadId"]) for u in page.get("Uploads", [])]
    return objs, sorted(ups)
