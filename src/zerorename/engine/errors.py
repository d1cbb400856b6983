"""Errors raised by the engine; every one derives from :class:`EngineError`, itself a
:class:`zerorename.errors.ZeroRenameError`.

botocore and aiohttp errors are translated into these at the boundary (``retry.translate``),
so callers never need to import botocore to handle a failure.
"""

from __future__ import annotations

from zerorename import errors as root


class EngineError(root.ZeroRenameError):
    """Root of every error the engine raises."""


class EngineConfigError(EngineError, root.ConfigError):
    """Raised when an :class:`EngineConfig` or call argument is invalid (before any request);
    a :class:`zerorename.errors.ConfigError` (and a ValueError) too."""


#: the name :class:`EngineConfigError` had before issue 21 (the same class: code that
#: catches ``engine.errors.ConfigError`` catches it still)
ConfigError = EngineConfigError


class PlanError(EngineError, ValueError):
    """Raised when an object cannot be uploaded within S3's limits (size, parts, part size)."""


class S3Error(EngineError):
    """Raised when S3 answers with an error that retrying cannot fix, or retries ran out.

    ``code`` is the S3 error code (``NoSuchBucket``, ``SlowDown``...) or a short name for
    a network failure; ``operation`` is the S3 operation; ``status`` the HTTP status.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "",
        operation: str = "",
        status: int | None = None,
        bucket: str = "",
        key: str = "",
    ) -> None:
        super().__init__(message)
        self.code = code
        self.operation = operation
        self.status = status
        self.bucket = bucket
        self.key = key


class BucketNotFound(S3Error):
    """Raised when the bucket does not exist (NoSuchBucket)."""


class AccessDenied(S3Error):
    """Raised on AccessDenied, bad or missing credentials, or a signature mismatch."""


class PreconditionFailed(S3Error):
    """Raised when a conditional write (If-None-Match) finds the object already exists."""


class ObjectNotFound(S3Error):
    """Raised when an object read (GET) finds no object at the key."""


class ObjectTooLarge(S3Error):
    """Raised when an object read whole (``get_object``) is larger than the caller's cap:
    the read stopped at the cap (or before the body, on its Content-Length), so memory
    never follows what a store claims. Not retried: the object is what it is."""


class UploadNotFound(S3Error):
    """Raised when a multipart upload no longer exists (completed or aborted elsewhere)."""


class CompletionUnproven(UploadNotFound):
    """Raised when a retried complete finds the upload gone (an earlier attempt's answer
    was lost) and the object at the key is not proven to be the one our parts make (its
    ETag is not their multipart ETag, or that cannot be computed: an encrypted store).
    Nothing is assumed: look at the object, then resume or abort the job."""


class EndpointUnreachable(S3Error):
    """Raised when the endpoint could not be reached within the retry budget."""


class RetriesExhausted(S3Error):
    """Raised when a throttled or transient failure persisted past the retry budget."""


class BadAnswer(S3Error):
    """Raised when a 2xx answer lacks what S3 always sends (an ETag, an UploadId, a
    CompleteMultipartUploadResult): something that is not S3 answered (a proxy, a captive
    portal, a wrong endpoint). Not retried: such an answer comes again, and retrying
    would only hide a misconfigured endpoint for the whole retry budget."""


class CertificateError(S3Error):
    """Raised when the endpoint's TLS certificate cannot be verified; not retried (a
    retry meets the same certificate): pass the CA bundle that signed it."""


class SourceChanged(PlanError):
    """Raised when a file being uploaded shrank under the upload (its parts are read from
    the file while they are sent, so the bytes it held at the start are no longer there)."""


class StreamTooLarge(PlanError):
    """Raised when a stream of unknown size grows past what S3 can store in one object."""


class RecordError(EngineError, ValueError):
    """Raised when a PendingUpload record is malformed or of an unknown version."""
