"""Byte sizes: one parser and one formatter for every option, flag and argument.

Units are always binary, as in Spark's own size options: ``16m`` == ``16mb`` ==
``16MiB`` == 16 * 1024 * 1024 bytes. Plain digits are bytes.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["GiB", "KiB", "MiB", "TiB", "format_size", "parse_size"]

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
TiB = 1024 * GiB

#: the largest size accepted (a guard against typos such as ``9999999t``)
MAX_SIZE = 1024 * TiB

_SIZE_RE = re.compile(
    r"\s*(?P<int>[0-9]+(?:_[0-9]+)*)(?:\.(?P<frac>[0-9]+))?\s*(?P<unit>[kmgt]?(?:i?b)?)\s*",
    re.IGNORECASE | re.ASCII,
)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}
_HINT = "use bytes or a binary suffix, e.g. 4096, 256k, 16m, 1g, 64MiB"


def parse_size(text: str | int, what: str = "size") -> int:
    """Bytes from ``"16m"``, ``"16MiB"``, ``"1.5g"`` or ``"4096"`` (k/m/g/t, with or without
    ``b``/``ib``, any case, always binary); an int is checked and returned. Raises
    ValueError, one line naming ``what``, for anything else, a fraction of a byte,
    a negative size or more than 1 PiB."""
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise ValueError(f"{what} must be a size, got {type(text).__name__}")
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE_RE.fullmatch(text)
        unit = m.group("unit").lower() if m else ""
        if m is None or (unit.endswith("ib") and len(unit) != 3):
            raise ValueError(f"{what} {text!r} is not a size ({_HINT})")
        number = Fraction(f"{m.group('int').replace('_', '')}.{m.group('frac') or '0'}")
        exact = number * 1024 ** _POWERS[unit.rstrip("ib")]
        if exact.denominator != 1:
            raise ValueError(f"{what} {text!r} is not a whole number of bytes")
        value = int(exact)
    if not 0 <= value <= MAX_SIZE:
        raise ValueError(f"{what} {text!r} is out of range (0 to 1PiB)")
    return value


def format_size(n: int) -> str:
    """``16777216`` -> ``"16MiB"``: the largest binary unit that divides ``n``, else bytes
    (``"4097B"``); :func:`parse_size` reads it back."""
    for unit, size in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"
