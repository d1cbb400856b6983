"""What the engine's integration tests read back from the store (with plain boto3)."""

from __future__ import annotations

from zerorename.testing.targets import S3Target


def get(s3: S3Target, key: str) -> bytes:
    """The whole object at ``key``."""
    body: bytes = s3.boto3_client().get_object(Bucket=s3.bucket, Key=key)["Body"].read()
    return body


def pending_keys(s3: S3Target) -> list[str]:
    """Keys of the multipart uploads still pending under the test's prefix."""
    resp = s3.boto3_client().list_multipart_uploads(Bucket=s3.bucket, Prefix=s3.prefix)
    return sorted(u["Key"] for u in resp.get("Uploads", []))


def object_keys(s3: S3Target) -> list[str]:
    """Keys of the objects under the test's prefix."""
    resp = s3.boto3_client().list_objects_v2(Bucket=s3.bucket, Prefix=s3.prefix)
    return sorted(o["Key"] for o in resp.get("Contents", []))
