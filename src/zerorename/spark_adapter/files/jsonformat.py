"""JSON Lines as Spark's writer (Jackson) writes them (pure).

Numbers as Java prints them (``1.0E10``; decimals exactly, ``1E-18``), NaN and the
infinities as strings, binary as base64, dates and timestamps with Spark's patterns in
the session time zone, null fields of structs left out unless ``ignoreNullFields`` is
false (map values and array elements keep their nulls, as Spark writes them).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from zerorename.spark_adapter.errors import OptionError
from zerorename.spark_adapter.files.csvformat import TimeFormats, parse_time_formats
from zerorename.spark_adapter.files.javatext import (
    TextEncoder,
    java_double,
    java_float,
    micros_to_local,
    resolve_zone,
)

Fn = Callable[[Any], str]
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH = dt.datetime(1970, 1, 1)
_MICRO = dt.timedelta(microseconds=1)


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _number(java: Callable[[float], str]) -> Fn:
    def fn(v: float) -> str:
        text = java(v)
        return _quote(text) if text in ("NaN", "Infinity", "-Infinity") else text

    return fn


def _micros(v: dt.datetime) -> int:
    if v.tzinfo is not None:
        return (v - _EPOCH_UTC) // _MICRO
    return (v - _EPOCH) // _MICRO


def value_fn(typ: pa.DataType, formats: TimeFormats, ignore_nulls: bool, name: str) -> Fn:
    """A function from one non-null Python value of ``typ`` to its JSON text."""
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return _quote
    if pa.types.is_boolean(typ):
        return lambda v: "true" if v else "false"
    if pa.types.is_integer(typ):
        return str
    if pa.types.is_float64(typ):
        return _number(java_double)
    if pa.types.is_float32(typ):
        return _number(java_float)
    if pa.types.is_decimal(typ):
        return str
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
        return lambda v: _quote(base64.b64encode(bytes(v)).decode("ascii"))
    if pa.types.is_date32(typ):
        dpat = formats.date
        return lambda v: _quote(dpat.format(dt.datetime(v.year, v.month, v.day)))
    if pa.types.is_timestamp(typ):
        tz = formats.zone or typ.tz  # type: ignore[attr-defined]
        zone = resolve_zone(tz, "time zone") if tz else None
        tpat = formats.timestamp if tz else formats.timestamp_ntz
        return lambda v: _quote(tpat.format(*micros_to_local(_micros(v), zone)))
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        item = value_fn(typ.value_type, formats, ignore_nulls, name)  # type: ignore[attr-defined]
        return lambda v: "[" + ",".join("null" if x is None else item(x) for x in v) + "]"
    if pa.types.is_map(typ):
        key = value_fn(typ.key_type, formats, ignore_nulls, name)  # type: ignore[attr-defined]
        val = value_fn(typ.item_type, formats, ignore_nulls, name)  # type: ignore[attr-defined]

        def map_fn(v: list[tuple[Any, Any]]) -> str:
            parts = []
            for k, x in v:
                ktext = key(k)
                ktext = ktext if ktext.startswith('"') else _quote(ktext)
                parts.append(f"{ktext}:{'null' if x is None else val(x)}")
            return "{" + ",".join(parts) + "}"

        return map_fn
    if pa.types.is_struct(typ):
        return _object_fn(list(typ), formats, ignore_nulls)  # type: ignore[call-overload]
    raise OptionError(
        f"JSON cannot hold column {name!r} of type {typ} as Spark writes JSON; cast it "
        "(to a string, for instance) or use parquet"
    )


def _object_fn(fields: list[pa.Field], formats: TimeFormats, ignore_nulls: bool) -> Fn:
    named = [(_quote(f.name), value_fn(f.type, formats, ignore_nulls, f.name)) for f in fields]
    keys = [f.name for f in fields]

    def fn(v: Mapping[str, Any]) -> str:
        parts = []
        for k, (qname, f) in zip(keys, named, strict=True):
            x = v.get(k)
            if x is None:
                if not ignore_nulls:
                    parts.append(f"{qname}:null")
            else:
                parts.append(f"{qname}:{f(x)}")
        return "{" + ",".join(parts) + "}"

    return fn


class JsonEncoder:
    """Arrow batches -> encoded JSON Lines as Spark writes them."""

    def __init__(self, schema: pa.Schema, opts: Mapping[str, str]) -> None:
        ignore = opts.get("ignorenullfields", "true").strip().lower() == "true"
        self._row = _object_fn(list(schema), parse_time_formats(opts), ignore)
        self._sep = opts.get("linesep", "\n")
        self._text = TextEncoder(opts.get("encoding", opts.get("charset", "UTF-8")))

    def batch(self, batch: pa.RecordBatch) -> bytes:
        row, sep = self._row, self._sep
        return self._text.encode("".join(row(r) + sep for r in batch.to_pylist()))
