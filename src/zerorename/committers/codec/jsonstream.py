"""An incremental (push) JSON scanner for one top-level object with one streamed array.

A pendingset is one JSON object; its ``commits`` array can hold many thousand uploads.
This scanner is fed bytes as they arrive and hands back the object's other members whole
and the array's elements one at a time, so a reader never holds the whole file. It is
sans-IO: :func:`iter_object_stream` and :func:`aiter_object_stream` drive it from sync or
async chunk sources. Each member value and each array element is decoded with the
standard library's decoder once it is complete, so values are exactly ``json.loads``'s.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from zerorename.units import MiB

_WS = " \t\r\n"


class BadValue(ValueError):
    """A JSON number or constant a record may not hold (NaN, Infinity, a float outside
    the double range such as ``1e400``): valid for Python's ``json``, never for ours."""


def _no_constant(name: str) -> Any:
    raise BadValue(f"{name} is not a JSON number a record may hold")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise BadValue(f"{text[:40]} is outside the range of a double")
    return value


#: the decoder of every committer record: plain JSON (RFC 8259), no NaN/Infinity, no
#: float that overflows. It may also raise ValueError (an integer of more than 4300
#: digits) or RecursionError (nesting deeper than the interpreter's stack).
STRICT_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)
#: what the decoder raises besides JSONDecodeError on input that is not a record's JSON
DECODE_ERRORS = (ValueError, RecursionError)
_DECODER = STRICT_DECODER


class JsonStreamError(ValueError):
    """The stream is not valid JSON of the expected shape, or it ended too soon."""


@dataclass(frozen=True)
class Member:
    """A member of the top-level object other than the streamed array."""

    key: str
    value: Any


@dataclass(frozen=True)
class ArrayStart:
    key: str


@dataclass(frozen=True)
class Item:
    """One element of the streamed array."""

    value: Any


@dataclass(frozen=True)
class ArrayEnd:
    key: str
    count: int


@dataclass(frozen=True)
class End:
    """The top-level object closed and nothing but whitespace followed."""


Event = Member | ArrayStart | Item | ArrayEnd | End


class _NeedMore(Exception):
    pass


class ObjectStreamScanner:
    """Push scanner: ``feed(bytes)``, ``close()`` at end of input, then drain ``events()``.

    ``array_field`` names the member whose array is streamed; ``max_value_chars`` bounds a
    single member value or array element (a guard against a corrupt file that never
    closes a string).
    """

    def __init__(self, array_field: str, *, max_value_chars: int = 16 * MiB) -> None:
        self._field = array_field
        self._max = max_value_chars
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._buf = ""
        self._pos = 0
        self._base = 0  # characters dropped from the front of _buf
        self._eof = False
        self._state = "start"
        self._key = ""
        self._seen: set[str] = set()
        self._count = 0
        self._retry_at = 0  # do not retry a failed value decode before _buf is this long
        self._done = False

    # -- input -----------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        if self._eof:
            raise JsonStreamError("data fed after close()")
        try:
            self._buf += self._utf8.decode(data)
        except UnicodeDecodeError as exc:
            raise JsonStreamError(f"not UTF-8 near character {self._offset()}: {exc}") from None

    def close(self) -> None:
        try:
            self._buf += self._utf8.decode(b"", final=True)
        except UnicodeDecodeError:
            raise JsonStreamError("input ends inside a UTF-8 character (truncated)") from None
        self._eof = True

    # -- output ----------------------------------------------------------------------
    def events(self) -> Iterator[Event]:
        """Events available from the input so far (stops when more input is needed)."""
        while not self._done:
            try:
                ev = self._step()
            except _NeedMore:
                if self._eof:
                    raise JsonStreamError(
                        f"input ends at character {self._offset()} in the middle of the JSON "
                        f"(truncated file?)"
                    ) from None
                self._compact()
                return
            if ev is not None:
                yield ev

    # -- internals -------------------------------------------------------------------
    def _offset(self) -> int:
        return self._base + self._pos

    def _compact(self) -> None:
        if self._pos > 65536:
            self._buf = self._buf[self._pos :]
            self._base += self._pos
            self._retry_at = max(0, self._retry_at - self._pos)
            self._pos = 0

    def _skip_ws(self) -> str:
        buf, pos = self._buf, self._pos
        n = len(buf)
        while pos < n and buf[pos] in _WS:
            pos += 1
        self._pos = pos
        if pos >= n:
            raise _NeedMore
        return buf[pos]

    def _error(self, what: str) -> JsonStreamError:
        near = self._buf[self._pos : self._pos + 20]
        return JsonStreamError(f"{what} at character {self._offset()} (near {near!r})")

    def _value(self) -> Any:
        if len(self._buf) < self._retry_at and not self._eof:
            raise _NeedMore
        start = self._pos
        try:
            value, end = _DECODER.raw_decode(self._buf, start)
        except RecursionError:
            # the nesting is too deep already in what arrived: more input cannot help
            raise self._error("a JSON value is nested too deeply") from None
        except json.JSONDecodeError as exc:
            if self._eof:
                raise self._error(f"invalid or truncated JSON value ({exc.msg})") from None
            pending = len(self._buf) - start
            if pending > self._max:
                raise self._error(f"a JSON value is longer than {self._max} characters") from None
            self._retry_at = start + 2 * max(pending, 4096)
            raise _NeedMore from None
        except ValueError as exc:
            # NaN, Infinity, 1e400 or an integer too long; a number cut at the end of the
            # buffer may still be a good one once the rest arrives, so decide at the end
            pending = len(self._buf) - start
            if self._eof or pending > self._max:
                raise self._error(f"a JSON value a record may not hold ({exc})") from None
            self._retry_at = start + 2 * max(pending, 4096)
            raise _NeedMore from None
        if end >= len(self._buf) and not self._eof:
            # A number at the end of the buffer may continue in the next chunk.
            self._retry_at = len(self._buf) + 1
            raise _NeedMore
        self._retry_at = 0
        self._pos = end
        return value

    def _step(self) -> Event | None:
        st = self._state
        if st == "start":
            if self._skip_ws() != "{":
                raise self._error("expected '{' (a JSON object)")
            self._pos += 1
            self._state = "key_or_end"
            return None
        if st in ("key_or_end", "key"):
            c = self._skip_ws()
            if c == "}" and st == "key_or_end":
                self._pos += 1
                self._state = "trailer"
                return End() if self._trailer_ok() else None
            if c != '"':
                raise self._error("expected a member name")
            key = self._value()
            if key in self._seen:
                raise self._error(f"member {key!r} appears twice")
            self._seen.add(key)
            self._key = key
            self._state = "colon"
            return None
        if st == "colon":
            if self._skip_ws() != ":":
                raise self._error("expected ':'")
            self._pos += 1
            self._state = "value"
            return None
        if st == "value":
            c = self._skip_ws()
            if self._key == self._field:
                if c != "[":
                    raise self._error(f"member {self._field!r} must be an array")
                self._pos += 1
                self._state = "item_or_end"
                self._count = 0
                return ArrayStart(self._key)
            value = self._value()
            self._state = "comma_or_end"
            return Member(self._key, value)
        if st == "comma_or_end":
            c = self._skip_ws()
            self._pos += 1
            if c == ",":
                self._state = "key"
                return None
            if c == "}":
                self._state = "trailer"
                return End() if self._trailer_ok() else None
            self._pos -= 1
            raise self._error("expected ',' or '}'")
        if st in ("item_or_end", "item"):
            c = self._skip_ws()
            if c == "]" and st == "item_or_end":
                self._pos += 1
                self._state = "comma_or_end"
                return ArrayEnd(self._key, self._count)
            value = self._value()
            self._count += 1
            self._state = "item_comma_or_end"
            return Item(value)
        if st == "item_comma_or_end":
            c = self._skip_ws()
            self._pos += 1
            if c == ",":
                self._state = "item"
                return None
            if c == "]":
                self._state = "comma_or_end"
                return ArrayEnd(self._key, self._count)
            self._pos -= 1
            raise self._error("expected ',' or ']' in the array")
        if st == "trailer":
            return End() if self._trailer_ok() else None
        raise AssertionError(st)  # pragma: no cover

    def _trailer_ok(self) -> bool:
        """After the closing '}': only whitespace may follow, checked at end of input."""
        rest = self._buf[self._pos :]
        if rest.strip(_WS):
            raise self._error("unexpected data after the JSON object")
        self._pos = len(self._buf)
        if not self._eof:
            raise _NeedMore
        self._done = True
        return True


class LayoutMismatch(Exception):
    """The text is not laid out one array element per line: use the incremental scanner."""


class _DuplicateName(Exception):
    pass


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise _DuplicateName
    return d


def iter_line_events(text: str, array_field: str) -> Iterator[Event]:
    """Events of a whole text laid out as ``{members,"<field>":[`` on the first line, one
    array element per line (each but the last ending with ``,``), then ``]}`` and only
    whitespace: the layout :func:`~zerorename.committers.codec.pending.encode_pendingset`
    writes, decoded with one ``json.loads`` per line instead of the incremental scanner.

    Raises :class:`LayoutMismatch` where the text departs from that layout (which may be
    after some events were yielded). The events yielded up to then are always the ones
    :class:`ObjectStreamScanner` yields for the same text, so a caller that collected
    them can start over with the scanner and get the same results or errors.
    """
    lines = text.split("\n")
    head = lines[0]
    if not head.endswith(json.dumps(array_field, ensure_ascii=False) + ":["):
        raise LayoutMismatch
    try:
        # The '[' ending the first line opens an array that only ']}' can close so that
        # the object ends: an array member of the top-level object, its last member.
        top = json.loads(
            head + "]}",
            object_pairs_hook=_unique_names,
            parse_constant=_no_constant,
            parse_float=_finite_float,
        )
    except (ValueError, RecursionError, _DuplicateName):
        raise LayoutMismatch from None
    if not isinstance(top, dict) or next(reversed(top)) != array_field or top[array_field] != []:
        raise LayoutMismatch
    del top[array_field]
    for key, value in top.items():
        yield Member(key, value)
    yield ArrayStart(array_field)
    decode = _DECODER.decode
    end = _closing_line(lines)
    for i in range(1, end):
        line = lines[i]
        if i < end - 1:
            if not line.endswith(","):
                raise LayoutMismatch
            line = line[:-1]
        try:
            value = decode(line)
        except DECODE_ERRORS:
            raise LayoutMismatch from None
        yield Item(value)
    yield ArrayEnd(array_field, end - 1)
    yield End()


def _closing_line(lines: list[str]) -> int:
    """Index of the line ``]}`` after which only whitespace follows (else LayoutMismatch)."""
    end = len(lines) - 1
    while end > 0 and not lines[end].strip(_WS):
        end -= 1
    if end < 1 or lines[end] != "]}":
        raise LayoutMismatch
    return end


def iter_object_stream(chunks: Iterable[bytes], array_field: str) -> Iterator[Event]:
    """Scan a sync chunk source; the last event is :class:`End`, or JsonStreamError."""
    sc = ObjectStreamScanner(array_field)
    for chunk in chunks:
        sc.feed(chunk)
        yield from sc.events()
    sc.close()
    yield from sc.events()


async def aiter_object_stream(
    chunks: AsyncIterable[bytes], array_field: str
) -> AsyncIterator[Event]:
    """Scan an async chunk source; the last event is :class:`End`, or JsonStreamError."""
    sc = ObjectStreamScanner(array_field)
    async for chunk in chunks:
        sc.feed(chunk)
        for ev in sc.events():
            yield ev
    sc.close()
    for ev in sc.events():
        yield ev
