"""Options of the ``zerorename`` data source: parsed once, validated, picklable (pure).

Spark hands a Python data source its options with lower-cased keys; this module accepts
any case and the ``partitionBy`` spelling. Credentials are never options: executors use
the standard AWS chain (environment, shared files, instance roles), so nothing secret
is pickled into the plan, stored in records or logged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from zerorename.committers import ConflictScope
from zerorename.engine import EngineConfig
from zerorename.engine.config import ADDRESSING_STYLES, DEFAULT_PART_SIZE, AddressingStyle
from zerorename.engine.errors import EngineConfigError
from zerorename.spark_adapter.commitopts import COMMIT_OPTION_DOCS, CommitSettings, int_option
from zerorename.spark_adapter.errors import CommitMessageError, OptionError
from zerorename.units import MiB
from zerorename.units import parse_size as _parse_size

Committer = Literal["magic", "directory", "partitioned"]
Format = Literal["parquet", "csv", "json", "text"]
Conflict = Literal["fail", "append", "replace"]

PARQUET_CODECS = ("none", "snappy", "gzip", "zstd", "lz4", "brotli")
STREAM_CODECS = ("none", "gzip", "bzip2", "zstd")
_CODEC_ALIASES = {"uncompressed": "none", "bz2": "bzip2", "zst": "zstd", "lz4_raw": "lz4"}

#: option -> (default shown to users, meaning). The single source of the docs table.
OPTION_DOCS: dict[str, tuple[str, str]] = {
    "path": ("(required)", "destination s3://bucket/prefix (the argument of save())"),
    "committer": ("magic", "magic | directory | partitioned"),
    "format": ("parquet", "parquet | csv | json | text"),
    "partitionBy": (
        "(none)",
        "comma-separated partition columns, written as Hive-style col=value directories "
        "escaped as Spark does (Spark 4 rejects .partitionBy() for Python data sources)",
    ),
    "conflict": (
        "append (mode append), replace (mode overwrite)",
        "fail | append | replace: what job commit does about existing objects; "
        "overwrite mode means replace (whole destination, or the partitions written: see "
        "partitionOverwriteMode; always those with the partitioned committer)",
    ),
    "partitionOverwriteMode": (
        "static (or the session's spark.sql.sources.partitionOverwriteMode)",
        "static | dynamic: what mode('overwrite') of a partitionBy write replaces, as in "
        "Spark's file sources: static the whole destination (the partitioned committer: "
        "the partitions written), dynamic only the partitions the job writes; the option "
        "wins over the session's setting",
    ),
    "compression": (
        "snappy (parquet), none (others)",
        "parquet: none|snappy|gzip|zstd|lz4|brotli; csv/json/text: none|gzip|bzip2|zstd",
    ),
    "partSize": (
        f"{DEFAULT_PART_SIZE // MiB}m",
        "multipart part size (5m..5g; binary k/m/g suffixes: 16m = 16 MiB)",
    ),
    "concurrency": ("8", "parts in flight per Python worker process"),
    "poolSize": ("(concurrency-based)", "HTTP connections kept per Python worker process"),
    "endpoint": ("(AWS)", "S3 endpoint URL (MinIO, Ceph RGW, ...)"),
    "region": ("(AWS chain)", "S3 region"),
    "profile": ("(default chain)", "AWS profile name from the shared config files"),
    "addressingStyle": ("auto", "auto | path | virtual"),
    "maxOpenFiles": (
        "16",
        "partition files one task keeps open at once (memory bound); rows of further "
        "partitions spill to local disk and are written at task end, one file each",
    ),
    "maxRecordsPerFile": ("0", "start a new file after this many rows (0: no limit)"),
    "header": ("false", "csv: write a header line"),
    "sep": (",", "csv: field delimiter (one character)"),
    "checkpointLocation": (
        "(none)",
        "streams: Spark's checkpoint; its query id names the stream's log in the destination",
    ),
}

# --- file-format options: Spark's names and defaults (csv, json, text) ---------------------
#: option -> (Spark's default, meaning); added to OPTION_DOCS (the README's table).
FORMAT_OPTION_DOCS: dict[str, tuple[str, str]] = {
    "quote": ('"', "csv: quote character"),
    "escape": ("\\", "csv: escapes the quote (and itself) inside quoted values"),
    "escapeQuotes": ("true", "csv: quote values that contain the quote character"),
    "quoteAll": ("false", "csv: quote every value"),
    "nullValue": ("(empty)", "csv: text written for null"),
    "emptyValue": ('""', "csv: text written for an empty string"),
    "ignoreLeadingWhiteSpace": ("true", "csv: drop leading whitespace of values (Spark's writer)"),
    "ignoreTrailingWhiteSpace": ("true", "csv: drop trailing whitespace of values"),
    "dateFormat": ("yyyy-MM-dd", "csv/json: date pattern (letters y M d and literals)"),
    "timestampFormat": (
        "yyyy-MM-dd'T'HH:mm:ss[.SSS][XXX]",
        "csv/json: timestamp pattern (y M d H m s S XXX), in the session time zone",
    ),
    "timestampNTZFormat": (
        "yyyy-MM-dd'T'HH:mm:ss[.SSS]",
        "csv/json: pattern for timestamps without time zone",
    ),
    "timeZone": ("(session time zone)", "csv/json: zone id timestamps are written in"),
    "ignoreNullFields": ("true", "json: leave null fields out of objects"),
    "lineSep": ("\\n", "csv/json/text: line separator (1 character; csv/json: 2 allowed)"),
    "encoding": ("UTF-8", "csv/json: UTF-8, UTF-16, UTF-16BE, UTF-16LE, ISO-8859-1, US-ASCII"),
}
OPTION_DOCS.update(FORMAT_OPTION_DOCS)
OPTION_DOCS.update(COMMIT_OPTION_DOCS)  # the commit's options (commitopts.py)

#: lower-cased options each format's writer takes (Spark's names; aliases mapped).
FORMAT_OPTIONS: dict[str, frozenset[str]] = {
    "csv": frozenset(
        [
            "header",
            "sep",
            "delimiter",
            "quote",
            "escape",
            "escapequotes",
            "quoteall",
            "nullvalue",
            "emptyvalue",
            "ignoreleadingwhitespace",
            "ignoretrailingwhitespace",
            "dateformat",
            "timestampformat",
            "timestampntzformat",
            "timezone",
            "linesep",
            "encoding",
            "charset",
        ]
    ),
    "json": frozenset(
        [
            "ignorenullfields",
            "dateformat",
            "timestampformat",
            "timestampntzformat",
            "timezone",
            "linesep",
            "encoding",
            "charset",
        ]
    ),
    "text": frozenset({"linesep"}),
    "parquet": frozenset(),
}
#: Spark's other file-source options: refused for the format they belong to (zerorename
#: does not write them), ignored for another format as Spark ignores them.
_SPARK_ONLY: dict[str, frozenset[str]] = {
    "csv": frozenset(
        [
            "comment",
            "chartoescapequoteescaping",
            "locale",
            "nanvalue",
            "positiveinf",
            "negativeinf",
            "mode",
            "inferschema",
            "multiline",
            "samplingratio",
            "enforceschema",
            "maxcolumns",
            "maxcharspercolumn",
            "columnnameofcorruptrecord",
            "unescapedquotehandling",
            "preferdate",
            "inputbuffersize",
            "enabledatetimeparsingfallback",
            "codec",
        ]
    ),
    "json": frozenset(
        [
            "pretty",
            "codec",
            "locale",
            "mode",
            "multiline",
            "primitivesasstring",
            "prefersdecimal",
            "allowcomments",
            "allowunquotedfieldnames",
            "allowsinglequotes",
            "allownumericleadingzeros",
            "allowbackslashescapingandycharacter",
            "allowunquotedcontrolchars",
            "allownonnumericnumbers",
            "dropfieldifallnull",
            "samplingratio",
            "writenonasciicharacterascodepoint",
        ]
    ),
    "text": frozenset({"wholetext", "codec", "encoding", "charset"}),
    "parquet": frozenset({"mergeschema", "datetimerebasemode", "int96rebasemode", "codec"}),
}


def format_options(fmt: str, opts: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The options ``fmt``'s writer takes, validated; another Spark option of that format
    is refused (one line). Sorted (key, value) pairs, picklable."""
    refused = sorted(k for k in opts if k in _SPARK_ONLY[fmt])
    if refused:
        raise OptionError(
            f"option {refused[0]!r} is a Spark {fmt} option zerorename's writer does not "
            f"support; remove it (supported for {fmt}: "
            f"{', '.join(sorted(FORMAT_OPTIONS[fmt])) or 'none'})"
        )
    mine = {k: v for k, v in opts.items() if k in FORMAT_OPTIONS[fmt]}
    if fmt == "parquet":  # no text options to check: no text encoders (and no pyarrow) needed
        return tuple(sorted(mine.items()))
    from zerorename.spark_adapter.files.csvformat import line_sep, parse_dialect, parse_time_formats
    from zerorename.spark_adapter.files.javatext import charset

    if fmt == "csv":
        parse_dialect(mine)
    if fmt in ("csv", "json"):
        parse_time_formats(mine)
        charset(mine.get("encoding", mine.get("charset", "UTF-8")))
        line_sep(mine)
    if fmt == "json" and "ignorenullfields" in mine:
        _bool(mine["ignorenullfields"], "ignoreNullFields")
    if fmt == "text":
        line_sep(mine, most=1)
    return tuple(sorted(mine.items()))


_EVERY_FORMAT_OPTION = frozenset().union(*FORMAT_OPTIONS.values(), *_SPARK_ONLY.values())
# --- end of file-format options -------------------------------------------------------------

_KNOWN = {k.lower() for k in OPTION_DOCS} | _EVERY_FORMAT_OPTION
_SECRET_HINTS = ("secret", "accesskey", "access_key", "sessiontoken", "session_token", "password")

#: Spark's session setting for what an overwrite of a partitioned table replaces.
SESSION_OVERWRITE_KEY = "spark.sql.sources.partitionOverwriteMode"


class PartitionOverwrite(StrEnum):
    """Spark's partition overwrite modes (``spark.sql.sources.partitionOverwriteMode``)."""

    STATIC = "static"
    DYNAMIC = "dynamic"

    @classmethod
    def parse(cls, text: str, what: str = "partitionOverwriteMode") -> PartitionOverwrite:
        """``static`` or ``dynamic`` in any case (as Spark takes them); OptionError else."""
        return cls(_choice(text, what, (cls.STATIC.value, cls.DYNAMIC.value)))


def session_overwrite_mode(seen: Sequence[str | None]) -> PartitionOverwrite:
    """The session's partition overwrite mode as a job's tasks read it: Spark hands every
    task of a SQL write the session's explicitly set SQL settings as local properties, so
    each task reports the value of :data:`SESSION_OVERWRITE_KEY` it got (``""``: not set,
    Spark's default ``static``; None: the task could not read it). All must agree."""
    if not seen or any(v is None for v in seen):
        raise OptionError(
            f"mode('overwrite') of a partitionBy write: {SESSION_OVERWRITE_KEY} could not be "
            "read from the job's tasks; say .option('partitionOverwriteMode', 'static' or "
            "'dynamic')"
        )
    modes = {PartitionOverwrite.parse(v or "static", SESSION_OVERWRITE_KEY) for v in seen}
    if len(modes) != 1:
        raise CommitMessageError(
            f"the job's tasks saw different {SESSION_OVERWRITE_KEY} ({sorted(modes)}); not "
            "committing: say .option('partitionOverwriteMode', 'static' or 'dynamic')"
        )
    return modes.pop()


def options_table() -> str:
    """The options as a Markdown table (for the README and ``--help``)."""
    lines = ["| option | default | meaning |", "| --- | --- | --- |"]

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines += [f"| `{k}` | {cell(d)} | {cell(m)} |" for k, (d, m) in OPTION_DOCS.items()]
    return "\n".join(lines)


def parse_size(text: str, what: str = "size") -> int:
    """``"16m"``, ``"16MiB"``, ``"5242880"``, ``"1g"`` -> bytes: :func:`zerorename.units.parse_size`
    (binary units), refusing with :class:`OptionError`."""
    try:
        return _parse_size(text, what)
    except ValueError as exc:
        raise OptionError(str(exc)) from None


_int = int_option


def _bool(text: str, what: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise OptionError(f"{what} must be true or false, got {text!r}")


def _choice(text: str, what: str, choices: tuple[str, ...]) -> str:
    low = text.strip().lower()
    if low not in choices:
        raise OptionError(f"{what} must be one of {', '.join(choices)}; got {text!r}")
    return low


@dataclass(frozen=True)
class WriteOptions:
    """Everything a write needs, decided on the driver and shipped to every task."""

    path: str
    overwrite: bool = False
    committer: Committer = "magic"
    format: Format = "parquet"
    partition_by: tuple[str, ...] = ()
    conflict: Conflict = "append"
    compression: str = "snappy"
    part_size: int = DEFAULT_PART_SIZE
    concurrency: int = 8
    pool_size: int | None = None
    endpoint: str | None = None
    region: str | None = None
    profile: str | None = None
    addressing_style: AddressingStyle = "auto"
    max_open_files: int = 16
    max_records_per_file: int = 0
    csv_header: bool = False
    csv_sep: str = ","
    #: the format's own options (Spark's names, lower-cased), validated: see format_options.
    format_options: tuple[tuple[str, str], ...] = ()
    #: the partitionOverwriteMode option (None: not given, the session's setting decides).
    partition_overwrite: PartitionOverwrite | None = None
    #: the commit's options (commitConcurrency, stagingDir, ...): see commitopts.py.
    commit: CommitSettings = field(default_factory=CommitSettings)
    #: options this version does not know (kept so a typo can be reported, not acted on).
    unknown: tuple[str, ...] = field(default=())

    @classmethod
    def parse(cls, options: Mapping[str, str], *, overwrite: bool = False) -> WriteOptions:
        """Validate Spark's options (any key case) into a WriteOptions."""
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        for key in opts:
            if any(h in key.replace("-", "").replace(".", "") for h in _SECRET_HINTS):
                raise OptionError(
                    f"option {key!r} looks like a credential: zerorename never takes "
                    "credentials as options; executors use the standard AWS chain "
                    "(environment, ~/.aws files with the 'profile' option, instance roles)"
                )
        path = opts.get("path", "").strip()
        if not path:
            raise OptionError("no destination: use .save('s3://bucket/prefix')")
        if not path.startswith(("s3://", "s3a://")):
            raise OptionError(f"destination {path!r} must be an s3:// URI")
        fmt = _choice(opts.get("format", "parquet"), "format", ("parquet", "csv", "json", "text"))
        committer = _choice(
            opts.get("committer", "magic"), "committer", ("magic", "directory", "partitioned")
        )
        part_cols = tuple(c.strip() for c in opts.get("partitionby", "").split(",") if c.strip())
        if len(set(part_cols)) != len(part_cols):
            raise OptionError(f"partitionBy names a column twice: {part_cols}")
        if committer == "partitioned" and not part_cols:
            raise OptionError("the partitioned committer needs partitionBy columns")
        if "conflict" in opts:
            conflict = _choice(opts["conflict"], "conflict", ("fail", "append", "replace"))
            if overwrite and conflict != "replace":
                raise OptionError(
                    f"mode('overwrite') replaces the destination; conflict={conflict!r} "
                    "contradicts it (use mode('append') with that conflict mode)"
                )
        else:
            conflict = "replace" if overwrite else "append"
        default_codec = "snappy" if fmt == "parquet" else "none"
        codec = opts.get("compression", default_codec).strip().lower()
        codec = _CODEC_ALIASES.get(codec, codec)
        codecs = PARQUET_CODECS if fmt == "parquet" else STREAM_CODECS
        codec = _choice(codec, f"compression for {fmt}", codecs)
        fmt_opts = format_options(fmt, opts)
        sep = opts.get("sep", opts.get("delimiter", ","))
        sep = "\t" if sep == "\\t" else sep
        if len(sep) != 1:
            raise OptionError(f"sep must be one character (or \\t), got {sep!r}")
        style = _choice(opts.get("addressingstyle", "auto"), "addressingStyle", ADDRESSING_STYLES)
        pom = opts.get("partitionoverwritemode")
        out = cls(
            path=path,
            overwrite=overwrite,
            committer=committer,  # type: ignore[arg-type]
            format=fmt,  # type: ignore[arg-type]
            partition_by=part_cols,
            conflict=conflict,  # type: ignore[arg-type]
            compression=codec,
            part_size=(
                parse_size(opts["partsize"], "partSize")
                if "partsize" in opts
                else DEFAULT_PART_SIZE
            ),
            concurrency=_int(opts.get("concurrency", "8"), "concurrency", 1),
            pool_size=_int(opts["poolsize"], "poolSize", 1) if "poolsize" in opts else None,
            endpoint=opts.get("endpoint") or None,
            region=opts.get("region") or None,
            profile=opts.get("profile") or None,
            addressing_style=style,  # type: ignore[arg-type]
            max_open_files=_int(opts.get("maxopenfiles", "16"), "maxOpenFiles", 1),
            max_records_per_file=_int(opts.get("maxrecordsperfile", "0"), "maxRecordsPerFile", 0),
            csv_header=_bool(opts.get("header", "false"), "header"),
            csv_sep=sep,
            format_options=fmt_opts,
            partition_overwrite=PartitionOverwrite.parse(pom) if pom is not None else None,
            commit=CommitSettings.parse(opts),
            unknown=tuple(sorted(k for k in opts if k not in _KNOWN)),
        )
        try:
            out.engine_config()  # refuse a bad part size etc. on the driver, before any task
        except EngineConfigError as exc:
            raise OptionError(str(exc)) from None
        return out

    def engine_config(self) -> EngineConfig:
        """The engine configuration (no credentials: the AWS chain supplies them)."""
        return EngineConfig(
            endpoint_url=self.endpoint,
            region=self.region,
            profile=self.profile,
            addressing_style=self.addressing_style,
            part_size=self.part_size,
            max_concurrency=self.concurrency,
            max_pool_connections=self.pool_size,
        )

    @property
    def session_decides(self) -> bool:
        """The session's partition overwrite mode decides what this write replaces: an
        overwrite of a partitionBy write by the magic or directory committer with no
        partitionOverwriteMode option (the partitioned committer replaces the partitions
        it writes in either mode, and without partition columns Spark ignores the mode)."""
        return (
            self.overwrite
            and bool(self.partition_by)
            and self.committer != "partitioned"
            and self.partition_overwrite is None
        )

    def overwrite_mode(self, seen: Sequence[str | None] | None) -> PartitionOverwrite:
        """The mode this write follows: the option, else (when the session decides) the
        session's setting as the tasks ``seen`` it; ``seen`` None: not a Spark SQL write
        (the RDD API), which Spark's setting does not govern: static."""
        if self.partition_overwrite is not None:
            return self.partition_overwrite
        if not self.session_decides or seen is None:
            return PartitionOverwrite.STATIC
        return session_overwrite_mode(seen)

    def replace_scope(self, mode: PartitionOverwrite) -> ConflictScope:
        """Where the job judges conflicts: the partitions it writes for the partitioned
        committer and for a dynamic overwrite of a partitionBy write; else the whole
        destination (what an overwrite replaces, as with Spark's static mode). An append
        with ``conflict=replace`` and an explicit dynamic option replaces by partition too:
        the option is never silently overridden."""
        replaces = self.overwrite or self.conflict == "replace"
        if self.committer == "partitioned" or (
            replaces and self.partition_by and mode is PartitionOverwrite.DYNAMIC
        ):
            return ConflictScope.PARTITIONS
        return ConflictScope.DESTINATION

    @property
    def setup_scope(self) -> ConflictScope:
        """The scope the job is set up with, before any task ran: the option's, or static's
        when the session decides (the commit records the scope the tasks' reading gives)."""
        return self.replace_scope(self.partition_overwrite or PartitionOverwrite.STATIC)

    @property
    def extension(self) -> str:
        """File name extension, Spark style: ``.snappy.parquet``, ``.csv.gz``, ``.json``."""
        if self.format == "parquet":
            return ".parquet" if self.compression == "none" else f".{self.compression}.parquet"
        base = {"csv": ".csv", "json": ".json", "text": ".txt"}[self.format]
        suffix = {"none": "", "gzip": ".gz", "bzip2": ".bz2", "zstd": ".zst"}[self.compression]
        return base + suffix
