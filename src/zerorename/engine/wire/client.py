"""The engine's S3 client: the one place the aiobotocore client is configured, and
:class:`FastClient`, which sends the hot calls through the fast path (fastpath.py)."""

from __future__ import annotations

import asyncio
import enum
import inspect
import os
import socket
import ssl
import time
from typing import Any
from urllib.request import getproxies

import aiohttp
import botocore.exceptions as bexc
from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession, get_session
from botocore.httpsession import get_cert_path
from yarl import URL

from zerorename.engine.bodies.filebody import (
    SENDFILE_AVAILABLE,
    FilePayload,
    FileRange,
    for_botocore,
)
from zerorename.engine.config import EngineConfig
from zerorename.engine.errors import EngineConfigError
from zerorename.engine.events import log
from zerorename.engine.planning import key_problem
from zerorename.engine.retry import EngineStats
from zerorename.engine.wire import trailer
from zerorename.engine.wire.fastanswers import (
    CLOSING_TAGS,
    client_error,
    connection_error,
    is_error_200,
    is_redirect,
    parse_success,
)
from zerorename.engine.wire.fastpath import (
    HOT_OPERATIONS,
    PROBE_KEY,
    OpSpec,
    Request,
    Target,
    amz_date,
    build_request,
    op_spec,
    signed_headers,
    target_for,
)
from zerorename.engine.wire.trailer import TrailerBody, TrailerPayload

# like aiobotocore's default: under the 20 s idle timeout of AWS front ends
_KEEPALIVE_TIMEOUT = 12.0
#: seconds a part waits for the first trailer request to an endpoint to decide whether
#: the store takes trailers, before it goes the two-pass way
_PROBE_WAIT = 10.0


def _check_object_key(params: Any, model: Any, **_: Any) -> None:
    """botocore handler: an object operation with a missing or empty key is refused before
    its request is built (with parameter validation off, botocore would send it to the
    bucket URL: ``DELETE /bucket?uploadId=`` is DeleteBucket)."""
    shape = getattr(model, "input_shape", None)
    if shape is not None and "Key" in shape.members and isinstance(params, dict):
        problem = key_problem(params.get("Key"))
        if problem is not None:
            raise EngineConfigError(f"{model.name} refused: {problem}")


def guard_object_keys(client: Any) -> None:
    """Make ``client`` (aiobotocore) refuse object operations without a key, on every
    call, whichever code makes it: the lowest botocore call site."""
    client.meta.events.register("before-parameter-build.s3", _check_object_key)


def open_error(exc: BaseException, config: EngineConfig) -> EngineConfigError | None:
    """The one-line EngineConfigError for a failure to create the client that the configuration
    (or the AWS environment) causes, else None."""
    if isinstance(exc, bexc.ProfileNotFound):
        name = exc.kwargs.get("profile") or config.profile
        return EngineConfigError(
            f"AWS profile {name!r} is not in the AWS config or credentials files "
            "(~/.aws/config, ~/.aws/credentials): fix the profile name or AWS_PROFILE"
        )
    if isinstance(exc, bexc.InvalidRegionError):
        name = exc.kwargs.get("region_name")
        return EngineConfigError(
            f"region {name!r} is not a region name (letters, digits and '-', e.g. us-east-1): "
            "fix the region or AWS_DEFAULT_REGION/AWS_REGION"
        )
    if isinstance(exc, ValueError) and str(exc).startswith("Invalid endpoint"):
        return EngineConfigError(
            "the endpoint URL (endpoint_url or AWS_ENDPOINT_URL) is not an http(s) URL"
        )
    if isinstance(exc, bexc.BotoCoreError) and not isinstance(exc, bexc.ConnectionError):
        return EngineConfigError(f"could not set up the S3 client: {exc}")
    return None


#: botocore data loaders by search path: one per process, shared by every session
_LOADERS: dict[tuple[str, ...], Any] = {}


def make_session(config: EngineConfig) -> AioSession:
    """A new session (credentials and profile are read afresh), sharing the process's
    botocore data loader: the S3 model, endpoint rules and partitions are parsed once per
    process, not once per engine (that JSON was about 60% of opening an engine). The
    loader's cache only holds botocore's own read-only data files."""
    session = AioSession(profile=config.profile) if config.profile else get_session()
    loader = session.get_component("data_loader")
    shared = _LOADERS.setdefault(tuple(loader.search_paths), loader)
    if shared is not loader:
        session.register_component("data_loader", shared)
    return session


#: TLS verify contexts by CA bundle (its path, size and mtime): one per process, shared
#: by every client (an SSLContext serves any number of connections, as aiohttp's own
#: default context does)
_VERIFY_CONTEXTS: dict[tuple[str, int, int], ssl.SSLContext] = {}


def share_verify_context(client: Any) -> None:
    """Let ``client``'s HTTP session verify TLS with the process's context for its CA
    bundle instead of parsing the bundle again (about 40 ms of CPU on every client's first
    request, even over plain HTTP). Only where the context is never changed after it is
    built: no client certificate and no proxy (both change the context aiobotocore builds);
    otherwise, and on aiobotocore releases without ``_build_verify_context``, the session
    builds its own as before. A bundle file that changes (size or mtime) is read again."""
    http = getattr(getattr(client, "_endpoint", None), "http_session", None)
    build = getattr(http, "_build_verify_context", None)
    verify = getattr(http, "_verify", None)
    if http is None or not callable(build) or not verify or getattr(http, "_cert_file", None):
        return
    proxy_config = getattr(http, "_proxy_config", None)
    if getattr(proxy_config, "_proxies", None) or getattr(proxy_config, "settings", None):
        return
    if getproxies():  # botocore takes proxies from the environment at each request
        return
    try:
        path = get_cert_path(verify)
        st = os.stat(path)
    except (OSError, TypeError, ValueError):
        return
    key = (str(path), st.st_size, st.st_mtime_ns)

    def shared() -> ssl.SSLContext:
        context = _VERIFY_CONTEXTS.get(key)
        if context is None:
            context = _VERIFY_CONTEXTS.setdefault(key, build())
        return context

    http._build_verify_context = shared


def client_kwargs(config: EngineConfig) -> dict[str, Any]:
    """Arguments for ``session.create_client('s3', ...)``.

    botocore's retries are off (total_max_attempts=1): the engine retries itself, so
    attempts are never multiplied. Checksums are computed by the engine, so botocore
    adds none of its own; payload signing is off unless asked for (see EngineConfig).
    """
    s3: dict[str, Any] = {"addressing_style": config.addressing_style}
    s3["payload_signing_enabled"] = config.payload_signing
    aio_config = AioConfig(
        max_pool_connections=config.pool_size,
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        retries={"total_max_attempts": 1, "mode": "standard"},
        s3=s3,
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        tcp_keepalive=True,
        parameter_validation=False,
    )
    kwargs: dict[str, Any] = {"config": aio_config}
    if config.endpoint_url:
        kwargs["endpoint_url"] = config.endpoint_url
    if config.region:
        kwargs["region_name"] = config.region
    if config.ca_bundle:
        kwargs["verify"] = config.ca_bundle
    if config.aws_access_key_id:
        kwargs["aws_access_key_id"] = config.aws_access_key_id
        kwargs["aws_secret_access_key"] = config.aws_secret_access_key
        if config.aws_session_token:
            kwargs["aws_session_token"] = config.aws_session_token
    return kwargs


class _Redirected(Exception):
    """The bucket answered from another region or endpoint: botocore knows what to do."""


class TrailerState(enum.Enum):
    """What an endpoint does with trailing checksums (none yet: unknown)."""

    PROBING = "probing"  # one trailer request in flight decides; others go two-pass
    ON = "on"  # the store confirmed a trailing checksum
    OFF = "off"  # the store refused one, or did not confirm it


# -- the fast path's I/O -----------------------------------------------------------------
def _keepalive_socket(addr_info: Any) -> socket.socket:
    """Sockets with SO_KEEPALIVE on (the botocore client asks for tcp_keepalive too)."""
    family, type_, proto, _, _ = addr_info
    sock = socket.socket(family=family, type=type_, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    return sock


def _default_verify_context(verify: Any = True) -> ssl.SSLContext:
    """What aiobotocore's session verifies with (``verify``: its ``_verify``, True, False or
    a CA bundle's path), for sessions before 3.9 (no ``_build_verify_context``)."""
    from botocore.httpsession import create_urllib3_context

    context: ssl.SSLContext = create_urllib3_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    context.check_hostname = True
    context.load_verify_locations(get_cert_path(verify))
    return context


class FastClient:
    """The engine's S3 client: the hot calls go through the fast path when it can send
    exactly what botocore would; everything else -- and those calls when it cannot --
    goes to the wrapped aiobotocore client. Any other attribute is the client's."""

    def __init__(self, client: Any, config: EngineConfig, stats: EngineStats | None = None) -> None:
        self._client = client
        self._config = config
        self._stats = stats if stats is not None else EngineStats()
        self._session: aiohttp.ClientSession | None = None
        self._credentials: Any = None
        self._ssl: ssl.SSLContext | None = None
        self._targets: dict[str, Target | None] = {}
        self._specs: dict[str, OpSpec] = {}
        self._models: dict[str, Any] = {}
        self._second = -1
        self._date_time = ""
        #: why the fast path is off (None while it is on).
        self.disabled_reason: str | None = "not opened"
        #: requests sent by the fast path / hot calls handed to botocore, per operation.
        self.sent: dict[str, int] = {}
        self.handed_over: dict[str, int] = {}
        #: send file parts with os.sendfile over plain-HTTP connections (bodies/filebody.py).
        self.zero_copy = SENDFILE_AVAILABLE
        #: bytes of file parts that went out with sendfile (all attempts).
        self.zero_copy_bytes = 0
        #: trailing checksums per endpoint (origin), and why the last refusal was one
        self.trailer_states: dict[str, TrailerState] = {}
        self.trailer_refusal: str | None = None
        self._probes: dict[str, asyncio.Event] = {}

    def __getattr__(self, name: str) -> Any:
        if name == "_client":  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self._client, name)

    @property
    def enabled(self) -> bool:
        return self._session is not None

    # -- lifecycle -----------------------------------------------------------------------
    def _unsuitable(self) -> str | None:
        """Why the fast path could not send what this client sends (None: it can)."""
        cfg = self._config
        if not cfg.fast_path:
            return "fast_path is off"
        if cfg.payload_signing:
            return "payload signing is on"
        meta_config = self._client.meta.config
        if getattr(meta_config, "signature_version", None) not in (None, "s3v4", "v4"):
            return "the client does not sign with SigV4"
        if getattr(meta_config, "request_checksum_calculation", None) != "when_required":
            return "botocore adds checksums of its own"
        if getattr(meta_config, "proxies", None) or getattr(meta_config, "client_cert", None):
            return "proxies or client certificates are configured"
        signer = getattr(self._client, "_request_signer", None)
        if getattr(signer, "signature_version", "s3v4") not in ("s3v4", "v4"):
            return "the client does not sign with SigV4"
        return None

    async def open(self) -> None:
        """Decide whether the fast path can be used and, if so, create its connection
        pool (its own: ``pool_size`` connections, keep-alive)."""
        if self._session is not None:
            return
        reason = self._unsuitable()
        if reason is None:
            creds = self._client._get_credentials()
            if inspect.isawaitable(creds):
                creds = await creds
            if creds is None:
                reason = "no credentials (anonymous)"
            self._credentials = creds
        if reason is not None:
            self.disabled_reason = reason
            return
        try:
            endpoint = str(getattr(self._client.meta, "endpoint_url", "") or "")
            if endpoint.startswith("https:"):
                self._ssl = await asyncio.to_thread(self._verify_context)
            model = self._client.meta.service_model
            for operation in HOT_OPERATIONS:
                self._models[operation] = model.operation_model(operation)
                self._specs[operation] = op_spec(self._models[operation])
        except Exception as exc:  # e.g. a bad CA bundle: botocore will say so on its calls
            self.disabled_reason = f"could not be set up ({type(exc).__name__})"
            return
        cfg = self._config
        connector = aiohttp.TCPConnector(
            limit=cfg.pool_size,
            keepalive_timeout=_KEEPALIVE_TIMEOUT,
            ssl=self._ssl if self._ssl is not None else True,
            socket_factory=_keepalive_socket,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(
                sock_connect=cfg.connect_timeout, sock_read=cfg.read_timeout
            ),
            skip_auto_headers=("Content-Type",),
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        # aiohttp re-sends an idempotent request (PUT: UploadPart) once by itself when its
        # connection fails, below the engine's retry policy, where nothing counts it.
        # Every re-send goes through the policy instead (counted, backed off, bounded).
        self._session._retry_connection = False
        self.disabled_reason = None

    async def close(self) -> None:
        """Close the fast path's connections (the wrapped client is closed by its owner)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _verify_context(self) -> ssl.SSLContext:
        """The TLS settings of the client's own HTTP session (verify, CA bundle)."""
        http = getattr(getattr(self._client, "_endpoint", None), "http_session", None)
        build = getattr(http, "_build_verify_context", None)
        if callable(build):
            context: ssl.SSLContext = build()
            return context
        return _default_verify_context(getattr(http, "_verify", True))

    # -- where a bucket's requests go ----------------------------------------------------
    async def _target(self, bucket: Any) -> Target | None:
        if not isinstance(bucket, str):
            return None
        try:
            target = await self._resolve(bucket)
        except Exception:  # botocore refuses it: the botocore call will say why
            target = None
        self._targets[bucket] = target
        return target

    async def _resolve(self, bucket: str) -> Target | None:
        """Build a PutObject request the way the client's ``_make_api_call`` does (its
        parameter handlers, endpoint rules, serializer) and take its URL and signing
        region: the base URL for ``bucket`` (addressing style included)."""
        client = self._client
        model = self._models["PutObject"]
        context: dict[str, Any] = {
            "client_region": client.meta.region_name,
            "client_config": client.meta.config,
            "has_streaming_input": model.has_streaming_input,
            "auth_type": model.resolved_auth_type,
            "unsigned_payload": model.unsigned_payload,
            "auth_options": client.meta.service_model.metadata.get("auth"),
        }
        params = await client._emit_api_params(
            api_params={"Bucket": bucket, "Key": PROBE_KEY},
            operation_model=model,
            context=context,
        )
        endpoint_url, extra_headers, properties = await client._resolve_endpoint_ruleset(
            model, params, context
        )
        if extra_headers:
            return None
        schemes = (properties or {}).get("authSchemes") or [{}]
        if schemes[0].get("name", "sigv4") != "sigv4":
            return None
        if properties:
            context["endpoint_properties"] = properties
        request = await client._convert_to_request_dict(
            api_params=params,
            operation_model=model,
            endpoint_url=endpoint_url,
            context=context,
            headers=extra_headers,
        )
        signing = context.get("signing") or {}
        if signing.get("signing_name", "s3") != "s3":
            return None
        target = target_for(str(request["url"]), signing.get("region") or client.meta.region_name)
        if target is None or (target.origin.startswith("https:") and self._ssl is None):
            return None
        return None if self._proxied(target.origin + target.path_prefix) else target

    def _proxied(self, url: str) -> bool:
        http = getattr(getattr(self._client, "_endpoint", None), "http_session", None)
        proxy_config = getattr(http, "_proxy_config", None)
        if proxy_config is not None:
            return bool(proxy_config.proxy_url_for(url))
        from botocore.utils import get_environ_proxies

        return bool(get_environ_proxies(url))

    # -- the hot calls -------------------------------------------------------------------
    async def upload_part(self, **params: Any) -> Any:
        return await self._call("UploadPart", params)

    async def put_object(self, **params: Any) -> Any:
        return await self._call("PutObject", params)

    async def create_multipart_upload(self, **params: Any) -> Any:
        return await self._call("CreateMultipartUpload", params)

    async def complete_multipart_upload(self, **params: Any) -> Any:
        return await self._call("CompleteMultipartUpload", params)

    async def abort_multipart_upload(self, **params: Any) -> Any:
        return await self._call("AbortMultipartUpload", params)

    async def _call(self, operation: str, params: dict[str, Any]) -> Any:
        session = self._session
        if session is not None:
            bucket = params.get("Bucket")
            targets = self._targets
            target = targets.get(bucket) if bucket in targets else await self._target(bucket)
            if target is not None and isinstance(bucket, str):
                request = build_request(self._specs[operation], target, params)
                if request is not None:
                    self.sent[operation] = self.sent.get(operation, 0) + 1
                    try:
                        return await self._send(session, operation, target, request)
                    except _Redirected:
                        targets[bucket] = None  # botocore follows it from now on
        self.handed_over[operation] = self.handed_over.get(operation, 0) + 1
        if "Body" in params:
            params = {**params, "Body": await for_botocore(params["Body"])}
        return await getattr(self._client, HOT_OPERATIONS[operation])(**params)

    # -- trailing checksums --------------------------------------------------------------
    async def send_trailer(
        self, operation: str, body: TrailerBody, params: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Send an UploadPart or PutObject with its checksum in a trailer (``params``
        without Body and without a checksum value); the answer, whose checksum the store
        confirmed to be ``body.checksum``, or None: the body is to be sent the two-pass
        way (trailers not wanted here, a call the fast path cannot make, or the store
        refused or did not confirm the trailer: then remembered for the endpoint and
        counted in the engine's stats)."""
        session = self._session
        bucket = params.get("Bucket")
        if session is None or not isinstance(bucket, str):
            return None
        targets = self._targets
        target = targets.get(bucket) if bucket in targets else await self._target(bucket)
        if target is None:
            return None
        origin = target.origin
        cfg = self._config
        scheme = origin.partition(":")[0]
        if not trailer.wanted(cfg.trailer_checksum, scheme, body.algorithm, body.length):
            return None
        state = await self._trailer_claim(origin)
        if state is TrailerState.OFF:
            return None
        request = build_request(self._specs[operation], target, {**params, "Body": body})
        outcome: TrailerState | None = None  # None: nothing learnt
        try:
            if request is None:
                return None
            self.sent[operation] = self.sent.get(operation, 0) + 1
            answer = await self._send(session, operation, target, request)
            if not answer.get("ETag"):  # not an S3 answer: BadAnswer, whatever the trailer
                return answer
            if not trailer.confirms(answer, body.algorithm, body.checksum):
                outcome = self._trailer_off(origin, "the answer did not confirm the checksum")
                return None
            outcome = TrailerState.ON
            self._stats.trailer_bodies += 1
            if self._stats.trailer_checksums is None:
                self._stats.trailer_checksums = True
            return answer
        except _Redirected:
            targets[bucket] = None  # botocore follows it from now on
            return None
        except bexc.ClientError as exc:
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            code = str(exc.response.get("Error", {}).get("Code") or "")
            if not trailer.refused(status, code, confirmed=state is TrailerState.ON):
                raise
            outcome = self._trailer_off(origin, f"{status} {code}".strip())
            return None
        finally:
            self._trailer_settle(origin, state, outcome)

    async def _trailer_claim(self, origin: str) -> TrailerState:
        """The endpoint's state for a new trailer request: ON, OFF, or PROBING when this
        request is the one that decides (others wait for it, at most
        :data:`_PROBE_WAIT` seconds, then go the two-pass way: OFF)."""
        while True:
            state = self.trailer_states.get(origin)
            if state is None:
                self.trailer_states[origin] = TrailerState.PROBING
                return TrailerState.PROBING
            if state is not TrailerState.PROBING:
                return state
            event = self._probes.setdefault(origin, asyncio.Event())
            try:
                async with asyncio.timeout(_PROBE_WAIT):
                    await event.wait()
            except TimeoutError:
                return TrailerState.OFF

    def _trailer_settle(
        self, origin: str, claimed: TrailerState, outcome: TrailerState | None
    ) -> None:
        """Record what a trailer request taught (``outcome``, None: nothing, so a probe
        leaves the endpoint undecided) and wake the requests waiting for a probe."""
        if outcome is not None:
            self.trailer_states[origin] = outcome
        elif claimed is TrailerState.PROBING:
            self.trailer_states.pop(origin, None)
        if claimed is TrailerState.PROBING:
            event = self._probes.pop(origin, None)
            if event is not None:
                event.set()

    def _trailer_off(self, origin: str, why: str) -> TrailerState:
        """The endpoint takes no trailers (the caller re-sends two-pass): counted, and
        said once per endpoint in the log (its origin and the store's answer only)."""
        if self.trailer_states.get(origin) is not TrailerState.OFF:
            log.info(
                "%s takes no trailing checksums (%s): parts go the two-pass way "
                "(a checksum pass, then the send)",
                origin,
                why,
            )
        self.trailer_refusal = why
        self._stats.trailer_checksums = False
        self._stats.trailer_fallbacks += 1
        return TrailerState.OFF

    def _now(self) -> str:
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._date_time = amz_date(now)
        return self._date_time

    async def _send(
        self, session: aiohttp.ClientSession, operation: str, target: Target, request: Request
    ) -> dict[str, Any]:
        creds = await self._credentials.get_frozen_credentials()
        headers = signed_headers(
            target, request, creds.access_key, creds.secret_key, creds.token, self._now()
        )
        url = target.origin + request.path + ("?" + request.wire_query if request.query else "")
        data = request.body
        if isinstance(data, FileRange):  # sendfile on plain TCP only (never under TLS)
            zero_copy = self.zero_copy and target.origin.startswith("http:")
            data = FilePayload(data, zero_copy=zero_copy, timeout=self._config.read_timeout)
        elif isinstance(data, TrailerBody):  # aws-chunked: checksummed as it is written
            data = TrailerPayload(data)
        failure: Exception | None = None
        try:
            async with session.request(
                request.method,
                URL(url, encoded=True),
                headers=headers,
                data=data,
                allow_redirects=False,
            ) as resp:
                body = await resp.read()
                status = resp.status
                resp_headers = resp.headers
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            failure = connection_error(exc, url)
        finally:
            if isinstance(data, FilePayload):
                self.zero_copy_bytes += data.zero_copy_bytes
        if failure is not None:  # raised here, the aiohttp error (its headers) is not kept
            raise failure
        if status < 300:
            if not is_error_200(body, CLOSING_TAGS.get(operation)):
                return parse_success(operation, resp_headers, body)
            status = 500
        error = client_error(
            self._models[operation], status, resp_headers, body, self._client.exceptions.from_code
        )
        if is_redirect(status, error.response.get("Error", {})):
            raise _Redirected
        raise error


__all__ = [
    "FastClient",
    "client_kwargs",
    "guard_object_keys",
    "make_session",
    "open_error",
    "share_verify_context",
]
