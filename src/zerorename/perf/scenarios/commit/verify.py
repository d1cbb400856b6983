"""The commit scenario's checks after a measured run, untimed: the destination holds
exactly what the commit promised (:func:`verify`), and a run's own prefix is emptied
(:func:`cleanup`)."""

from __future__ import annotations

from typing import Any

from zerorename.perf.errors import VerificationError as VerificationError  # re-exported

#: the committers' names of a magic job's records directory and of the success file
#: (zerorename.committers.paths: MAGIC_JOB_PREFIX, SUCCESS_NAME; a test checks they are
#: the same), here so that a baseline's child never imports the committers and the engine
MAGIC_JOB_PREFIX = "__magic_job-"
SUCCESS_NAME = "_SUCCESS"


def verify(
    client: Any,
    bucket: str,
    prefix: str,
    *,
    expected: int,
    size: int,
    job_id: str | None = None,
    committed_by_job: bool = False,
) -> dict[str, int]:
    """Raise VerificationError unless ``prefix`` holds exactly ``expected`` data objects of
    ``size`` bytes (carrying ``job_id`` when given) and no multipart upload is left under it.
    The job's records (``__magic_job-<id>/``) and ``_SUCCESS`` are not data; with
    ``committed_by_job`` (a zerorename job commit) ``_SUCCESS`` must exist and the records
    must be gone."""
    objects = wrong_size = foreign = records = 0
    success = False
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            rel = o["Key"][len(prefix) :]
            if rel.startswith(MAGIC_JOB_PREFIX):
                records += 1
            elif rel == SUCCESS_NAME:
                success = True
            else:
                objects += 1
                wrong_size += o["Size"] != size
                foreign += job_id is not None and job_id not in rel
    pending = 0
    for page in client.get_paginator("list_multipart_uploads").paginate(
        Bucket=bucket, Prefix=prefix
    ):
        pending += len(page.get("Uploads", []))
    problems = []
    if objects != expected:
        problems.append(f"{objects} objects, expected {expected}")
    if wrong_size:
        problems.append(f"{wrong_size} objects not of {size} bytes")
    if foreign:
        problems.append(f"{foreign} objects without the job id {job_id}")
    if pending:
        problems.append(f"{pending} multipart uploads left")
    if committed_by_job and not success:
        problems.append(f"no {SUCCESS_NAME}")
    if committed_by_job and records:
        problems.append(f"{records} job records left")
    if problems:
        raise VerificationError(f"s3://{bucket}/{prefix}: " + "; ".join(problems))
    return {"objects": objects, "records": records, "success": int(success)}


def cleanup(client: Any, bucket: str, prefix: str) -> int:
    """Abort the multipart uploads and delete the objects under ``prefix`` (a run's own,
    ending in '/'); returns the objects deleted."""
    if not prefix.endswith("/"):
        raise ValueError(f"cleanup prefix must end with '/': {prefix!r}")
    for page in client.get_paginator("list_multipart_uploads").paginate(
        Bucket=bucket, Prefix=prefix
    ):
        for up in page.get("Uploads", []):
            client.abort_multipart_upload(Bucket=bucket, Key=up["Key"], UploadId=up["UploadId"])
    deleted = 0
    while True:  # list again after each batch: deleting while paginating can skip keys
        page = client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1000)
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if not keys:
            return deleted
        client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        deleted += len(keys)


__all__ = ["VerificationError", "cleanup", "verify"]
