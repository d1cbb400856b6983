"""Values as Spark's JVM writers print them (pure): Java's ``Double.toString`` and
``Float.toString``, a subset of ``DateTimeFormatter`` patterns, zones and charsets.

Spark's CSV and JSON writers turn values into text with Java's own methods; matching them
byte for byte needs the same rules here. Patterns and charsets this module cannot format
exactly as Spark does are refused when the options are parsed, never approximated.
"""

from __future__ import annotations

import codecs
import datetime as dt
import decimal
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from zerorename.spark_adapter.errors import OptionError

_EPOCH = dt.datetime(1970, 1, 1)


def _java_layout(digits: str, exp10: int, negative: bool) -> str:
    """Java's layout of a shortest decimal ``0.<digits> x 10**exp10`` (Double.toString rules:
    plain for 1e-3 <= |v| < 1e7, else ``d.dddE<n>``)."""
    sign = "-" if negative else ""
    point = exp10  # digits before the decimal point
    if -3 <= point - 1 < 7:  # 1e-3 <= |v| < 1e7
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    frac = digits[1:] or "0"
    return f"{sign}{digits[0]}.{frac}E{point - 1}"


def _digits(text: str) -> tuple[str, int]:
    """Significant digits of a decimal text and how many of them precede the point
    (``'0.00123'`` -> ``('123', -2)``)."""
    _, digs, exp = decimal.Decimal(text).as_tuple()
    assert isinstance(exp, int)
    digits = "".join(map(str, digs))
    point = len(digits) + exp
    return digits.rstrip("0") or "0", point


def java_double(value: float) -> str:
    """``Double.toString(value)`` (JDK 19+ shortest digits; older JDKs print a few values,
    such as 2.82879384806159E17, with extra digits that read back to the same double)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if struct.pack(">d", value)[0] & 0x80 else "0.0"
    digits, point = _digits(repr(abs(value)))
    if len(digits) == 1:  # Java picks the closest decimal of two digits (4.9E-324, not 5E-324)
        digits, point = _digits(f"{abs(value):.1e}")
    return _java_layout(digits, point, value < 0)


_F32_MAX = 3.4028234663852886e38
_F32_ROUNDS_TO_MAX = 3.4028235677973366e38  # FLT_MAX + half an ulp


def _f32(value: float) -> float:
    """``value`` rounded to float32 (round half to even, as the JVM parses)."""
    try:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:
        return _F32_MAX if abs(value) < _F32_ROUNDS_TO_MAX else float("inf")


def java_float(value: float) -> str:
    """``Float.toString(value)`` for a float32 value (shortest digits that read back)."""
    if value != value or value in (float("inf"), float("-inf")) or value == 0:
        return java_double(value)
    for places in range(1, 9):  # two digits at least, as for doubles
        text = f"{abs(value):.{places}e}"
        if _f32(float(text)) == abs(value):
            break
    digits, point = _digits(text)
    return _java_layout(digits, point, value < 0)


# -- DateTimeFormatter patterns ------------------------------------------------------------

#: letter -> counts this module formats exactly as java.time does (others are refused).
_LETTERS: dict[str, tuple[int, ...]] = {
    "y": (1, 2, 3, 4),
    "M": (1, 2),
    "d": (1, 2),
    "H": (1, 2),
    "m": (1, 2),
    "s": (1, 2),
    "S": tuple(range(1, 10)),
    "X": (3,),
}

Part = Callable[[dt.datetime, int], str]


def _offset_text(seconds: int, with_seconds: bool) -> str:
    """``XXX``: ``Z`` for zero, else ``+HH:MM`` (java.time drops an offset's seconds, such
    as a local mean time's -07:52:58; Spark's default CSV/JSON pattern prints them)."""
    if seconds == 0:
        return "Z"
    sign = "+" if seconds > 0 else "-"
    h, rest = divmod(abs(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{sign}{h:02d}:{m:02d}" + (f":{s:02d}" if s and with_seconds else "")


def _field(letter: str, count: int, offset_seconds: bool) -> Part:
    if letter == "y":
        if count == 2:
            return lambda t, o: f"{t.year % 100:02d}"
        return lambda t, o: f"{t.year:0{count}d}"
    if letter == "S":
        return lambda t, o: f"{t.microsecond:06d}000"[:count]
    if letter == "X":
        return lambda t, o: _offset_text(o, offset_seconds)
    attr = {"M": "month", "d": "day", "H": "hour", "m": "minute", "s": "second"}[letter]
    return lambda t, o: f"{getattr(t, attr):0{count}d}"


def _literal(text: str) -> Part:
    return lambda t, o: text


@dataclass(frozen=True)
class DateTimePattern:
    """A compiled ``DateTimeFormatter`` pattern; optional sections ``[...]`` print (every
    field is available when formatting, as in java.time)."""

    pattern: str
    parts: tuple[Part, ...]
    has_offset: bool

    def format(self, local: dt.datetime, offset_seconds: int = 0) -> str:
        return "".join(p(local, offset_seconds) for p in self.parts)


def compile_pattern(
    pattern: str, option: str, *, date_only: bool = False, offset_seconds: bool = False
) -> DateTimePattern:
    """Compile ``pattern`` or refuse it (one line naming the option and what is supported).
    ``offset_seconds``: ``XXX`` prints an offset's seconds (Spark's default pattern does)."""
    parts: list[Part] = []
    has_offset = False
    i, n = 0, len(pattern)
    supported = "y M d H m s S XXX, quoted literals and [optional] sections"
    while i < n:
        ch = pattern[i]
        if ch == "'":
            end = pattern.find("'", i + 1)
            while end != -1 and end + 1 < n and pattern[end + 1] == "'":
                end = pattern.find("'", end + 2)
            if end == -1:
                raise OptionError(f"{option} {pattern!r} has an unclosed quote")
            text = pattern[i + 1 : end].replace("''", "'")
            parts.append(_literal(text or "'"))
            i = end + 1
        elif ch in "[]":
            i += 1
        elif ch.isascii() and ch.isalpha():
            j = i
            while j < n and pattern[j] == ch:
                j += 1
            count = j - i
            if count not in _LETTERS.get(ch, ()) or (date_only and ch not in "yMd"):
                raise OptionError(
                    f"{option} {pattern!r}: {ch * count!r} is not supported by zerorename's "
                    f"writer (supported: {supported}); choose another pattern"
                )
            has_offset |= ch == "X"
            parts.append(_field(ch, count, offset_seconds))
            i = j
        else:
            parts.append(_literal(ch))
            i += 1
    return DateTimePattern(pattern, tuple(parts), has_offset)


_FIXED = re.compile(r"^(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?$")


def resolve_zone(name: str, option: str = "time zone") -> dt.tzinfo:
    """A zone id as Spark accepts it: region ids, ``UTC``/``Z``, ``+08:00``, ``GMT+8``."""
    text = name.strip()
    if text in ("Z", "UTC", "GMT", "UT"):
        return dt.UTC
    m = _FIXED.match(text)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        h, mi, s = int(m.group(2)), int(m.group(3) or 0), int(m.group(4) or 0)
        if h > 18 or mi > 59 or s > 59:
            raise OptionError(f"{option} {name!r} is not a valid offset; use e.g. +08:00")
        return dt.timezone(sign * dt.timedelta(hours=h, minutes=mi, seconds=s))
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise OptionError(
            f"{option} {name!r} is not a known zone id; use a region id such as "
            "America/Los_Angeles or an offset such as +08:00"
        ) from None


def micros_to_local(micros: int, zone: dt.tzinfo | None) -> tuple[dt.datetime, int]:
    """(wall-clock time, offset seconds) of a microsecond instant in ``zone`` (naive when
    ``zone`` is None: a TIMESTAMP_NTZ value)."""
    naive = _EPOCH + dt.timedelta(microseconds=micros)
    if zone is None:
        return naive, 0
    aware = naive.replace(tzinfo=dt.UTC).astimezone(zone)
    off = aware.utcoffset()
    return aware.replace(tzinfo=None), int(off.total_seconds()) if off is not None else 0


def days_to_date(days: int) -> dt.datetime:
    return _EPOCH + dt.timedelta(days=days)


# -- charsets -----------------------------------------------------------------------------

#: Spark's charset names (any case) -> (Python codec, BOM written once at the start).
#: Java's "UTF-16" writes a big-endian BOM; unmappable characters become '?' as in Java.
_CHARSETS: dict[str, tuple[str, bytes]] = {
    "utf-8": ("utf-8", b""),
    "utf8": ("utf-8", b""),
    "utf-16": ("utf-16-be", b"\xfe\xff"),
    "utf-16be": ("utf-16-be", b""),
    "utf-16le": ("utf-16-le", b""),
    "iso-8859-1": ("latin-1", b""),
    "latin1": ("latin-1", b""),
    "us-ascii": ("ascii", b""),
}


def charset(name: str, option: str = "encoding") -> tuple[str, bytes]:
    """(Python codec, BOM) for a Spark charset name, or refuse it."""
    key = name.strip().lower()
    if key not in _CHARSETS:
        raise OptionError(
            f"{option} {name!r} is not supported by zerorename's writer; use one of "
            "UTF-8, UTF-16, UTF-16BE, UTF-16LE, ISO-8859-1, US-ASCII"
        )
    codec, bom = _CHARSETS[key]
    codecs.lookup(codec)
    return codec, bom


class TextEncoder:
    """Encodes text for one output file: the BOM (if the charset has one) before the first
    bytes, nothing for a file that gets no text (as Java's stream encoder does)."""

    def __init__(self, name: str) -> None:
        self._codec, self._bom = charset(name)

    def encode(self, text: str) -> bytes:
        if not text:
            return b""
        data = text.encode(self._codec, errors="replace")
        if self._bom:
            data, self._bom = self._bom + data, b""
        return data
