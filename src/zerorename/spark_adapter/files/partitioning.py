"""Hive-style partition directories written exactly as Spark writes them (pure, no I/O).

Spark turns a partition value into a string (``Cast(value AS STRING)`` in the session
time zone), maps null and '' to ``__HIVE_DEFAULT_PARTITION__`` and escapes the column
name and the value with ``ExternalCatalogUtils.escapePathName``: control characters and
``"#%'*/:=?\\{[]^`` plus DEL become ``%XX`` (upper-case hex). Readers (Spark, pyarrow,
Hive) unescape them back.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
from collections.abc import Sequence
from typing import Any
from zoneinfo import ZoneInfo

from zerorename.spark_adapter.errors import OptionError

DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"

_ESCAPED = frozenset(
    [chr(c) for c in range(0x00, 0x20)]
    + ['"', "#", "%", "'", "*", "/", ":", "=", "?", "\\", "\x7f", "{", "[", "]", "^"]
)


def escape_path_name(text: str) -> str:
    """Spark's ``escapePathName``: the characters above become ``%XX``; all else stays."""
    if not any(c in _ESCAPED for c in text):
        return text
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def unescape_path_name(text: str) -> str:
    """Inverse of :func:`escape_path_name` (``%XX`` with two hex digits only)."""
    if "%" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%" and i + 2 < len(text) and _is_hex(text[i + 1 : i + 3]):
            out.append(chr(int(text[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _is_hex(s: str) -> bool:
    return len(s) == 2 and all(c in "0123456789abcdefABCDEF" for c in s)


def _java_double(x: float) -> str:
    """Java's ``Double.toString``: plain notation for 1e-3 <= |x| < 1e7, else d.dddE±n."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    return _java_from_repr(repr(x), abs(x))


def _java_float(x: float) -> str:
    """Java's ``Float.toString`` of a float32 value (shortest digits that round-trip)."""
    if math.isnan(x) or math.isinf(x) or x == 0:
        return _java_double(x)
    f32 = struct.unpack("<f", struct.pack("<f", x))[0]
    for precision in range(1, 10):
        text = f"{f32:.{precision}g}"
        try:
            same = struct.unpack("<f", struct.pack("<f", float(text)))[0] == f32
        except OverflowError:  # rounded past float32's largest value
            same = False
        if same:
            return _java_from_repr(repr(float(text)), abs(f32))
    return _java_from_repr(repr(f32), abs(f32))


def _java_from_repr(text: str, magnitude: float) -> str:
    d = decimal.Decimal(text)
    sign = "-" if d.is_signed() else ""
    digits = "".join(str(x) for x in d.as_tuple().digits).rstrip("0") or "0"
    exponent = d.adjusted()  # position of the first significant digit
    if 1e-3 <= magnitude < 1e7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            frac = digits[exponent + 1 :] or "0"
        else:
            whole = "0"
            frac = "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{frac}"
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mantissa}E{exponent}"


def _timestamp_text(value: dt.datetime, tz: str | None) -> str:
    if value.tzinfo is not None and tz:
        value = value.astimezone(ZoneInfo(tz))
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    return text


def value_text(value: Any, type_name: str = "", tz: str | None = None) -> str | None:
    """The string Spark gives a partition value (None for null).

    ``type_name`` is the Arrow type's string form (``float``, ``double``, ``timestamp[us,
    tz=UTC]``...); it matters for floats (float32 prints fewer digits) and timestamps
    (printed in their own time zone, which is Spark's session zone).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_float(value) if type_name in ("float", "halffloat") else _java_double(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f") if value.is_finite() else str(value)
    if isinstance(value, dt.datetime):
        return _timestamp_text(value, tz)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def partition_component(column: str, value: str | None) -> str:
    """One ``column=value`` directory name."""
    text = DEFAULT_PARTITION_NAME if value is None or value == "" else escape_path_name(value)
    return f"{escape_path_name(column)}={text}"


def partition_dir(columns: Sequence[str], values: Sequence[str | None]) -> str:
    """``c1=v1/c2=v2`` for the partition columns and their (already stringified) values."""
    if len(columns) != len(values):
        raise ValueError("one value per partition column is needed")
    return "/".join(partition_component(c, v) for c, v in zip(columns, values, strict=True))


def check_partition_columns(names: list[str], partition_by: Sequence[str]) -> None:
    """Refuse partition columns that are not in the data, or that leave no data column."""
    missing = [c for c in partition_by if c not in names]
    if missing:
        raise OptionError(f"partitionBy columns {missing} are not in the data ({names})")
    if all(n in partition_by for n in names):
        raise OptionError("every column is a partition column: no data would be written")
