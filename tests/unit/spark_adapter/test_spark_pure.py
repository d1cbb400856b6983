"""Pure parts of the Spark adapter: options, Spark-style partition paths, routing, formats."""

from __future__ import annotations

import datetime as dt
import decimal
import gzip
import io
import json
from typing import Any

import pytest

from needs import need_module
from zerorename.errors import ConfigError
from zerorename.spark_adapter.files.partitioning import (
    escape_path_name,
    partition_dir,
    unescape_path_name,
    value_text,
)
from zerorename.spark_adapter.options import WriteOptions, options_table, parse_size

JOB = "11111111-2222-4333-8444-555555555555"


# ---------------------------------------------------------------- options


def test_defaults() -> None:
    o = WriteOptions.parse({"path": "s3://b/p"})
    assert (o.committer, o.format, o.conflict, o.compression) == (
        "magic",
        "parquet",
        "append",
        "snappy",
    )
    assert o.partition_by == () and o.part_size == 16 * 1024 * 1024 and o.concurrency == 8
    assert o.extension == ".snappy.parquet"


def test_keys_any_case_and_partitionby() -> None:
    o = WriteOptions.parse(
        {
            "path": "s3a://b/p",
            "partitionBy": " a, b ",
            "PARTSIZE": "5m",
            "Format": "csv",
            "compression": "gzip",
            "maxRecordsPerFile": "10",
        }
    )
    assert o.partition_by == ("a", "b")
    assert o.part_size == 5 * 1024 * 1024
    assert o.extension == ".csv.gz"
    assert o.max_records_per_file == 10


def test_overwrite_means_replace() -> None:
    assert WriteOptions.parse({"path": "s3://b/p"}, overwrite=True).conflict == "replace"
    assert WriteOptions.parse({"path": "s3://b/p", "conflict": "fail"}).conflict == "fail"
    with pytest.raises(ConfigError, match="contradicts"):
        WriteOptions.parse({"path": "s3://b/p", "conflict": "append"}, overwrite=True)


@pytest.mark.parametrize(
    "opts",
    [
        {},
        {"path": "/local/dir"},
        {"path": "s3://b/p", "committer": "rename"},
        {"path": "s3://b/p", "format": "orc"},
        {"path": "s3://b/p", "partsize": "1m"},
        {"path": "s3://b/p", "partsize": "lots"},
        {"path": "s3://b/p", "compression": "snappy", "format": "csv"},
        {"path": "s3://b/p", "committer": "partitioned"},
        {"path": "s3://b/p", "partitionby": "a,a"},
        {"path": "s3://b/p", "concurrency": "0"},
        {"path": "s3://b/p", "sep": "::"},
    ],
)
def test_bad_options_refused(opts: dict[str, str]) -> None:
    from zerorename.spark_adapter.errors import OptionError, SparkAdapterError

    with pytest.raises(OptionError) as info:
        WriteOptions.parse(opts)
    assert isinstance(info.value, ConfigError) and isinstance(info.value, SparkAdapterError)


@pytest.mark.parametrize("key", ["secretKey", "fs.s3a.access.key", "aws_session_token"])
def test_credentials_are_never_options(key: str) -> None:
    with pytest.raises(ConfigError, match="credential") as info:
        WriteOptions.parse({"path": "s3://b/p", key: "AKIAVERYSECRET"})
    assert "AKIAVERYSECRET" not in str(info.value)


def test_engine_config_has_no_credentials() -> None:
    o = WriteOptions.parse(
        {
            "path": "s3://b/p",
            "endpoint": "http://127.0.0.1:9",
            "poolsize": "3",
            "profile": "p1",
            "addressingstyle": "path",
        }
    )
    cfg = o.engine_config()
    assert cfg.endpoint_url == "http://127.0.0.1:9" and cfg.max_pool_connections == 3
    assert cfg.profile == "p1" and cfg.aws_access_key_id is None
    assert cfg.addressing_style == "path"


def test_sizes_and_table() -> None:
    assert parse_size("16MiB") == parse_size("16m") == 16 * 1024 * 1024
    assert parse_size("1g") == 1024**3 and parse_size("123") == 123
    table = options_table()
    assert "| `committer` | magic |" in table and "partitionBy" in table
    assert all(line.count(" | ") == 2 for line in table.splitlines()[2:])  # pipes escaped


def test_unknown_options_are_kept_for_reporting() -> None:
    o = WriteOptions.parse({"path": "s3://b/p", "comitter": "magic"})
    assert o.unknown == ("comitter",)


# ---------------------------------------------------------------- partition paths


# directory names Spark 4.3 itself wrote for these values (df.write.partitionBy(...).parquet)
SPARK_DIRS = {
    "a b": "s=a b",
    "x/y": "s=x%2Fy",
    "k=v": "s=k%3Dv",
    "100%": "s=100%25",
    "q?": "s=q%3F",
    "h#": "s=h%23",
    "c:d": "s=c%3Ad",
    "é ü": "s=é ü",
    "": "s=__HIVE_DEFAULT_PARTITION__",
    None: "s=__HIVE_DEFAULT_PARTITION__",
    "a'b\"c": "s=a%27b%22c",
    "*[]{}^\\": "s=%2A%5B%5D%7B}%5E%5C",
    "\x01\t\n": "s=%01%09%0A",
    "+plus": "s=+plus",
    "~tilde,comma;semi&amp": "s=~tilde,comma;semi&amp",
}


@pytest.mark.parametrize("value", list(SPARK_DIRS))
def test_partition_dirs_match_spark(value: str | None) -> None:
    assert partition_dir(["s"], [value]) == SPARK_DIRS[value]


def test_column_names_escaped_and_roundtrip() -> None:
    assert partition_dir(["we=ird col"], ["1"]) == "we%3Dird col=1"
    text = "\x01\t\n*[]{}^\\ 100% k=v/x:y"
    assert unescape_path_name(escape_path_name(text)) == text
    assert unescape_path_name("%zz%4") == "%zz%4"


@pytest.mark.parametrize(
    ("value", "type_name", "tz", "text"),
    [  # the strings Spark 4.3 put in directory names for these values
        (1, "int64", None, "1"),
        (True, "bool", None, "true"),
        (1.5, "float", None, "1.5"),
        (0.1, "float", None, "0.1"),
        (2.0, "double", None, "2.0"),
        (1e20, "double", None, "1.0E20"),
        (1e-5, "double", None, "1.0E-5"),
        (-0.0, "double", None, "-0.0"),
        (float("nan"), "double", None, "NaN"),
        (1234567.0, "double", None, "1234567.0"),
        (12345678.0, "double", None, "1.2345678E7"),
        (dt.date(2024, 1, 2), "date32[day]", None, "2024-01-02"),
        (
            dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
            "timestamp[us, tz=UTC]",
            "UTC",
            "2024-01-02 03:04:05",
        ),
        (
            dt.datetime(2024, 1, 2, 3, 4, 5, 120000, tzinfo=dt.UTC),
            "timestamp[us, tz=UTC]",
            "UTC",
            "2024-01-02 03:04:05.12",
        ),
        (
            dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
            "timestamp[us, tz=Europe/Paris]",
            "Europe/Paris",
            "2024-01-02 04:04:05",
        ),
        (decimal.Decimal("1.50"), "decimal128(10, 2)", None, "1.50"),
        (None, "string", None, None),
    ],
)
def test_value_text_matches_spark(value: Any, type_name: str, tz: str | None, text: str) -> None:
    assert value_text(value, type_name, tz) == text


# ---------------------------------------------------------------- routing and formats

pa = need_module("pyarrow")


class _Mem(io.BytesIO):
    store: dict[str, bytes]
    rel: str

    def close(self) -> None:
        if not self.closed:
            self.store[self.rel] = self.getvalue()
        super().close()

    def abort(self) -> None:
        self.store.setdefault("_aborted", b"")
        self.store["_aborted"] += self.rel.encode() + b"\n"
        super().close()


def _opener(store: dict[str, bytes]):  # type: ignore[no-untyped-def]
    def open_(rel: str) -> _Mem:
        m = _Mem()
        m.store, m.rel = store, rel
        return m

    return open_


def _router(opts: dict[str, str], schema: Any, store: dict[str, bytes]) -> Any:
    from zerorename.spark_adapter.files.router import BatchRouter

    return BatchRouter(
        WriteOptions.parse({"path": "s3://b/p", **opts}), schema, 3, JOB, _opener(store)
    )


def test_router_splits_by_partition_and_drops_partition_columns() -> None:
    import pyarrow.parquet as pq

    store: dict[str, bytes] = {}
    batch = pa.record_batch(
        {
            "id": list(range(8)),
            "p": ["a", "b", None, "a", "x/y", "", "b", "a"],
            "q": [1, 1, 1, 2, 1, 1, 1, 2],
        }
    )
    r = _router({"partitionby": "p,q"}, batch.schema, store)
    r.write(batch)
    files = r.close()
    dirs = sorted({f.rel.rsplit("/", 1)[0] for f in files})
    assert dirs == [
        "p=__HIVE_DEFAULT_PARTITION__/q=1",
        "p=a/q=1",
        "p=a/q=2",
        "p=b/q=1",
        "p=x%2Fy/q=1",
    ]
    assert all(f.rel.rsplit("/", 1)[1].startswith(f"part-00003-{JOB}-c") for f in files)
    assert sum(f.rows for f in files) == 8 == r.rows
    ids = []
    for f in files:
        table = pq.read_table(io.BytesIO(store[f.rel]))
        assert table.schema.names == ["id"]
        assert f.bytes == len(store[f.rel])
        ids += table.column("id").to_pylist()
    assert sorted(ids) == list(range(8))


def test_router_limits_open_files_and_rolls_over() -> None:
    store: dict[str, bytes] = {}
    batch = pa.record_batch({"id": list(range(9)), "p": ["a", "b", "c"] * 3})
    r = _router(
        {"partitionby": "p", "maxopenfiles": "2", "maxrecordsperfile": "2", "format": "json"},
        batch.schema,
        store,
    )
    r.write(batch)
    r.write(batch)
    files = r.close()
    assert all(f.rows <= 2 for f in files)
    assert sum(f.rows for f in files) == 18
    assert len({f.rel for f in files}) == len(files)
    rows = [json.loads(line) for f in files for line in store[f.rel].decode().splitlines()]
    assert sorted(x["id"] for x in rows) == sorted(list(range(9)) * 2)


def test_router_abort_aborts_open_files() -> None:
    store: dict[str, bytes] = {}
    batch = pa.record_batch({"id": [1, 2], "p": ["a", "b"]})
    r = _router({"partitionby": "p", "format": "csv"}, batch.schema, store)
    r.write(batch)
    r.abort()
    assert sorted(store["_aborted"].decode().split()) == sorted(
        [f"p=a/part-00003-{JOB}-c000.csv", f"p=b/part-00003-{JOB}-c001.csv"]
    )


@pytest.mark.parametrize(
    ("fmt", "codec"),
    [
        ("parquet", "snappy"),
        ("parquet", "none"),
        ("parquet", "zstd"),
        ("csv", "none"),
        ("csv", "gzip"),
        ("json", "none"),
        ("json", "gzip"),
        ("text", "none"),
    ],
)
def test_formats_stream_and_read_back(fmt: str, codec: str) -> None:
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    store: dict[str, bytes] = {}
    if fmt == "text":
        batch = pa.record_batch({"line": ["x", "é", None, "z"]})
    else:
        batch = pa.record_batch({"id": [1, 2, 3, 4], "s": ["x", "é", None, "a,b"]})
    r = _router({"format": fmt, "compression": codec, "header": "true"}, batch.schema, store)
    r.write(batch)
    r.write(batch)
    (f,) = r.close()
    data = store[f.rel]
    if codec == "gzip":
        data = gzip.decompress(data)
    if fmt == "parquet":
        assert pq.read_table(io.BytesIO(data)).num_rows == 8
    elif fmt == "csv":
        values = pcsv.read_csv(io.BytesIO(data)).column("s").to_pylist()
        assert [v or None for v in values] == ["x", "é", None, "a,b"] * 2  # null: empty field
    elif fmt == "json":
        rows = [json.loads(x) for x in data.decode().splitlines()]
        assert rows[2] == {"id": 3} and len(rows) == 8
    else:
        assert data.decode() == "x\né\n\nz\n" * 2


def test_text_needs_one_string_column() -> None:
    from zerorename.spark_adapter.files.formats import check_schema

    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    with pytest.raises(ConfigError):
        check_schema(schema, WriteOptions.parse({"path": "s3://b/p", "format": "text"}))
    check_schema(
        schema, WriteOptions.parse({"path": "s3://b/p", "format": "text", "partitionby": "a"})
    )
    with pytest.raises(ConfigError, match="not in the data"):
        check_schema(schema, WriteOptions.parse({"path": "s3://b/p", "partitionby": "zz"}))


def test_router_bounds_buffered_parquet_data(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    from zerorename.spark_adapter.files import router as router_mod

    monkeypatch.setattr(router_mod, "TASK_BUFFER_BYTES", 64 * 1024)
    store: dict[str, bytes] = {}
    batch = pa.record_batch({"id": list(range(3000)), "p": ["a", "b", "c"] * 1000})
    r = _router({"partitionby": "p"}, batch.schema, store)
    for _ in range(10):
        r.write(batch)
        assert sum(e.writer.buffered for e in r._open.values()) <= 64 * 1024
    files = r.close()
    assert len(files) == 3 and sum(f.rows for f in files) == 30000
    groups = [pq.ParquetFile(io.BytesIO(store[f.rel])).num_row_groups for f in files]
    assert all(g > 1 for g in groups)  # flushed early, as smaller row groups
    ids = sorted(
        i for f in files for i in pq.read_table(io.BytesIO(store[f.rel]))["id"].to_pylist()
    )
    assert ids == sorted(list(range(3000)) * 10)
