"""CSV as Spark's own writer writes it (pure): its options, defaults and quoting rules.

Spark writes CSV with univocity-parsers' ``CsvWriter`` configured by ``CSVOptions``:
quote ``"``, escape ``\\`` (and ``\\`` to escape itself), quotes escaped rather than
doubled (``escapeQuotes``), leading and trailing whitespace trimmed, null as ``""``-less
empty field, empty strings as ``""``, a first-column value starting with ``#`` quoted
(univocity's default comment character), and a row that encodes to nothing skipped.
:class:`FieldEncoder` follows univocity 2.9.1's ``CsvWriter.append``/``appendQuoted``
step for step, so the output is Spark's byte for byte (tests compare with Spark).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from zerorename.spark_adapter.errors import OptionError
from zerorename.spark_adapter.files.javatext import (
    DateTimePattern,
    TextEncoder,
    charset,
    compile_pattern,
    days_to_date,
    java_double,
    java_float,
    micros_to_local,
    resolve_zone,
)

DATE_FORMAT = "yyyy-MM-dd"
TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss[.SSS][XXX]"
TIMESTAMP_NTZ_FORMAT = "yyyy-MM-dd'T'HH:mm:ss[.SSS]"
_COMMENT = "#"  # univocity's default comment character; Spark leaves it set when writing


def _is_ws(ch: str) -> bool:
    """univocity's whitespace when writing: every character up to ' ' (\\0 included)."""
    return ch <= " "


@dataclass(frozen=True)
class CsvDialect:
    """Spark's CSV write options, validated (defaults are Spark's)."""

    sep: str = ","
    quote: str = '"'
    escape: str = "\\"
    escape_quotes: bool = True
    quote_all: bool = False
    null_value: str = ""
    empty_value: str = '""'
    line_sep: str = "\n"
    header: bool = False
    ignore_leading: bool = True
    ignore_trailing: bool = True
    encoding: str = "UTF-8"

    @property
    def escape_escape(self) -> str:
        """univocity's charToEscapeQuoteEscaping: the escape itself unless it is the quote."""
        return "" if self.quote == self.escape else self.escape

    @property
    def newline(self) -> str:
        """univocity's normalized newline: a one-character lineSep, else '\\n'."""
        return self.line_sep if len(self.line_sep) == 1 else "\n"

    @property
    def triggers(self) -> frozenset[str]:
        """Characters that make a value quoted (besides the separator)."""
        chars = {"\n", "\r", self.newline, *self.line_sep}
        if self.escape_quotes:
            chars.add(self.quote)
        return frozenset(chars)


class _Field:
    """univocity's per-value appender: what was appended, and how many trailing
    characters ``updateWhitespace`` marked as whitespace (not written)."""

    __slots__ = ("parts", "ws")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.ws = 0

    def update_whitespace(self) -> None:
        out = "".join(self.parts)
        end = len(out)
        while end and _is_ws(out[end - 1]):
            end -= 1
        self.ws = len(out) - end

    def text(self) -> str:
        out = "".join(self.parts)
        return out[: len(out) - self.ws]


class FieldEncoder:
    """Encodes one value the way univocity's CsvWriter does with Spark's settings."""

    def __init__(self, d: CsvDialect) -> None:
        self.d = d
        self._triggers = d.triggers
        self._eol = d.line_sep
        specials = set(self._triggers) | {d.sep, d.quote, d.escape}
        self._special = re.compile("[" + re.escape("".join(sorted(specials))) + "]")

    def _char(self, f: _Field, ch: str) -> None:
        f.parts.append(self._eol if ch == self.d.newline else ch)

    def _end(self, f: _Field, allow_trim: bool, last: str) -> None:
        if allow_trim and self.d.ignore_trailing and _is_ws(last):
            f.update_whitespace()  # trailing whitespace is not written

    def _quoted(self, f: _Field, start: int, allow_trim: bool, element: str) -> None:
        d = self.d
        ch = "\0"
        for i in range(start, len(element)):
            ch = element[i]
            if ch == d.quote or ch == d.newline or ch == d.escape:
                f.parts.append(element[start:i])
                start = i + 1
                if ch == d.quote:
                    f.parts.append(d.escape)
                elif ch == d.escape and d.escape_escape:
                    f.parts.append(d.escape_escape)
                self._char(f, ch)
        f.parts.append(element[start:])
        self._end(f, allow_trim, ch)

    def _needs_quotes(self, start: int, element: str) -> bool:
        return any(c == self.d.sep or c in self._triggers for c in element[start:])

    def append(
        self, f: _Field, column: int, quoted: bool, allow_trim: bool, element: str, special: bool
    ) -> bool:
        """univocity's ``append``: writes ``element`` into ``f``; True when it is quoted."""
        d = self.d
        start = 0
        if allow_trim and d.ignore_leading:
            while start < len(element) and _is_ws(element[start]):
                start += 1
        length = len(element)
        if start < length and (
            element[start] == d.quote or (column == 0 and element[0] == _COMMENT)
        ):
            quoted = True
        if quoted:
            if special and length >= 2 and element[0] == d.quote and element[-1] == d.quote:
                f.parts.append(element)
                return False
            self._quoted(f, start, allow_trim, element)
            return True
        ch = "\0"
        for i in range(start, length):
            ch = element[i]
            if ch == d.quote or ch == d.sep or ch == d.escape or ch in self._triggers:
                f.parts.append(element[start:i])
                start = i + 1
                if ch == d.quote or ch == d.escape:
                    if self._needs_quotes(i, element):
                        self._quoted(f, i, allow_trim, element)
                        return True
                    f.parts.append(element[i:])
                    self._end(f, allow_trim, element[-1])
                    return quoted
                self._quoted(f, i, allow_trim, element)
                return True
        f.parts.append(element[start:])
        self._end(f, allow_trim, ch)
        return quoted

    def encode(self, value: str | None, column: int, allow_trim: bool = True) -> str:
        """One field as Spark writes it (``value`` None for SQL NULL)."""
        d = self.d
        if (
            value
            and not d.quote_all
            and value[0] > " "
            and value[-1] > " "
            and not (column == 0 and value[0] == _COMMENT)
            and self._special.search(value) is None
        ):
            return value  # the common case: nothing to quote, escape or trim
        # getStringValue(): null -> nullValue, empty or blank -> emptyValue
        special = True
        if value is None:
            element = d.null_value
        elif value == "" or (d.ignore_leading and all(_is_ws(c) for c in value)):
            element = d.empty_value
        else:
            element, special = value, False
        f = _Field()
        quoted = self.append(f, column, d.quote_all, allow_trim, element, special)
        text = f.text()
        if not text and not special:  # wrote nothing for a value: univocity's fallback
            self.append(f, column, quoted, allow_trim, d.empty_value, False)
            text = f.text()
        return f"{d.quote}{text}{d.quote}" if quoted else text

    def row(self, values: Sequence[str | None], allow_trim: bool = True) -> str:
        """A whole line with its separator, or '' for a row that encodes to nothing
        (univocity skips empty lines: a one-column row of NULL is not written)."""
        text = self.d.sep.join(self.encode(v, i, allow_trim) for i, v in enumerate(values))
        return text + self.d.line_sep if text else ""

    def header(self, names: list[str]) -> str:
        """The header line: univocity strips a name quoted in single quotes, then writes
        it as a value."""
        out = []
        for n in names:
            t = n.strip()
            out.append(n[1:-1] if len(t) > 2 and t[0] == "'" and t[-1] == "'" else n)
        return self.row(list(out))


# -- options -------------------------------------------------------------------------------

_BOOL = ("true", "false")


def _bool(opts: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    text = opts.get(key)
    if text is None:
        return default
    if text.strip().lower() not in _BOOL:
        raise OptionError(f"{name} must be true or false, got {text!r}")
    return text.strip().lower() == "true"


def _char(opts: Mapping[str, str], key: str, name: str, default: str) -> str:
    text = opts.get(key, default)
    if len(text) != 1:
        raise OptionError(f"{name} must be exactly one character, got {text!r}")
    return text


def line_sep(opts: Mapping[str, str], default: str = "\n", most: int = 2) -> str:
    """Spark's lineSep: 1 character (2 allowed, e.g. \\r\\n)."""
    text = opts.get("linesep", default)
    if not 1 <= len(text) <= most:
        raise OptionError(f"lineSep must be 1 to {most} characters, got {text!r}")
    return text


def parse_dialect(opts: Mapping[str, str]) -> CsvDialect:
    """The CSV dialect from lower-cased options (Spark's names and defaults)."""
    sep = opts.get("sep", opts.get("delimiter", ","))
    if sep == "\\t":
        sep = "\t"
    if len(sep) != 1:
        raise OptionError(f"sep must be one character (or \\t), got {sep!r}")
    quote = _char(opts, "quote", "quote", '"')
    escape = _char(opts, "escape", "escape", "\\")
    encoding = opts.get("encoding", opts.get("charset", "UTF-8"))
    charset(encoding)
    if sep in (quote, "\n", "\r"):
        raise OptionError(f"sep {sep!r} cannot be the quote or a line break")
    return CsvDialect(
        sep=sep,
        quote=quote,
        escape=escape,
        escape_quotes=_bool(opts, "escapequotes", "escapeQuotes", True),
        quote_all=_bool(opts, "quoteall", "quoteAll", False),
        null_value=opts.get("nullvalue", ""),
        empty_value=opts.get("emptyvalue", '""'),
        line_sep=line_sep(opts),
        header=_bool(opts, "header", "header", False),
        ignore_leading=_bool(opts, "ignoreleadingwhitespace", "ignoreLeadingWhiteSpace", True),
        ignore_trailing=_bool(opts, "ignoretrailingwhitespace", "ignoreTrailingWhiteSpace", True),
        encoding=encoding,
    )


@dataclass(frozen=True)
class TimeFormats:
    """dateFormat, timestampFormat, timestampNTZFormat and the timeZone override."""

    date: DateTimePattern
    timestamp: DateTimePattern
    timestamp_ntz: DateTimePattern
    zone: str | None


def parse_time_formats(opts: Mapping[str, str]) -> TimeFormats:
    zone = opts.get("timezone")
    ts = opts.get("timestampformat", TIMESTAMP_FORMAT)
    if zone is not None:
        resolve_zone(zone, "timeZone")
    return TimeFormats(
        date=compile_pattern(opts.get("dateformat", DATE_FORMAT), "dateFormat", date_only=True),
        timestamp=compile_pattern(ts, "timestampFormat", offset_seconds=ts == TIMESTAMP_FORMAT),
        timestamp_ntz=compile_pattern(
            opts.get("timestampntzformat", TIMESTAMP_NTZ_FORMAT), "timestampNTZFormat"
        ),
        zone=zone,
    )


# -- values as Spark prints them ------------------------------------------------------------

Converter = Callable[[pa.Array], list[str | None]]


def _with_nulls(values: list[Any], fn: Callable[[Any], str]) -> list[str | None]:
    return [None if v is None else fn(v) for v in values]


def time_converter(typ: pa.DataType, formats: TimeFormats) -> Converter | None:
    """Spark's text for dates and timestamps (the zone from the Arrow type: Spark sends
    TIMESTAMP columns in the session time zone), or None for other types."""
    if pa.types.is_date32(typ):
        pat = formats.date
        return lambda a: _with_nulls(
            a.cast(pa.int32()).to_pylist(), lambda v: pat.format(days_to_date(v))
        )
    if pa.types.is_timestamp(typ):
        tz = formats.zone or typ.tz  # type: ignore[attr-defined]
        zone = resolve_zone(tz, "time zone") if tz else None
        pat = formats.timestamp if tz else formats.timestamp_ntz
        unit = {"s": 1_000_000, "ms": 1000, "us": 1, "ns": 0}[typ.unit]  # type: ignore[attr-defined]

        def fmt(v: int) -> str:
            micros = v * unit if unit else v // 1000
            return pat.format(*micros_to_local(micros, zone))

        return lambda a: _with_nulls(a.cast(pa.int64()).to_pylist(), fmt)
    return None


def csv_converter(field: pa.Field, formats: TimeFormats) -> Converter:
    """How Spark's CSV writer prints one column's values, or refuse the column."""
    typ = field.type
    timed = time_converter(typ, formats)
    if timed is not None:
        return timed
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return lambda a: a.to_pylist()  # type: ignore[no-any-return]
    if pa.types.is_boolean(typ):
        return lambda a: _with_nulls(a.to_pylist(), lambda v: "true" if v else "false")
    if pa.types.is_integer(typ):
        return lambda a: _with_nulls(a.to_pylist(), str)
    if pa.types.is_float64(typ):
        return lambda a: _with_nulls(a.to_pylist(), java_double)
    if pa.types.is_float32(typ):
        return lambda a: _with_nulls(a.to_pylist(), java_float)
    if pa.types.is_decimal(typ):
        return lambda a: _with_nulls(a.to_pylist(), str)  # BigDecimal.toString's rules
    raise OptionError(
        f"CSV cannot hold column {field.name!r} of type {typ} as Spark writes CSV; "
        "cast it to a string (or use parquet or json)"
    )


class CsvEncoder:
    """Arrow batches -> encoded bytes of Spark's CSV (header once per file, if asked)."""

    def __init__(self, schema: pa.Schema, dialect: CsvDialect, formats: TimeFormats) -> None:
        self.fields = FieldEncoder(dialect)
        self.dialect = dialect
        self.convert = [csv_converter(f, formats) for f in schema]
        self.names = list(schema.names)
        self.text = TextEncoder(dialect.encoding)
        self._patterns = [self._slow_pattern(i) for i in range(len(schema))]

    def header(self) -> bytes:
        return self.text.encode(self.fields.header(self.names))

    def _slow_pattern(self, column: int) -> str:
        """An RE2 pattern of the values :meth:`FieldEncoder.encode` does not pass through."""
        d = self.dialect
        chars = sorted(set(d.triggers) | {d.sep, d.quote, d.escape})
        cls = "".join(f"\\x{{{ord(c):x}}}" for c in chars)
        first = f"|^\\x{{{ord(_COMMENT):x}}}" if column == 0 else ""
        return f"^$|^[\\x00-\\x20]|[\\x00-\\x20]$|[{cls}]{first}"

    def _column(self, i: int, arr: pa.Array) -> pa.Array:
        """Column ``i`` as encoded fields: Arrow kernels, Python only for the values that
        need quoting, escaping, trimming, or are null or empty (they go through encode)."""
        typ = arr.type
        if pa.types.is_integer(typ) or pa.types.is_boolean(typ):
            text = pc.cast(arr, pa.string())  # Long.toString / "true" "false"
        elif pa.types.is_string(typ) or pa.types.is_large_string(typ):
            text = arr.cast(pa.string())
        else:
            text = pa.array(self.convert[i](arr), pa.string())
        if self.dialect.quote_all:
            slow = pa.array([True] * len(text))
        else:
            slow = pc.fill_null(pc.match_substring_regex(text, self._patterns[i]), True)
        if not pc.any(slow).as_py():
            return text
        values = text.filter(slow).to_pylist()
        encoded = pa.array([self.fields.encode(v, i) for v in values], pa.string())
        return pc.replace_with_mask(text, slow, encoded)

    def batch(self, batch: pa.RecordBatch) -> bytes:
        if not batch.num_rows:
            return b""
        cols = [self._column(i, batch.column(i)) for i in range(batch.num_columns)]
        if len(cols) == 1:  # univocity skips a line that encodes to nothing
            joined = cols[0].filter(pc.greater(pc.binary_length(cols[0]), 0))
        else:
            joined = pc.binary_join_element_wise(*cols, self.dialect.sep)
        lines = pc.binary_join_element_wise(joined, "", self.dialect.line_sep)
        whole = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(lines)]), lines), "")
        return self.text.encode(whole[0].as_py() or "")
