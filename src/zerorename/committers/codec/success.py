"""The ``_SUCCESS`` summary of a committed job, in S3A's ``SuccessData`` format.

Hadoop reads it only with S3A's ``name``, ``metrics`` as longs (a float becomes 0 there,
so durations are whole milliseconds) and ``filenames`` as S3A writes them, ``"/" +
key``; its ``iostatistics`` hold the commit's counters under S3A's names. Read: S3A's
(and the manifest committer's, which is S3A's format plus ``success``/``state``/``stage``)
and zerorename 0.1's (its own ``name``, relative file names, float metrics).
"""

from __future__ import annotations

import json
import math
import socket
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from zerorename.committers.codec.hadoop import (
    MIN_LONG,
    check_iostatistics,
    is_long,
    iso_date,
    snapshot,
)
from zerorename.committers.codec.validate import MAX_INT, MAX_TIME, Fields, load_json
from zerorename.committers.errors import RecordFormatError

#: the name Hadoop requires (``SuccessData.NAME``)
SUCCESS_NAME = "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
#: zerorename 0.1's name, still read
LEGACY_SUCCESS_NAME = "zerorename.committers.SuccessData/1"
#: file names a ``_SUCCESS`` lists at most (as S3A)
MAX_SUCCESS_FILENAMES = 100
_MAX_MS = int(MAX_TIME * 1000)

#: our metric -> S3A's counter of the same thing, in the written ``iostatistics``
S3A_COUNTERS = {
    "uploads": "committer_commits_completed",
    "bytes": "committer_bytes_committed",
    "pendingsets": "committer_tasks_completed",
    "retries": "store_io_retry",
    "throttles": "store_io_throttled",
}
#: S3A's duration statistic of a whole job commit (count, .min, .max, .mean)
COMMIT_JOB = "committer_commit_job"
#: the metric holding the job commit's duration in milliseconds
DURATION_MS = "duration_ms"


def _long(value: int | float) -> int:
    """A metric as the long S3A reads: floats rounded, clamped to a long's range."""
    if isinstance(value, float):
        value = round(value) if math.isfinite(value) else 0
    return max(MIN_LONG, min(MAX_INT, int(value)))


def success_filename(key: str) -> str:
    """A committed object as a ``_SUCCESS`` lists it: ``"/" + key``, as S3A."""
    return "/" + key


def key_of_filename(name: str, bucket: str) -> str | None:
    """The object key a ``_SUCCESS`` file name stands for: ``"/" + key`` (S3A), or a URI
    of ``bucket`` (the manifest committer); None for another form (zerorename 0.1's
    relative names) or another bucket."""
    if name.startswith("/"):
        return name[1:] or None
    if "://" not in name:
        return None
    try:
        parts = urlsplit(name)
        path = unquote(parts.path, errors="strict")
    except ValueError:
        return None
    if parts.netloc != bucket or not path.startswith("/"):
        return None
    return path[1:] or None


def _text(f: Fields, name: str, *, legacy: bool) -> str:
    """A string member; S3A writes a Java null where it set none (read as '')."""
    if not legacy and f.d.get(name) is None:
        return ""
    return f.str_(name, required=False, empty=True)


@dataclass
class SuccessData:
    """The ``_SUCCESS`` summary of a committed job (S3A ``SuccessData``).

    ``filenames`` as the record holds them (``"/" + key`` when written by this version);
    ``iostatistics`` None: derived from ``metrics`` when written; ``success``: the
    manifest committer's outcome flag (None when the record has none)."""

    job_id: str
    committer: str
    description: str = ""
    job_id_source: str = "zerorename"
    timestamp: float = field(default_factory=time.time)
    hostname: str = field(default_factory=socket.gethostname)
    metrics: dict[str, int | float] = field(default_factory=dict)
    diagnostics: dict[str, str] = field(default_factory=dict)
    filenames: list[str] = field(default_factory=list)
    iostatistics: dict[str, Any] | None = None
    success: bool | None = None

    def derived_iostatistics(self) -> dict[str, Any]:
        """The commit's counters under S3A's names (see :data:`S3A_COUNTERS`)."""
        m = self.metrics
        counters = {s3a: _long(m[ours]) for ours, s3a in S3A_COUNTERS.items() if ours in m}
        counters["committer_jobs_completed"] = 1
        if DURATION_MS not in m:
            return snapshot(counters)
        ms = _long(m[DURATION_MS])
        counters[COMMIT_JOB] = 1
        return snapshot(
            counters,
            minimums={f"{COMMIT_JOB}.min": ms},
            maximums={f"{COMMIT_JOB}.max": ms},
            means={f"{COMMIT_JOB}.mean": (1, ms)},
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": SUCCESS_NAME,
            "timestamp": round(self.timestamp * 1000),
            "date": iso_date(self.timestamp),
            "hostname": self.hostname,
            "committer": self.committer,
            "description": self.description,
            "jobId": self.job_id,
            "jobIdSource": self.job_id_source,
            "metrics": {k: _long(v) for k, v in self.metrics.items()},
            "diagnostics": dict(self.diagnostics),
            "filenames": list(self.filenames[:MAX_SUCCESS_FILENAMES]),
            "iostatistics": (
                self.derived_iostatistics() if self.iostatistics is None else self.iostatistics
            ),
        }
        if self.success is not None:
            d["success"] = self.success
        return d

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=1).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | str, *, location: str = "") -> SuccessData:
        """S3A's ``_SUCCESS`` (also the manifest committer's) or zerorename 0.1's;
        RecordFormatError naming ``location`` for anything else."""
        f = Fields(load_json(data, "_SUCCESS", location), "_SUCCESS", location)
        name = f.d.get("name")
        if name not in (SUCCESS_NAME, LEGACY_SUCCESS_NAME):
            raise RecordFormatError(
                f"not a _SUCCESS record zerorename reads (name {name!r}; S3A's is "
                f"{SUCCESS_NAME!r})",
                location=location,
            )
        legacy = name == LEGACY_SUCCESS_NAME
        metrics = f.d.get("metrics", {})
        if metrics is None and not legacy:
            metrics = {}
        if not isinstance(metrics, dict) or not all(
            is_long(v)
            or (legacy and type(v) is float and MIN_LONG <= v <= MAX_INT)  # finite: decoder
            for v in metrics.values()
        ):
            raise f.fail("metrics", "must map names to integers")
        success = f.d.get("success")
        if success is not None and type(success) is not bool:
            raise f.fail("success", "must be true, false or absent")
        try:
            stats = check_iostatistics(f.d.get("iostatistics"))
        except TypeError as exc:
            raise f.fail("iostatistics", str(exc)) from None
        return cls(
            job_id=f.str_("jobId") if legacy else _text(f, "jobId", legacy=False),
            committer=f.str_("committer") if legacy else _text(f, "committer", legacy=False),
            description=_text(f, "description", legacy=legacy),
            job_id_source=_text(f, "jobIdSource", legacy=legacy),
            timestamp=f.int_("timestamp", hi=_MAX_MS) / 1000.0,
            hostname=_text(f, "hostname", legacy=legacy),
            metrics=dict(metrics),
            diagnostics=f.str_map("diagnostics"),
            filenames=f.str_list("filenames", required=False),
            iostatistics=stats,
            success=success,
        )
