"""Small-object operations the committers need (records, listings, deletes), retried
like every other request: :class:`Objects`, which :class:`~zerorename.engine.UploadEngine`
owns and delegates its object methods to."""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

import botocore.exceptions as bexc

from zerorename.aio import batches
from zerorename.engine import errors
from zerorename.engine.planning import is_int, validate_bucket, validate_key
from zerorename.engine.results import ObjectInfo
from zerorename.engine.retry import FailureKind, Retrier, classify, deadline, error_code
from zerorename.engine.wire import answers
from zerorename.units import KiB, MiB

DELETE_BATCH = 1000
#: a resend's recheck (``delete_objects``): given a batch's keys, those still to delete
Recheck = Callable[[list[str]], Awaitable[list[str]]]
#: a conditional DeleteObjects key's error codes that mean "not that object any more":
#: another ETag, gone, or a write that won a race with the delete (S3's 409)
_NOT_THERE = ("PreconditionFailed", "NoSuchKey", "ConditionalRequestConflict")
#: what get_object reads whole unless its caller gives a cap (records pass their own)
GET_CAP = 64 * MiB
#: bytes read at a time by get_object
READ_CHUNK = 256 * KiB


def check_cap(max_size: object) -> int:
    """A read's size cap: an integer >= 0 (:class:`EngineConfigError` otherwise)."""
    if not is_int(max_size) or max_size < 0:  # type: ignore[operator]
        raise errors.EngineConfigError(
            f"max_size must be an integer >= 0 (bytes), got {max_size!r}"
        )
    return max_size  # type: ignore[return-value]


def too_large(bucket: str, key: str, cap: int, what: str) -> errors.ObjectTooLarge:
    """The one-line refusal of an object read whole that exceeds its cap."""
    return errors.ObjectTooLarge(
        f"GetObject s3://{bucket}/{key} {what} than the {cap} bytes such a record may hold: "
        "refused, nothing read past the cap and nothing changed (look at the object: it is "
        "not one zerorename wrote, or it was damaged)",
        code="ObjectTooLarge",
        operation="GetObject",
        bucket=bucket,
        key=key,
    )


def _ts(value: Any) -> float:
    return float(value.timestamp()) if value is not None else 0.0


def _etag(value: Any) -> str:
    return str(value or "")


class Objects:
    """GET/PUT/HEAD/LIST/DELETE of whole objects, with the engine's client (``client``:
    the open one, raising when the engine is not open) and retries."""

    def __init__(self, client: Callable[[], Any], retrier: Retrier) -> None:
        self._client = client
        self._retrier = retrier

    async def put_object(
        self,
        bucket: str,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        content_type: str | None = None,
    ) -> str:
        """Write a small object in one PutObject; returns its ETag. With ``if_none_match``
        an existing object makes it fail with :class:`PreconditionFailed`."""
        validate_bucket(bucket)
        validate_key(key)
        args: dict[str, Any] = {}
        if if_none_match:
            args["IfNoneMatch"] = "*"
        if content_type:
            args["ContentType"] = content_type

        async def call(attempt: int) -> str:
            resp = await self._client().put_object(Bucket=bucket, Key=key, Body=data, **args)
            # an answer without an ETag (an HTML page from a proxy) is no write
            return answers.require(
                resp,
                "PutObject",
                endpoint=answers.endpoint_of(self._client()),
                bucket=bucket,
                key=key,
            )

        return await self._retrier.call("PutObject", call, bucket=bucket, key=key)

    async def get_object(self, bucket: str, key: str, *, max_size: int = GET_CAP) -> bytes:
        """Read a whole (small) object; :class:`ObjectNotFound` when it is missing,
        :class:`ObjectTooLarge` when it holds more than ``max_size`` bytes: refused on its
        Content-Length before the body, else the read stops at the cap."""
        validate_bucket(bucket)
        validate_key(key)
        cap = check_cap(max_size)

        async def call(attempt: int) -> bytes:
            resp = await self._client().get_object(Bucket=bucket, Key=key)
            body = resp["Body"]  # not `as body`: before 3.8, aiobotocore gives aiohttp's
            async with body:  # response there, which has no read(n)
                claimed = resp.get("ContentLength")
                if isinstance(claimed, int) and claimed > cap:
                    raise too_large(bucket, key, cap, f"is {claimed} bytes, more")
                data = bytearray()
                while True:  # never more than the cap + 1 byte, whatever the store claims
                    chunk: bytes = await body.read(min(READ_CHUNK, cap + 1 - len(data)))
                    if not chunk:
                        return bytes(data)
                    data += chunk
                    if len(data) > cap:
                        raise too_large(bucket, key, cap, "holds more")

        return await self._retrier.call("GetObject", call, bucket=bucket, key=key)

    async def iter_object(
        self, bucket: str, key: str, *, chunk_size: int = MiB
    ) -> AsyncIterator[bytes]:
        """Stream an object in chunks; a transient failure mid-body resumes with a ranged
        GET of the same version (If-Match on the ETag) from where it stopped. Each GET's
        waiting for the store (not the consumer's time between chunks) is bounded by
        ``retry.attempt_timeout``; resumes stop after ``max_attempts``, or ``max_elapsed``
        after the first failure."""
        validate_bucket(bucket)
        validate_key(key)
        cfg = self._retrier.config
        offset = 0
        etag: str | None = None
        resumes = 0
        failing_since: float | None = None
        while True:
            args: dict[str, Any] = {"Bucket": bucket, "Key": key}
            if offset:
                args["Range"] = f"bytes={offset}-"
                if etag:
                    args["IfMatch"] = etag

            async def call(attempt: int, args: dict[str, Any] = args) -> Any:
                return await self._client().get_object(**args)

            resp = await self._retrier.call("GetObject", call, bucket=bucket, key=key)
            etag = etag or resp.get("ETag")
            waited = 0.0
            try:
                body = resp["Body"]  # the StreamingBody (see get_object)
                async with body:
                    while True:
                        began = time.monotonic()
                        chunk: bytes = await deadline(
                            cfg.attempt_timeout - waited,
                            body.read(chunk_size),
                            limit=cfg.attempt_timeout,
                        )
                        waited += time.monotonic() - began
                        if not chunk:
                            return
                        offset += len(chunk)
                        yield chunk
            except Exception as exc:
                resumes += 1
                now = time.monotonic()
                failing_since = now if failing_since is None else failing_since
                if (
                    classify(exc) is FailureKind.FATAL
                    or resumes > cfg.max_attempts
                    or now - failing_since >= cfg.max_elapsed
                ):
                    raise errors.RetriesExhausted(
                        f"reading s3://{bucket}/{key} failed at byte {offset} after "
                        f"{resumes} attempts: {type(exc).__name__}: {exc}",
                        code=type(exc).__name__,
                        operation="GetObject",
                        bucket=bucket,
                        key=key,
                    ) from exc

    async def head_object(self, bucket: str, key: str) -> ObjectInfo | None:
        """Size, ETag and time of an object; None when it does not exist."""
        validate_bucket(bucket)
        validate_key(key)

        async def call(attempt: int) -> Any:
            try:
                return await self._client().head_object(Bucket=bucket, Key=key)
            except bexc.ClientError as exc:
                code, status = error_code(exc)
                if status == 404 or code in ("404", "NoSuchKey", "NotFound"):
                    return None
                raise

        resp = await self._retrier.call("HeadObject", call, bucket=bucket, key=key)
        if resp is None:
            return None
        return ObjectInfo(
            bucket,
            key,
            int(resp.get("ContentLength", 0)),
            _etag(resp.get("ETag")),
            _ts(resp.get("LastModified")),
        )

    async def _list_pages(
        self, bucket: str, prefix: str, delimiter: str | None
    ) -> AsyncIterator[dict[str, Any]]:
        validate_bucket(bucket)
        token: str | None = None
        while True:
            args: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
            if delimiter:
                args["Delimiter"] = delimiter
            if token:
                args["ContinuationToken"] = token

            async def call(attempt: int, args: dict[str, Any] = args) -> Any:
                return await self._client().list_objects_v2(**args)

            page: dict[str, Any] = await self._retrier.call(
                "ListObjectsV2", call, bucket=bucket, key=prefix
            )
            yield page
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    async def list_objects(
        self, bucket: str, prefix: str = "", *, delimiter: str | None = None
    ) -> AsyncIterator[ObjectInfo]:
        """Objects under ``prefix`` (a plain string prefix: add '/' for a directory)."""
        async for page in self._list_pages(bucket, prefix, delimiter):
            for o in page.get("Contents", []) or []:
                yield ObjectInfo(
                    bucket,
                    o["Key"],
                    int(o.get("Size", 0)),
                    _etag(o.get("ETag")),
                    _ts(o.get("LastModified")),
                )

    async def list_prefixes(
        self, bucket: str, prefix: str, *, delimiter: str = "/"
    ) -> AsyncIterator[str]:
        """The 'subdirectories' (CommonPrefixes) right under ``prefix``."""
        async for page in self._list_pages(bucket, prefix, delimiter):
            for cp in page.get("CommonPrefixes", []) or []:
                yield str(cp["Prefix"])

    async def delete_object(self, bucket: str, key: str) -> None:
        """Delete one object (no error when it does not exist)."""
        await self.delete_objects(bucket, [key])

    async def delete_objects(
        self,
        bucket: str,
        keys: Iterable[str] | AsyncIterable[str],
        *,
        if_match: Mapping[str, str] | None = None,
        recheck: Recheck | None = None,
    ) -> int:
        """Delete keys in batches of 1000; returns how many were deleted (asked to be, for
        a key without a condition). ``if_match`` (key -> ETag): each key it names goes with
        its ETag in the request (S3's conditional DeleteObjects), so the store deletes it
        only while it is still that object; a key the store answers PreconditionFailed for
        was rewritten since: kept, not counted, no error. ``recheck``: awaited with a
        batch's keys before each resend of it (the first send failed, or its answer was
        lost and it may have taken effect); it returns the keys still to delete (none: the
        batch is done). A store that ignores ``if_match`` would otherwise let a blind resend
        delete what another writer put there after the first send. Raises
        :class:`S3Error` naming the first key the store refused to delete for any other
        reason."""
        validate_bucket(bucket)
        deleted = 0
        async for batch in batches(keys, DELETE_BATCH):
            deleted += await self._delete_batch(bucket, batch, if_match or {}, recheck)
        return deleted

    async def _delete_batch(
        self, bucket: str, keys: list[str], etags: Mapping[str, str], recheck: Recheck | None
    ) -> int:
        for k in keys:  # a batch with a bad key is refused whole, before it is sent
            validate_key(k)
        sent = keys

        async def call(attempt: int) -> Any:
            nonlocal sent
            if attempt > 1 and recheck is not None:
                sent = [k for k in await recheck(sent) if k in keys]
                if not sent:
                    return {}
            objects = [
                {"Key": k, **({"ETag": quoted(etags[k])} if k in etags else {})} for k in sent
            ]
            return await self._client().delete_objects(
                Bucket=bucket, Delete={"Objects": objects, "Quiet": True}
            )

        resp = await self._retrier.call("DeleteObjects", call, bucket=bucket, key=keys[0])
        errs = resp.get("Errors") or []
        # a conditional key rewritten since (PreconditionFailed) or gone since: not deleted
        kept = [e for e in errs if e.get("Key") in etags and e.get("Code") in _NOT_THERE]
        failed = [e for e in errs if e not in kept]
        if failed:
            first = failed[0]
            raise errors.S3Error(
                f"DeleteObjects s3://{bucket}: {len(failed)} of {len(keys)} keys not deleted; "
                f"first {first.get('Key')!r}: {first.get('Code')} {first.get('Message', '')}",
                code=str(first.get("Code", "")),
                operation="DeleteObjects",
                bucket=bucket,
                key=str(first.get("Key", "")),
            )
        return len(sent) - len(kept)


def quoted(etag: str) -> str:
    """An ETag as S3 writes it in headers and listings (within double quotes)."""
    return '"' + etag.strip('"') + '"'
