"""The `zerorename` command: engine commands here, committer and Spark commands plugged
in from their packages (``add_subcommands``/``add_subcommand``) when importable."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zerorename import __version__
from zerorename.engine import EngineConfig, PendingUpload, UploadEngine, errors, run
from zerorename.engine.planning import MiB

log = logging.getLogger("zerorename.cli")

# (module, function) pairs that add their own subcommands to the parser
_PLUGINS = (
    ("zerorename.committers.cli", "add_subcommands"),
    ("zerorename.spark_adapter.demo", "add_subcommand"),
    ("zerorename.perf.cli", "add_subcommands"),
)


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 1."""


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> (bucket, key); refuses anything else with a clear message."""
    if not url.startswith(("s3://", "s3a://")):
        raise CliError(f"{url!r} is not an s3:// URL (expected s3://bucket/key)")
    rest = url.split("://", 1)[1]
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise CliError(f"{url!r} has no bucket (expected s3://bucket/key)")
    return bucket, key


def add_engine_options(p: argparse.ArgumentParser) -> None:
    """Options every command that talks to S3 takes (credentials: the AWS chain)."""
    p.add_argument("--endpoint-url", help="S3 endpoint (default: AWS, or $AWS_ENDPOINT_URL)")
    p.add_argument("--region", help="region (default: from the AWS config)")
    p.add_argument("--profile", help="AWS profile name (default: the default chain)")
    p.add_argument(
        "--addressing-style",
        choices=["auto", "path", "virtual"],
        default="auto",
        help="bucket addressing (default: auto)",
    )


def engine_config(args: argparse.Namespace, **overrides: Any) -> EngineConfig:
    """An EngineConfig from the common options (and the command's own). Without
    --endpoint-url, botocore itself honours AWS_ENDPOINT_URL(_S3) and the config files."""
    return EngineConfig(
        endpoint_url=args.endpoint_url,
        region=args.region,
        profile=args.profile,
        addressing_style=args.addressing_style,
        **overrides,
    )


def _cmd_put(args: argparse.Namespace) -> int:
    bucket, key = parse_s3_url(args.dest)
    if not key:
        raise CliError("give the object key: s3://bucket/key")
    source: Any = sys.stdin.buffer if args.source == "-" else Path(args.source)
    cfg = engine_config(
        args,
        part_size=args.part_size * MiB,
        max_concurrency=args.concurrency,
        checksum=args.checksum,
    )

    async def main() -> Any:
        async with UploadEngine(cfg) as engine:
            result = await engine.upload(bucket, key, source, defer=args.defer is not None)
            return result, engine.stats

    result, stats = run(main())
    if isinstance(result, PendingUpload):
        Path(args.defer).write_text(result.to_json() + "\n", encoding="utf-8")
        print(
            f"deferred s3://{bucket}/{key}: {result.length} bytes in {len(result.parts)} "
            f"parts; record in {args.defer} (complete with: zerorename complete {args.defer})"
        )
    else:
        print(
            f"uploaded s3://{bucket}/{key}: {result.length} bytes in {result.parts} parts "
            f"({stats.retries} retries, {stats.throttles} throttled)"
        )
    return 0


def _read_records(paths: Sequence[str]) -> list[PendingUpload]:
    records = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot read record {path}: {exc.strerror}") from None
        try:
            records.append(PendingUpload.from_json(text))
        except errors.RecordError as exc:
            raise CliError(f"{path}: {exc}") from None
    return records


def _cmd_finish(args: argparse.Namespace) -> int:
    records = _read_records(args.records)
    cfg = engine_config(args)

    async def main() -> Any:
        async with UploadEngine(cfg) as engine:
            if args.command == "complete":
                return await engine.complete_many(records)
            return await engine.abort_many(records)

    result = run(main())
    verb = "completed" if args.command == "complete" else "aborted"
    for f in result.failures:
        print(f"failed: s3://{f.bucket}/{f.key}: {f.error}", file=sys.stderr)
    print(f"{verb} {result.succeeded} uploads ({result.bytes} bytes), {result.failed} failed")
    return 0 if result.ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zerorename",
        description="Zero-rename writes into S3: deferred multipart uploads, committed jobs.",
    )
    parser.add_argument("--version", action="version", version=f"zerorename {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    put = sub.add_parser("put", help="upload a file (or - for stdin) as a multipart upload")
    put.add_argument("source", help="local file path, or - to read standard input")
    put.add_argument("dest", help="s3://bucket/key")
    put.add_argument(
        "--defer",
        metavar="RECORD.json",
        help="upload the parts but do not complete; write the record here",
    )
    put.add_argument(
        "--part-size",
        type=int,
        default=16,
        metavar="MIB",
        help="part size in MiB (default: 16; 5..5120)",
    )
    put.add_argument("--concurrency", type=int, default=16, help="parts in flight (default: 16)")
    put.add_argument(
        "--checksum",
        choices=["none", "CRC32", "CRC32C", "SHA256"],
        default="CRC32C",
        help="per-part checksum (default: CRC32C)",
    )
    add_engine_options(put)
    put.set_defaults(func=_cmd_put)

    for name, text in (
        ("complete", "complete deferred uploads from record files"),
        ("abort", "abort deferred uploads from record files"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("records", nargs="+", metavar="RECORD.json")
        add_engine_options(p)
        p.set_defaults(func=_cmd_finish)

    for module_name, func_name in _PLUGINS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("zerorename"):
                continue  # that part is not installed
            raise
        getattr(module, func_name)(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
        return code
    except (CliError, errors.EngineError) as exc:
        print(f"zerorename: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("zerorename: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
