"""Reading a committed job's ``_SUCCESS`` summary: how a Spark user learns the outcome.

The job commit runs in a Python worker Spark starts on the driver side, not in the
user's process, so the summary travels through the store: ``read_success(path)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zerorename.committers import Destination, SuccessData
from zerorename.engine import EngineConfig
from zerorename.spark_adapter.bridge import get_bridge


@dataclass(frozen=True)
class SuccessInfo:
    """A job's ``_SUCCESS``: what it wrote and how long the commit took."""

    uri: str
    job_id: str
    committer: str
    files: int
    bytes: int
    #: rows written (None when the writer did not report rows, e.g. plain committers).
    rows: int | None
    #: job commit duration in seconds, as the committer measured it.
    duration_seconds: float
    timestamp: float
    filenames: list[str] = field(default_factory=list)
    metrics: dict[str, int | float] = field(default_factory=dict)
    diagnostics: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_record(cls, uri: str, data: SuccessData) -> SuccessInfo:
        m = data.metrics
        rows = m.get("rows")
        return cls(
            uri=uri,
            job_id=data.job_id,
            committer=data.committer,
            files=int(m.get("files", len(data.filenames))),
            bytes=int(m.get("bytes", 0)),
            rows=int(rows) if rows is not None else None,
            duration_seconds=float(m.get("duration_seconds", 0.0)),
            timestamp=data.timestamp,
            filenames=list(data.filenames),
            metrics=dict(m),
            diagnostics=dict(data.diagnostics),
        )


def read_success(
    path: str,
    *,
    endpoint: str | None = None,
    region: str | None = None,
    profile: str | None = None,
    addressing_style: str = "auto",
    engine_config: EngineConfig | None = None,
    **config: Any,
) -> SuccessInfo:
    """Read ``<path>/_SUCCESS`` (credentials from the AWS chain, or ``engine_config``).

    Raises :class:`zerorename.engine.errors.ObjectNotFound` when the job did not commit.
    """
    dest = Destination.parse(path)
    cfg = engine_config or EngineConfig(
        endpoint_url=endpoint,
        region=region,
        profile=profile,
        addressing_style=addressing_style,  # type: ignore[arg-type]
        **config,
    )
    key = dest.key("_SUCCESS")
    bridge = get_bridge()
    engine = bridge.engine(cfg)
    raw = bridge.run(engine.get_object(dest.bucket, key))
    uri = dest.uri_of(key)
    return SuccessInfo.from_record(uri, SuccessData.from_json(raw, location=uri))
