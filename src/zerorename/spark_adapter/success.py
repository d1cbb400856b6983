"""Reading a committed job's ``_SUCCESS`` summary: how a Spark user learns the outcome
(zerorename's, S3A's or zerorename 0.1's).

The job commit runs in a Python worker Spark starts on the driver side, not in the
user's process, so the summary travels through the store: ``read_success(path)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zerorename.committers import Destination, SuccessData
from zerorename.committers import objectstore as caps
from zerorename.committers.codec.hadoop import counters_of
from zerorename.committers.codec.success import key_of_filename
from zerorename.engine import EngineConfig
from zerorename.spark_adapter.bridge import get_bridge


@dataclass(frozen=True)
class SuccessInfo:
    """A job's ``_SUCCESS``: what it wrote and how long the commit took. Read from
    zerorename's records and from S3A's (and the manifest committer's) alike."""

    uri: str
    job_id: str
    committer: str
    files: int
    bytes: int
    #: rows written (None when the writer did not report rows, e.g. plain committers).
    rows: int | None
    #: job commit duration in seconds, as the committer measured it (0 when unknown).
    duration_seconds: float
    timestamp: float
    #: the committed files relative to the destination (as many as the record lists)
    filenames: list[str] = field(default_factory=list)
    metrics: dict[str, int | float] = field(default_factory=dict)
    diagnostics: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_record(
        cls, uri: str, data: SuccessData, dest: Destination | None = None
    ) -> SuccessInfo:
        """The summary of ``data``; ``dest`` turns S3A's ``"/" + key`` file names into
        names relative to it (names outside it, or without ``dest``, stay as they are)."""
        m = data.metrics
        counters = counters_of(data.iostatistics)
        rows = m.get("rows")
        files = m.get("files", counters.get("committer_commits_completed", len(data.filenames)))
        nbytes = m.get("bytes", counters.get("committer_bytes_committed", 0))
        if "duration_ms" in m:
            duration = m["duration_ms"] / 1000.0
        else:
            duration = float(m.get("duration_seconds", 0.0))
        return cls(
            uri=uri,
            job_id=data.job_id,
            committer=data.committer,
            files=int(files),
            bytes=int(nbytes),
            rows=int(rows) if rows is not None else None,
            duration_seconds=duration,
            timestamp=data.timestamp,
            filenames=[_relative(name, dest) for name in data.filenames],
            metrics=dict(m),
            diagnostics=dict(data.diagnostics),
        )


def _relative(name: str, dest: Destination | None) -> str:
    if dest is None:
        return name
    key = key_of_filename(name, dest.bucket)
    rel = dest.rel(key) if key is not None else None
    return name if rel is None else rel


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
    raw = bridge.run(engine.get_object(dest.bucket, key, max_size=caps.SUCCESS_CAP))
    uri = dest.uri_of(key)
    return SuccessInfo.from_record(uri, SuccessData.from_json(raw, location=uri), dest)
