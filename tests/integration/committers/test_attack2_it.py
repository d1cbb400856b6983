"""Attacks of helper attack2 on the wire (moto's server, behind the fault proxy where a
request must fail): ``zerorename jobs abort`` of a crashed Hadoop S3A magic job, run by
the CLI's own functions on the engine. An abort cut short by a store that keeps failing
its deletes leaves its note, the job listed as aborting, a resume refused, and the next
abort names every kept object (holds). Two defects the unit attacks found, shown on a
real server (both fixed): the command claim refused a Hadoop JobID, and a failed second
abort deleted the claim of the abort still running."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from zerorename.cli.claims import command_claim
from zerorename.committers.errors import CommitterError
from zerorename.committers.paths import Destination
from zerorename.committers.s3a.layout import S3AJobLayout
from zerorename.engine import RetryConfig, UploadEngine
from zerorename.servers.faultproxy import FaultRule
from zerorename.servers.targets import S3Target
from zerorename.sim.operators import run_cli
from zerorename.testing.s3acrash import lay_out_on

JOB = "3f2a9c1e-6c0b-4d57-9a59-0123456789ab"
FAST_RETRY = RetryConfig(max_attempts=3, base_delay=0.01, max_delay=0.05, max_elapsed=20)


def uri_of(s3: S3Target) -> str:
    return f"s3://{s3.bucket}/{s3.prefix}s3a out"


def keys_under(s3: S3Target, prefix: str) -> set[str]:
    c = s3.boto3_client()
    out: set[str] = set()
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix=prefix):
        out |= {o["Key"] for o in page.get("Contents", [])}
    return out


async def cli(engine: Any, *argv: str) -> tuple[str, BaseException | None]:
    seen = io.StringIO()
    try:
        await run_cli(engine, "jobs", *argv, out=seen)
    except Exception as exc:
        return seen.getvalue(), exc
    return seen.getvalue(), None


def kept(s3: S3Target, printed: str) -> set[str]:
    """The keys an abort's lines name as ones the job may have completed."""
    out: set[str] = set()
    for line in printed.splitlines():
        if line.startswith("kept ") and "may have completed: " in line:
            uris = line.split("may have completed: ", 1)[1].split(" and ", 1)[0]
            out |= {u.strip().removeprefix(f"s3://{s3.bucket}/") for u in uris.split(", ")}
    return out


async def test_an_abort_cut_short_on_the_wire_is_finished_by_the_next(
    moto_s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    s3 = moto_s3
    assert s3.endpoint_url is not None
    uri = uri_of(s3)
    dest = Destination.parse(uri)
    async with UploadEngine(s3.engine_config(retry=FAST_RETRY)) as direct:
        await lay_out_on(direct, uri, JOB)
        # every DeleteObjects after the first fails (500 past the retries)
        proxy = fault_proxy(s3.endpoint_url)
        proxy.add_rule(
            FaultRule(operation="DeleteObjects", fault="internal_error", burst=(2, 1000))
        )
        config = s3.with_endpoint(proxy.url).engine_config(retry=FAST_RETRY)
        async with UploadEngine(config) as dripping:
            printed, exc = await cli(dripping, "abort", uri, JOB)
        assert isinstance(exc, CommitterError) and "\n" not in str(exc), exc
        told = kept(s3, printed)
        lay = S3AJobLayout(dest, JOB)
        assert lay.abort_note in keys_under(s3, lay.root)
        listed, exc = await cli(direct, "list", uri)
        assert exc is None and "an abort began" in listed, (listed, exc)
        before = keys_under(s3, dest.key(""))
        _, exc = await cli(direct, "resume", uri, JOB)
        # refused: by the claim the failed abort could not delete, or by its note
        assert isinstance(exc, CommitterError) and "\n" not in str(exc), exc
        assert "being aborted" in str(exc) or "an abort began" in str(exc), exc
        assert keys_under(s3, dest.key("")) == before  # the refusal changed nothing
        printed, exc = await cli(direct, "abort", uri, JOB)
        assert exc is None, exc
        told |= kept(s3, printed)
        clean = {k for k in keys_under(s3, dest.key("")) if "__magic" not in k}
    assert not [k for k in keys_under(s3, dest.key("")) if "__magic" in k]
    assert len(clean) == 2 and told == clean  # the two completed outputs, named


async def test_the_cli_aborts_a_job_named_by_its_hadoop_jobid(moto_s3: S3Target) -> None:
    s3 = moto_s3
    uri = uri_of(s3)
    job = "job_202601010000_0001"
    async with UploadEngine(s3.engine_config(retry=FAST_RETRY)) as direct:
        await lay_out_on(direct, uri, job)
        _, exc = await cli(direct, "abort", uri, job)
    assert exc is None, f"{type(exc).__name__}: {exc}"


async def test_a_failed_second_abort_leaves_the_first_ones_claim(
    moto_s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    s3 = moto_s3
    assert s3.endpoint_url is not None
    uri = uri_of(s3)
    dest = Destination.parse(uri)
    proxy = fault_proxy(s3.endpoint_url)
    proxy.add_rule(FaultRule(operation="ListMultipartUploads", fault="no_such_upload"))
    config = s3.with_endpoint(proxy.url).engine_config(retry=FAST_RETRY)
    async with UploadEngine(s3.engine_config(retry=FAST_RETRY)) as direct:
        await lay_out_on(direct, uri, JOB)
        async with command_claim(direct, dest, JOB, "abort") as uri_a:  # abort A, running
            claim = uri_a.removeprefix(f"s3://{s3.bucket}/")
            async with UploadEngine(config) as failing:
                _, exc = await cli(failing, "abort", uri, JOB)  # abort B
            assert exc is not None
            assert keys_under(s3, claim) == {claim}, "B deleted A's claim"
            _, exc = await cli(direct, "resume", uri, JOB)  # a resume is kept out
            assert isinstance(exc, CommitterError) and "being aborted" in str(exc), exc
            assert uri_a in str(exc) and "\n" not in str(exc), exc
        assert not keys_under(s3, dest.key("__magic_commit/")), "a claim was left"
