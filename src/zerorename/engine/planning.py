"""Part planning for multipart uploads: pure functions, no I/O.

S3's limits: parts of 5 MiB..5 GiB (the last part may be smaller), at most 10,000
parts, objects of at most 5 TiB. Known sizes get one fitting part size; streams of
unknown size start at the configured part size and double it every
``GROWTH_INTERVAL`` parts, which reaches 5 TiB within 10,000 parts from 5 MiB.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from zerorename.engine.errors import EngineConfigError, PlanError, StreamTooLarge
from zerorename.units import GiB, MiB, TiB

MIN_PART_SIZE = 5 * MiB
MAX_PART_SIZE = 5 * GiB
MAX_PARTS = 10_000
MAX_OBJECT_SIZE = 5 * TiB
GROWTH_INTERVAL = 1_000
MAX_KEY_BYTES = 1024

# S3's bucket naming rules: 3-63 of [a-z0-9.-], a letter or digit at both ends
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IPV4_RE = re.compile(r"\d{1,3}(\.\d{1,3}){3}")


@dataclass(frozen=True)
class PartPlan:
    """How an object of known size is cut: ``count`` parts of ``part_size`` (last smaller)."""

    size: int
    part_size: int
    count: int

    def part_length(self, number: int) -> int:
        """Length of part ``number`` (1-based)."""
        if not 1 <= number <= self.count:
            raise IndexError(f"part {number} outside 1..{self.count}")
        if number < self.count:
            return self.part_size
        return self.size - self.part_size * (self.count - 1)


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def check_part_size(part_size: int) -> None:
    """Refuse a part size S3 would reject."""
    if not MIN_PART_SIZE <= part_size <= MAX_PART_SIZE:
        raise EngineConfigError(
            f"part size {part_size} is outside S3's 5 MiB..5 GiB range; "
            f"choose a part size between {MIN_PART_SIZE} and {MAX_PART_SIZE} bytes"
        )


def plan_known_size(size: int, part_size: int) -> PartPlan:
    """Plan an object of known size: the configured part size, grown (in whole MiB)
    just enough to fit in 10,000 parts. Zero bytes is one empty part."""
    check_part_size(part_size)
    if size < 0:
        raise PlanError(f"object size must be >= 0, got {size}")
    if size > MAX_OBJECT_SIZE:
        raise PlanError(
            f"object of {size} bytes exceeds S3's 5 TiB ({MAX_OBJECT_SIZE} bytes) object limit; "
            "split the data into several objects"
        )
    if size == 0:
        return PartPlan(size=0, part_size=part_size, count=1)
    chosen = part_size
    if -(-size // chosen) > MAX_PARTS:
        chosen = min(MAX_PART_SIZE, _round_up(-(-size // MAX_PARTS), MiB))
    return PartPlan(size=size, part_size=chosen, count=-(-size // chosen))


def stream_part_size(number: int, base: int) -> int:
    """Size of part ``number`` (1-based) of a stream of unknown size."""
    if number < 1:
        raise ValueError("part numbers start at 1")
    if number > MAX_PARTS:
        raise StreamTooLarge(
            f"stream needs more than {MAX_PARTS} parts; start with a larger part size"
        )
    return min(MAX_PART_SIZE, base << ((number - 1) // GROWTH_INTERVAL))


def stream_capacity(base: int) -> int:
    """Largest stream (bytes) that fits in 10,000 parts starting at ``base``."""
    total = 0
    for group in range(MAX_PARTS // GROWTH_INTERVAL):
        total += GROWTH_INTERVAL * min(MAX_PART_SIZE, base << group)
    return min(total, MAX_OBJECT_SIZE)


def is_int(value: object) -> bool:
    """An int that is not a bool (JSON's true is not a size)."""
    return isinstance(value, int) and not isinstance(value, bool)


def finite_number(value: object) -> float | None:
    """``value`` as a float when it is a finite int or float (not a bool), else None (also
    for an int too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def bucket_problem(bucket: object) -> str | None:
    """What is wrong with a bucket name by S3's rules (None: nothing). The one check
    behind :func:`validate_bucket` and the records' validation, so both say the same."""
    if not isinstance(bucket, str):
        return f"bucket must be a string, got {type(bucket).__name__}"
    if not _BUCKET_RE.fullmatch(bucket) or ".." in bucket or _IPV4_RE.fullmatch(bucket):
        return (
            f"invalid bucket name {bucket!r}: use 3-63 characters of lower-case letters, "
            "digits, '.' and '-', starting and ending with a letter or digit, no '..', not "
            "an IP address (pass the bucket alone, not an s3:// URL or a path)"
        )
    return None


def key_problem(key: object) -> str | None:
    """What is wrong with an object key (None: nothing): S3 keys are non-empty strings of
    at most 1024 UTF-8 bytes. An empty key would address the bucket itself."""
    if not isinstance(key, str):
        return f"object key must be a string, got {type(key).__name__}"
    if key == "":
        return "object key must be a non-empty string (an empty key addresses the bucket)"
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        return f"object key {key!r} is not valid Unicode (a lone surrogate): S3 keys are UTF-8"
    if size > MAX_KEY_BYTES:
        return f"object key is {size} bytes in UTF-8; S3 allows at most {MAX_KEY_BYTES}"
    return None


def validate_bucket(bucket: str) -> None:
    """Refuse bucket names S3 rejects (:func:`bucket_problem`) with an EngineConfigError."""
    problem = bucket_problem(bucket)
    if problem is not None:
        raise EngineConfigError(problem)


def validate_key(key: str) -> None:
    """Refuse empty, non-UTF-8 and over-long keys (:func:`key_problem`) with an
    EngineConfigError."""
    problem = key_problem(key)
    if problem is not None:
        raise EngineConfigError(problem)


def upload_prefix(prefix: str, *, directory: bool = True) -> str:
    """The ListMultipartUploads prefix for ``prefix``: a directory (trailing '/') unless
    ``directory`` is False, so 'data/set1' never matches 'data/set10/...'."""
    if directory and prefix and not prefix.endswith("/"):
        return prefix + "/"
    return prefix
