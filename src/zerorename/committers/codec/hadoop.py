"""What S3A's commit records need beyond plain JSON: the ``uri`` of an upload as Hadoop's
``Path`` writes it, and the ``iostatistics`` object (Hadoop's ``IOStatisticsSnapshot``).

Hadoop parses a ``.pending``'s ``uri`` with ``java.net.URI``: a key with a space, '%' or
'#' must be percent-encoded there, or Hadoop refuses the record. Pure: no I/O.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from zerorename.committers.codec.validate import MAX_INT

#: characters java.net.URI keeps as they are in a path (unreserved, punctuation, '/', '@')
_URI_PATH_SAFE = "/-_.!~*'();:@&=+$,"
#: the schemes an upload's ``uri`` may name
_SCHEMES = ("s3a", "s3", "s3n")
#: the smallest value a Java long holds (metrics and statistics are longs)
MIN_LONG = -(2**63)

#: the members of an ``IOStatisticsSnapshot``: four maps of name to long, one of name to
#: a mean (samples and sum)
_LONG_MAPS = ("counters", "gauges", "minimums", "maximums")
_MEANS = "meanstatistics"


def s3a_uri(bucket: str, key: str) -> str:
    """``s3a://bucket/key`` with the key percent-encoded where java.net.URI needs it."""
    return f"s3a://{bucket}/{quote(key, safe=_URI_PATH_SAFE)}"


def uri_names(uri: str, bucket: str, key: str) -> bool:
    """True when ``uri`` names ``bucket``/``key``: written as it is (zerorename 0.1's
    ``s3://bucket/key``) or percent-encoded as Hadoop writes it (``s3a://...``)."""
    for scheme in _SCHEMES:
        if uri == f"{scheme}://{bucket}/{key}":
            return True
    try:
        parts = urlsplit(uri)
        path = unquote(parts.path, errors="strict")
    except ValueError:  # a bad port, or an escape that is not UTF-8
        return False
    return (
        parts.scheme in _SCHEMES
        and parts.netloc == bucket
        and not parts.query
        and not parts.fragment
        and path == "/" + key
    )


def iso_date(ts: float) -> str:
    """A record's ``date``: the time in UTC, ISO 8601 (S3A only needs a string)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def is_long(value: Any) -> bool:
    """An integer a Java long holds (not a bool)."""
    return type(value) is int and MIN_LONG <= value <= MAX_INT


def snapshot(
    counters: Mapping[str, int],
    *,
    maximums: Mapping[str, int] | None = None,
    minimums: Mapping[str, int] | None = None,
    means: Mapping[str, tuple[int, int]] | None = None,
) -> dict[str, Any]:
    """An ``iostatistics`` object: counters, no gauges, and ``means`` as (samples, sum)."""
    return {
        "counters": dict(counters),
        "gauges": {},
        "minimums": dict(minimums or {}),
        "maximums": dict(maximums or {}),
        _MEANS: {k: {"samples": n, "sum": s} for k, (n, s) in (means or {}).items()},
    }


def check_iostatistics(value: Any) -> dict[str, Any] | None:
    """An ``iostatistics`` member as read (None when absent or null); TypeError naming the
    problem when it is not the shape Hadoop writes. Members it does not know are kept."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError("iostatistics must be a JSON object")
    for name in _LONG_MAPS:
        m = value.get(name)
        if m is not None and (not isinstance(m, dict) or not all(is_long(v) for v in m.values())):
            raise TypeError(f"iostatistics {name} must map names to integers")
    means = value.get(_MEANS)
    if means is not None:
        if not isinstance(means, dict):
            raise TypeError(f"iostatistics {_MEANS} must be a JSON object")
        for mean in means.values():
            if not (
                isinstance(mean, dict)
                and is_long(mean.get("samples", 0))
                and is_long(mean.get("sum", 0))
            ):
                raise TypeError(f"iostatistics {_MEANS} must hold samples and sum as integers")
    return value


def counters_of(stats: Mapping[str, Any] | None) -> dict[str, int]:
    """The counters of a checked ``iostatistics`` object (empty when there are none)."""
    if not stats:
        return {}
    c = stats.get("counters")
    return dict(c) if isinstance(c, dict) else {}


def add_counters(total: dict[str, int], more: Mapping[str, int]) -> None:
    """Sum ``more`` into ``total`` (as Hadoop aggregates a pendingset's commits)."""
    for k, v in more.items():
        total[k] = total.get(k, 0) + v
