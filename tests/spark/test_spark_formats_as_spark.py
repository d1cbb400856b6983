"""Files as Spark writes them: the same awkward rows written by Spark's own writer (to a
local directory) and through ``format("zerorename")`` (moto; one case on RGW), read back
by Spark's own reader with the same options: equal rows, and for CSV equal bytes.

The session time zone is America/Los_Angeles here (not the fixture's UTC), so a writer
that ignored it would print other offsets than Spark's.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

SCHEMA = (
    "i bigint, s string, d double, f float, dec decimal(38,18), b boolean, dt date, "
    "ts timestamp, ntz timestamp_ntz"
)
STRINGS = [
    "plain",
    'comma, "quoted" and \\ backslash',
    "a\\b",
    'a\\"b',
    '"start',
    'end"',
    " lead",
    "trail ",
    "  ",
    "",
    None,
    "new\nline",
    "cr\rx",
    "tab\tx",
    "#hash",
    "é ü 😀 ∑",
    "a,b",
    "semi;colon",
    "\\",
    '"',
    "'single'",
]
DOUBLES = [0.1, float("nan"), float("inf"), float("-inf"), 1e10, -0.0, 1e-5, None, 123456789.0]
#: float32 values whose Float.toString is the same on every JDK (JDK 17 prints some others,
#: such as 1.23456792E8, with more digits than the shortest that JDK 19+ and zerorename print)
FLOATS = [0.1, float("nan"), float("inf"), float("-inf"), 1e10, -0.0, 0.001, None, 16777216.0]
DECIMALS = ["0.000000000000000001", "99999999999999999999.999999999999999999", "-1.5", None, "0"]
DATES = [dt.date(1899, 12, 31), dt.date(1, 1, 1), dt.date(2024, 2, 29), None, dt.date(9999, 12, 31)]
TIMES = [
    dt.datetime(2020, 1, 2, 3, 4, 5, 123456),
    dt.datetime(1850, 6, 1),
    dt.datetime(2021, 7, 1, 12, 0, 0, 1),
    None,
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
]


def _rows() -> list[tuple[Any, ...]]:
    rows = []
    for i, s in enumerate(STRINGS):
        dec = DECIMALS[i % len(DECIMALS)]
        rows.append(
            (
                i,
                s,
                DOUBLES[i % len(DOUBLES)],
                FLOATS[(i + 3) % len(FLOATS)],
                None if dec is None else decimal.Decimal(dec),
                None if i % 4 == 3 else i % 2 == 0,
                DATES[i % len(DATES)],
                TIMES[i % len(TIMES)],
                TIMES[(i + 1) % len(TIMES)],
            )
        )
    return rows


@pytest.fixture(scope="module")
def la_spark(spark: Any) -> Iterator[Any]:
    """The shared session with a session time zone that is not UTC (restored after)."""
    old = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        yield spark
    finally:
        spark.conf.set("spark.sql.session.timeZone", old)


def _df(spark: Any, fmt: str) -> Any:
    df = spark.createDataFrame(_rows(), SCHEMA).coalesce(1)
    return df.select("s") if fmt == "text" else df


def _download(zr: Any, dest: Path, sub: str = "out") -> list[Path]:
    dest.mkdir(parents=True)
    files = []
    for rel in zr.data_keys(sub):
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(zr.get(zr.prefix(sub) + rel))
        files.append(path)
    return files


def _part_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("part-*") if not p.name.endswith(".crc"))


def _read(spark: Any, fmt: str, directory: Path, opts: dict[str, str], schema: str) -> list[str]:
    reader = spark.read.options(**opts).format(fmt)
    if fmt in ("csv", "json"):
        reader = reader.schema(schema)
    return sorted(repr(r) for r in reader.load(str(directory)).collect())  # repr: NaN == NaN


CASES = [
    ("csv", {}),
    (
        "csv",
        {
            "sep": ";",
            "quoteAll": "true",
            "nullValue": "NULL",
            "emptyValue": "EMPTY",
            "header": "true",
            "lineSep": "\r\n",
            "dateFormat": "dd/MM/yyyy",
            "timestampFormat": "yyyy-MM-dd HH:mm:ss.SSSSSSXXX",
            "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
        },
    ),
    ("csv", {"quote": "'", "escape": "'", "escapeQuotes": "false", "sep": "\t"}),
    ("json", {}),
    (
        "json",
        {
            "ignoreNullFields": "false",
            "dateFormat": "yyyy.MM.dd",
            "timestampFormat": "dd/MM/yyyy HH:mm:ss.SSSSSSXXX",
            "lineSep": "\r\n",
        },
    ),
    ("text", {}),
    ("text", {"lineSep": "|"}),
    ("parquet", {}),
    ("parquet", {"compression": "gzip"}),
]


def _compare(spark: Any, zr: Any, tmp_path: Path, fmt: str, opts: dict[str, str]) -> None:
    df = _df(spark, fmt)
    theirs = tmp_path / "spark"
    df.write.options(**opts).format(fmt).save(str(theirs))
    df.write.format("zerorename").mode("append").options(**zr.options(format=fmt, **opts)).save(
        zr.uri()
    )
    ours = tmp_path / "zr"
    _download(zr, ours)
    schema = SCHEMA if fmt != "text" else "s string"
    read_opts = {k: v for k, v in opts.items() if k != "compression"}
    expected = _read(spark, fmt, theirs, read_opts, schema)
    assert len(expected) > 0
    assert _read(spark, fmt, ours, read_opts, schema) == expected
    if fmt == "csv":
        (mine,) = _part_files(ours)
        (spark_file,) = _part_files(theirs)
        assert mine.read_bytes() == spark_file.read_bytes()


@pytest.mark.parametrize(("fmt", "opts"), CASES, ids=[f"{f}-{i}" for i, (f, _) in enumerate(CASES)])
def test_same_rows_as_spark(
    la_spark: Any, zr: Any, tmp_path: Path, fmt: str, opts: dict[str, str]
) -> None:
    _compare(la_spark, zr, tmp_path, fmt, opts)


@pytest.mark.parametrize("s3", ["rgw"], indirect=True)
def test_csv_on_rgw_is_sparks_bytes(la_spark: Any, zr_any: Any, tmp_path: Path) -> None:
    _compare(la_spark, zr_any, tmp_path, "csv", {})


@pytest.mark.parametrize(
    ("fmt", "opts"),
    [("csv", {}), ("csv", {"header": "true"}), ("json", {}), ("text", {}), ("parquet", {})],
)
def test_empty_output_is_sparks(
    spark: Any, zr: Any, tmp_path: Path, fmt: str, opts: dict[str, str]
) -> None:
    schema = "s string" if fmt == "text" else "i int, s string, p string"
    empty = spark.createDataFrame([], schema)
    theirs = tmp_path / "spark"
    empty.write.options(**opts).format(fmt).save(str(theirs))
    empty.write.format("zerorename").mode("append").options(**zr.options(format=fmt, **opts)).save(
        zr.uri()
    )
    ours = tmp_path / "zr"
    mine = _download(zr, ours)
    spark_files = _part_files(theirs)
    assert len(mine) == len(spark_files) == 1
    if fmt != "parquet":
        assert mine[0].read_bytes() == spark_files[0].read_bytes()
    back = spark.read.options(**opts).format(fmt).load(str(ours))  # no schema given
    assert back.count() == 0
    if fmt == "parquet" or opts.get("header") == "true":
        assert back.schema == spark.read.options(**opts).format(fmt).load(str(theirs)).schema


def test_empty_partitioned_output_is_sparks(spark: Any, zr: Any, tmp_path: Path) -> None:
    empty = spark.createDataFrame([], "i int, p string")
    theirs = tmp_path / "spark"
    empty.write.partitionBy("p").parquet(str(theirs))
    empty.write.format("zerorename").mode("append").options(**zr.options(partitionBy="p")).save(
        zr.uri()
    )
    assert _part_files(theirs) == []
    assert zr.data_keys() == []
    assert "_SUCCESS" in zr.list_keys()


def test_other_spark_csv_options_are_refused(spark: Any, zr: Any) -> None:
    df = spark.createDataFrame([(1,)], "i int")
    with pytest.raises(Exception, match=r"comment.*does not support"):
        df.write.format("zerorename").mode("append").options(
            **zr.options(format="csv", comment="#")
        ).save(zr.uri())
    assert zr.list_keys() == []
