"""The CSV encoder against bytes captured from Spark 4.x's own CSV writer (JDK 17,
univocity 2.9.1), and a property: any value Spark keeps whole reads back through a parser
configured like Spark's reader (quote ", escape \\)."""

from __future__ import annotations

import datetime as dt
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerorename.spark_adapter.errors import OptionError
from zerorename.spark_adapter.files.csvformat import (
    CsvDialect,
    FieldEncoder,
    parse_dialect,
    parse_time_formats,
)
from zerorename.spark_adapter.files.javatext import (
    java_double,
    java_float,
    micros_to_local,
    resolve_zone,
)
from zerorename.spark_adapter.options import WriteOptions

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
    "x\n",
    "#hash",
    "é ü 😀",
    "a,b",
    "semi;colon",
    "\\",
    '"',
    'q"q',
    "\x00z",
    "z\x00",
]
# spark.createDataFrame([(i, s) ...], "i int, s string").write.csv(...) and ("s string, i int")
SPARK_NUMBER_FIRST = (
    b'0,plain\n1,"comma, \\"quoted\\" and \\\\ backslash"\n2,a\\b\n3,"a\\\\\\"b"\n'
    b'4,"\\"start"\n5,"end\\""\n6,lead\n7,trail\n8,""\n9,""\n10,\n11,"new\nline"\n'
    b'12,"cr\rx"\n13,tab\tx\n14,"x"\n15,#hash\n16,\xc3\xa9 \xc3\xbc \xf0\x9f\x98\x80\n'
    b'17,"a,b"\n18,semi;colon\n19,\\\n20,"\\""\n21,"q\\"q"\n22,z\n23,z\n'
)
SPARK_STRING_FIRST = (
    b'plain,0\n"comma, \\"quoted\\" and \\\\ backslash",1\na\\b,2\n"a\\\\\\"b",3\n'
    b'"\\"start",4\n"end\\"",5\nlead,6\ntrail,7\n"",8\n"",9\n,10\n"new\nline",11\n'
    b'"cr\rx",12\ntab\tx,13\n"x",14\n"#hash",15\n\xc3\xa9 \xc3\xbc \xf0\x9f\x98\x80,16\n'
    b'"a,b",17\nsemi;colon,18\n\\,19\n"\\"",20\n"q\\"q",21\nz,22\nz,23\n'
)


def test_default_dialect_is_sparks_bytes() -> None:
    enc = FieldEncoder(CsvDialect())
    first = "".join(enc.row([str(i), s]) for i, s in enumerate(STRINGS))
    second = "".join(enc.row([s, str(i)]) for i, s in enumerate(STRINGS))
    assert first.encode() == SPARK_NUMBER_FIRST
    assert second.encode() == SPARK_STRING_FIRST


ROW = [" a b ", None, "", 'x"y', "1.5"]
NAMES = ["col one", "'lit '", "c", "d", "e"]


@pytest.mark.parametrize(
    ("opts", "spark_bytes"),
    [
        ({"header": "true"}, b'col one,lit,c,d,e\na b,,"","x\\"y",1.5\n'),
        (
            {
                "header": "true",
                "quoteall": "true",
                "escapequotes": "false",
                "sep": ";",
                "nullvalue": "NULL",
                "emptyvalue": "EMPTY",
                "linesep": "\r\n",
            },
            b'"col one";"lit";"c";"d";"e"\r\n"a b";"NULL";"EMPTY";"x\\"y";"1.5"\r\n',
        ),
        (
            {
                "quote": "'",
                "escape": "'",
                "sep": "\t",
                "ignoreleadingwhitespace": "false",
                "ignoretrailingwhitespace": "false",
            },
            b' a b \t\t""\tx"y\t1.5\n',
        ),
        ({"linesep": "|"}, b'a b,,"","x\\"y",1.5|'),
    ],
)
def test_options_are_sparks_bytes(opts: dict[str, str], spark_bytes: bytes) -> None:
    d = parse_dialect(opts)
    enc = FieldEncoder(d)
    out = (enc.header(NAMES) if d.header else "") + enc.row(ROW)
    assert out.encode() == spark_bytes


def test_one_null_column_row_is_skipped_as_spark_does() -> None:
    assert FieldEncoder(CsvDialect()).row([None]) == ""


def _f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def test_numbers_as_java_prints_them() -> None:
    doubles = [float("nan"), float("inf"), float("-inf"), 1e10, 1e-5, 0.1, 123456789.0, -0.0]
    assert [java_double(v) for v in doubles] == [
        "NaN", "Infinity", "-Infinity", "1.0E10", "1.0E-5", "0.1", "1.23456789E8", "-0.0",
    ]  # fmt: skip
    assert [java_double(v) for v in (1e7, 1e-3, 5e-324)] == ["1.0E7", "0.001", "4.9E-324"]
    floats = [0.1, 1e10, 3.4028235e38, 16777216.0, 1e-3, 9999999.0]
    assert [java_float(_f32(v)) for v in floats] == [
        "0.1", "1.0E10", "3.4028235E38", "1.6777216E7", "0.001", "9999999.0",
    ]  # fmt: skip


def test_dates_and_timestamps_as_spark_prints_them() -> None:
    f = parse_time_formats({})
    la = resolve_zone("America/Los_Angeles")

    def ts(d: dt.datetime, zone: dt.tzinfo | None) -> str:
        micros = (d - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
        pat = f.timestamp if zone else f.timestamp_ntz
        return pat.format(*micros_to_local(micros, zone))

    # captured with spark.sql.session.timeZone=America/Los_Angeles, then UTC
    assert ts(dt.datetime(2020, 1, 2, 11, 4, 5, 123456), la) == "2020-01-02T03:04:05.123-08:00"
    assert ts(dt.datetime(1850, 6, 1, 7, 52, 58), la) == "1850-06-01T00:00:00.000-07:52:58"
    assert ts(dt.datetime(2020, 1, 2, 11, 4, 5, 123456), dt.UTC) == ("2020-01-02T11:04:05.123Z")
    assert ts(dt.datetime(1, 1, 1), None) == "0001-01-01T00:00:00.000"
    assert f.date.format(dt.datetime(1899, 12, 31)) == "1899-12-31"
    # an explicit XXX prints java.time's +HH:MM (Spark reads 1850-05-31 23:59:02 back in LA)
    custom = parse_time_formats({"timestampformat": "yyyy-MM-dd HH:mm:ss.SSSSSSXXX"})
    lmt = micros_to_local(-3773750822000000, la)
    assert custom.timestamp.format(*lmt) == "1850-06-01 00:00:00.000000-07:52"


@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"format": "csv", "comment": "#"}, "comment.*does not support"),
        ({"format": "csv", "nanValue": "x"}, "nanvalue.*does not support"),
        ({"format": "csv", "quote": "ab"}, "quote must be exactly one character"),
        ({"format": "csv", "dateFormat": "EEE yyyy"}, "'EEE' is not supported"),
        ({"format": "csv", "encoding": "EBCDIC"}, "encoding 'EBCDIC' is not supported"),
        ({"format": "csv", "lineSep": "abc"}, "lineSep must be 1 to 2"),
        ({"format": "json", "pretty": "true"}, "pretty.*does not support"),
        ({"format": "csv", "escapeQuotes": "yes"}, "escapeQuotes must be true or false"),
    ],
)
def test_other_options_are_refused_in_one_line(opts: dict[str, str], match: str) -> None:
    with pytest.raises(OptionError, match=match) as info:
        WriteOptions.parse({"path": "s3://b/p", **{k.lower(): v for k, v in opts.items()}})
    assert "\n" not in str(info.value)


def test_other_formats_options_are_ignored_as_spark_ignores_them() -> None:
    opts = WriteOptions.parse({"path": "s3://b/p", "format": "json", "header": "true"})
    assert opts.format_options == ()


def _parse_like_spark(line: str) -> list[str]:
    """Spark's reader on one record (quote ", escape \\, escape of the escape \\)."""
    out, i, n = [], 0, len(line)
    while True:
        if i < n and line[i] == '"':
            i += 1
            buf = []
            while line[i] != '"':
                if line[i] == "\\" and line[i + 1] in '"\\':
                    i += 1
                buf.append(line[i])
                i += 1
            i += 1
            out.append("".join(buf))
        else:
            j = line.find(",", i)
            j = n if j == -1 else j
            out.append(line[i:j])
            i = j
        if i >= n:
            return out
        assert line[i] == ","
        i += 1


_TEXT = st.text(
    alphabet=st.sampled_from(list('ab,"\\\n\r#é😀 \t;'))
    | st.characters(exclude_categories=("Cs",)),
    max_size=12,
)


@settings(deadline=None)  # a loaded 2-core machine: no timing in tests
@given(
    st.lists(
        _TEXT.filter(lambda s: s.strip("".join(map(chr, range(33)))) == s and s),
        min_size=1,
        max_size=4,
    )
)
def test_any_kept_value_reads_back_through_sparks_reader_rules(values: list[str]) -> None:
    line = FieldEncoder(CsvDialect()).row(values)
    assert line.endswith("\n")
    assert _parse_like_spark(line[:-1]) == values


_DIALECTS = [{}, {"sep": ";", "quoteall": "true"}, {"quote": "'", "escape": "'", "linesep": "|"}]


@settings(deadline=None)
@given(
    st.lists(st.tuples(st.none() | _TEXT, st.none() | st.integers(-(2**63), 2**63 - 1))),
    st.sampled_from(_DIALECTS),
    st.booleans(),
)
def test_batch_encoding_is_the_row_by_row_encoding(
    rows: list[tuple[str | None, int | None]], opts: dict[str, str], one_column: bool
) -> None:
    import pyarrow as pa

    from zerorename.spark_adapter.files.csvformat import CsvEncoder

    strings = pa.array([r[0] for r in rows], pa.string())
    ints = pa.array([r[1] for r in rows], pa.int64())
    batch = pa.record_batch(
        [strings] if one_column else [strings, ints], ["s", "i"][: 2 - one_column]
    )
    d = parse_dialect(opts)
    enc = CsvEncoder(batch.schema, d, parse_time_formats({}))
    expected = "".join(
        enc.fields.row([s] if one_column else [s, None if i is None else str(i)]) for s, i in rows
    )
    assert enc.batch(batch) == expected.encode()
