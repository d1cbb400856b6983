"""The ``zerorename`` engine commands (``put``, ``complete``, ``abort``): what runs once the
entry point (:mod:`zerorename.cli.entry`, which defines every command's arguments) has
parsed one of them. The other commands run from their modules (``uploads``/``jobs``/
``inspect``: :mod:`zerorename.cli.jobs`; ``demo``; ``perf``), so a ``put`` loads no committer,
Spark or benchmark module, and a directory ``put`` loads its job's code only then."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zerorename.cli import json as clijson
from zerorename.cli.options import PUT_DIR_DEFAULTS, open_progress
from zerorename.cli.options import engine_config as engine_config  # re-exported
from zerorename.cli.progress import Bar, NullBar
from zerorename.cli.runner import missing_extra as missing_extra  # re-exported
from zerorename.cli.runner import one_line as _one_line
from zerorename.engine import EngineConfig as EngineConfig  # re-exported
from zerorename.engine import PendingUpload, UploadEngine, errors, run
from zerorename.engine.events import BytesSent, UploadCompleted
from zerorename.errors import ZeroRenameError

if TYPE_CHECKING:
    from zerorename.cli.dirupload import DirResult, Scan
    from zerorename.committers import CommitProgress, Job


class CliError(ZeroRenameError):
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


def put(args: argparse.Namespace) -> int:
    """``put``: a file or standard input as one upload (``--defer``: its record), or a
    directory as one job."""
    if args.source != "-" and Path(args.source).is_dir():
        return _cmd_put_dir(args)
    for name in ("conflict", "skip_unsupported", "files"):
        if getattr(args, name) != PUT_DIR_DEFAULTS[name]:
            raise CliError(f"--{name.replace('_', '-')} is for a directory; {args.source} is not")
    bucket, key = parse_s3_url(args.dest)
    if not key:
        raise CliError("give the object key: s3://bucket/key")
    source: Any = sys.stdin.buffer if args.source == "-" else Path(args.source)
    record = _claim_record_path(args.defer) if args.defer is not None else None
    cfg = engine_config(
        args,
        part_size=args.part_size,
        max_concurrency=args.concurrency,
        checksum=args.checksum,
    )

    state = _PutState()
    total = source.stat().st_size if isinstance(source, Path) and source.is_file() else None
    bar = open_progress(args, f"put {key.rpartition('/')[2] or key}", total, "B")

    def on_event(event: object) -> None:
        state.on_event(event)
        if isinstance(event, BytesSent):
            bar.advance(event.delta)

    async def main() -> Any:
        async with UploadEngine(cfg, on_event=on_event) as engine:
            state.started = True
            result = await engine.upload(bucket, key, source, defer=record is not None)
            if record is not None and isinstance(result, PendingUpload):
                await _write_record_or_abort(engine, record, result)
            return result, engine.stats

    try:
        try:
            result, stats = run(main())
        finally:
            bar.close()
    except BaseException as exc:
        if record is not None and record.exists() and record.stat().st_size == 0:
            record.unlink()  # the empty file claimed above; no upload is left behind
        if isinstance(exc, KeyboardInterrupt):
            print(f"zerorename: {state.interrupted(bucket, key, record)}", file=sys.stderr)
            return 130
        raise
    uri = f"s3://{bucket}/{key}"
    if args.quiet and not args.json:
        return 0
    if isinstance(result, PendingUpload):
        if args.json:
            clijson.emit(
                "put",
                result="deferred",
                uri=uri,
                bytes=result.length,
                parts=len(result.parts),
                record=str(args.defer),
            )
        else:
            print(
                f"deferred {uri}: {result.length} bytes in {len(result.parts)} parts; record "
                f"in {args.defer} (complete with: zerorename complete {args.defer})"
            )
    elif args.json:
        clijson.emit(
            "put",
            result="uploaded",
            uri=uri,
            bytes=result.length,
            parts=result.parts,
            retries=stats.retries,
            throttles=stats.throttles,
        )
    else:
        print(
            f"uploaded {uri}: {result.length} bytes in {result.parts} parts "
            f"({stats.retries} retries, {stats.throttles} throttled)"
        )
    return 0


def _cmd_put_dir(args: argparse.Namespace) -> int:
    """``put DIR s3://bucket/prefix/``: the directory as one job (:mod:`.dirupload`)."""
    from zerorename.cli.dirupload import upload_directory
    from zerorename.committers import Destination

    if args.defer is not None:
        raise CliError("--defer is for one file; a directory is committed as one job")
    dest = Destination.parse(args.dest)
    cfg = engine_config(
        args, part_size=args.part_size, max_concurrency=args.concurrency, checksum=args.checksum
    )
    shown = _DirProgress(args)
    job_seen: list[Job] = []

    def report(line: str) -> None:
        print(f"zerorename: {line}", file=sys.stderr)

    async def main() -> DirResult:
        async with UploadEngine(cfg) as engine:
            return await upload_directory(
                engine,
                Path(args.source),
                dest.uri,
                conflict=args.conflict,
                files_at_once=args.files,
                skip=args.skip_unsupported,
                report=report,
                on_scan=shown.on_scan,
                sent=shown.sent,
                commit_progress=shown.commit_tick,
                on_job=job_seen.append,
            )

    try:
        try:
            res = run(main())
        finally:
            shown.bar.close()
    except KeyboardInterrupt:
        if not job_seen:
            print(
                "zerorename: interrupted before the upload started: nothing was written",
                file=sys.stderr,
            )
        elif shown.phase == "upload":
            print(
                f"zerorename: interrupted: job {job_seen[0].job_id} was aborted, nothing is "
                f"visible under {dest.uri} (check with `zerorename jobs list {dest.uri}`)",
                file=sys.stderr,
            )
        else:
            print(
                f"zerorename: interrupted during the commit of job {job_seen[0].job_id}: "
                f"finish it with `zerorename jobs resume {dest.uri} {job_seen[0].job_id}` "
                "(or `jobs abort`)",
                file=sys.stderr,
            )
        return 130
    if args.json:
        clijson.emit(
            "put",
            result="committed",
            uri=dest.uri,
            jobId=res.job_id,
            files=res.files,
            bytes=res.bytes,
            skipped=list(res.skipped),
        )
    elif not args.quiet:
        print(
            f"committed {args.source} to {dest.uri} as job {res.job_id}: {res.files} files, "
            f"{res.bytes} bytes" + (f", {len(res.skipped)} skipped" if res.skipped else "")
        )
    return 0


class _DirProgress:
    """The displays of a directory upload: bytes sent, then files committed."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.bar: Bar = NullBar()
        self.phase = "upload"

    def on_scan(self, found: Scan) -> None:
        self.bar = open_progress(self.args, f"put {found.files} files", found.bytes, "B")

    def sent(self, n: int) -> None:
        self.bar.advance(n)

    def commit_tick(self, p: CommitProgress) -> None:
        if self.phase != "commit":
            self.phase = "commit"
            self.bar.close()
            self.bar = open_progress(self.args, "commit", p.uploads_total, "files")
        self.bar.update(p.uploads_done, p.uploads_total)


class _PutState:
    """What ``put`` knows of its upload when it is interrupted (Ctrl-C): whether it had
    started and whether the engine reported it complete (``UploadCompleted``)."""

    def __init__(self) -> None:
        self.started = False
        self.completed: UploadCompleted | None = None

    def on_event(self, event: object) -> None:
        if isinstance(event, UploadCompleted):
            self.completed = event

    def interrupted(self, bucket: str, key: str, record: Path | None) -> str:
        """The one line that tells the truth about ``s3://bucket/key`` after Ctrl-C: the
        complete (or the single PutObject) may have taken effect even though its answer
        never arrived, so only an upload that had not started was surely not written."""
        uri = f"s3://{bucket}/{key}"
        if self.completed is not None:
            return (
                f"interrupted after {uri} was written ({self.completed.length} bytes): "
                "the object exists"
            )
        if not self.started:
            return f"interrupted before the upload started: {uri} was not written"
        if record is not None:
            return (
                f"interrupted: the deferred upload of {uri} was aborted or may be left "
                f"pending; see `zerorename uploads list {uri}`"
            )
        return (
            f"interrupted while uploading {uri}: the object may exist (its complete may have "
            f"taken effect before the interrupt); check with `aws s3api head-object --bucket "
            f"{bucket} --key {key}`, and `zerorename uploads list {uri}` for a pending upload"
        )


def _claim_record_path(path: str) -> Path:
    """Create the (empty) record file of ``put --defer`` before any byte is uploaded, so a
    path that cannot be written fails at once; an existing file is refused (it may hold
    the only record of another pending upload)."""
    record = Path(path)
    try:
        record.open("x", encoding="utf-8").close()
    except FileExistsError:
        raise CliError(
            f"record file {path} already exists (it may be the only record of another "
            "pending upload); choose another path"
        ) from None
    except OSError as exc:
        raise CliError(f"cannot write the record file {path}: {exc.strerror}") from None
    return record


def _write_record(record: Path, upload: PendingUpload) -> OSError | None:
    """Write (and fsync) the record of a deferred upload; on failure remove the partial
    file and return the error."""
    try:
        with record.open("w", encoding="utf-8") as f:
            f.write(upload.to_json() + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        with contextlib.suppress(OSError):
            record.unlink()
        return exc
    return None


async def _write_record_or_abort(engine: UploadEngine, record: Path, upload: PendingUpload) -> None:
    """Write the record of a deferred upload; if that fails, abort the upload (it could
    never be completed without its record) and say so."""
    exc = _write_record(record, upload)
    if exc is not None:
        await engine.abort(upload)
        raise CliError(
            f"could not write the record file {record}: {exc.strerror}; the upload of "
            f"{upload.uri} was aborted, nothing is left pending"
        )


def _read_records(paths: Sequence[str]) -> list[PendingUpload]:
    records = []
    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise CliError(f"cannot read record {path}: {exc.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CliError(
                f"{path}: not a record: not UTF-8 text (byte {exc.start}); "
                "give the JSON file that put --defer wrote"
            ) from None
        try:
            records.append(PendingUpload.from_json(text))
        except errors.RecordError as exc:
            raise CliError(f"{path}: {exc}") from None
    return records


def finish(args: argparse.Namespace) -> int:
    """``complete`` and ``abort``: the deferred uploads of record files."""
    records = _read_records(args.records)
    cfg = engine_config(args)

    bar = open_progress(args, args.command, len(records), "uploads")

    async def main() -> Any:
        async with UploadEngine(cfg) as engine:
            if args.command == "complete":
                return await engine.complete_many(records, on_result=lambda *_: bar.advance(1))
            return await engine.abort_many(records, on_result=lambda *_: bar.advance(1))

    verb = "completed" if args.command == "complete" else "aborted"
    try:
        try:
            result = run(main())
        finally:
            bar.close()
    except KeyboardInterrupt:
        # a request that went out may have taken effect though its answer never came
        print(
            f"zerorename: interrupted: some of these uploads may have been {verb}; "
            "`zerorename uploads list s3://BUCKET/PREFIX` shows the ones still pending",
            file=sys.stderr,
        )
        return 130
    for f in result.failures:
        print(f"failed: s3://{f.bucket}/{f.key}: {f.error}", file=sys.stderr)
    if args.json:
        clijson.emit(
            args.command,
            succeeded=result.succeeded,
            failed=result.failed,
            bytes=result.bytes,
            failures=[
                {"uri": f"s3://{f.bucket}/{f.key}", "error": _one_line(f.error)}
                for f in result.failures
            ],
        )
    elif not args.quiet:
        print(f"{verb} {result.succeeded} uploads ({result.bytes} bytes), {result.failed} failed")
    return 0 if result.ok else 1
