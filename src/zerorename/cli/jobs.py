"""Committer commands for the ``zerorename`` CLI: pending uploads, jobs, record inspection.

    zerorename uploads list  s3://bucket/prefix [--older-than 2h] [--json]
    zerorename uploads abort s3://bucket/prefix [--older-than 2h] [--dry-run] [--all-of-bucket]
    zerorename jobs list|show|resume|abort s3://bucket/dest [JOB_ID]
    zerorename inspect s3://bucket/key|FILE   (a _SUCCESS, .pending or .pendingset) [--json]

``jobs`` knows zerorename's jobs and Hadoop S3A's magic jobs
(:mod:`zerorename.committers.s3a.jobs`): a JOB_ID whose ``__magic_job-<id>/`` holds S3A's
``job-<id>/`` is S3A's. ``inspect`` reads
zerorename's and S3A's records, from the store or from a local file.

A prefix is always taken as a directory (``prefix + '/'``): ``s3://b/dataset1`` never
touches ``s3://b/dataset10/...``; an empty path component (``s3://b//``) is refused, and
``uploads abort`` of a whole bucket needs ``--all-of-bucket``. A job's objects and uploads
are told apart by the naming rule and the job's records, never by a substring. Human output
escapes control characters (a hostile record cannot forge terminal output). Endpoint and
credentials: the standard AWS environment and config, plus the engine options every
command shares (:func:`zerorename.cli.options.engine_config`). Errors print
one line and exit 1. The commands' arguments are defined in :mod:`.jobargs` (no import of
this module's engine and committers to parse or to print help); :data:`COMMANDS` runs them.
The ``jobs`` commands import the job machinery (committer, claims, S3A jobs) when they
run: ``uploads`` and ``inspect`` load only the listing and record code they use.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import unicodedata
from collections.abc import Awaitable, Callable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from zerorename.cli import jobargs
from zerorename.cli import json as clijson
from zerorename.cli.jobargs import (
    Bar,
    Progress,
    StreamJobIds,
    StreamJobs,
)
from zerorename.cli.jobargs import parse_age as parse_age  # re-exported
from zerorename.cli.options import engine_config
from zerorename.committers.codec.pending import (
    PendingRecord,
    SuccessData,
    Unchecked,
    read_pendingset,
)
from zerorename.committers.errors import CommitterError, RecordFormatError
from zerorename.committers.maintenance import (
    inspect_record,
    list_jobs,
    uploads_older_than,
    uploads_under,
)
from zerorename.committers.paths import PENDING_SUFFIX, PENDINGSET_SUFFIX, Destination
from zerorename.committers.store import abort_uploads, job_uploads
from zerorename.engine import UploadEngine, run
from zerorename.engine.errors import EngineError
from zerorename.engine.results import UploadInfo

if TYPE_CHECKING:
    from zerorename.committers.commit.run import CommitProgress
    from zerorename.committers.committer import Job


@contextlib.contextmanager
def _progress(args: argparse.Namespace, label: str, total: int | None, unit: str) -> Iterator[Bar]:
    """The command's display (nothing without a ``progress`` hook), closed at the end."""
    factory: Progress | None = getattr(args, "progress_hook", None)
    if factory is None:
        yield _NoBar()
        return
    bar = factory(args, label, total, unit)
    try:
        yield bar
    finally:
        bar.close()


class _NoBar:
    def advance(self, n: int) -> None:
        pass

    def update(self, done: int, total: int | None = None) -> None:
        pass

    def close(self) -> None:
        pass


#: characters shown as escapes in human output: controls (C0, DEL, C1), format characters
#: (bidi overrides, zero-width), line and paragraph separators
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def safe(value: object) -> str:
    """``value`` as text that prints as exactly one inert line: a backslash and every
    control, format or separator character are written as escapes (``\\x1b``)."""
    out: list[str] = []
    for ch in str(value):
        if ch == "\\":
            out.append("\\\\")
        elif unicodedata.category(ch) in _UNSAFE_CATEGORIES:
            code = ord(ch)
            out.append(
                f"\\x{code:02x}"
                if code < 0x100
                else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
            )
        else:
            out.append(ch)
    return "".join(out)


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def safe_json(value: Any, *, indent: int | None = 1) -> str:
    """JSON (unicode kept readable) in which every control, format or separator character
    is a ``\\uXXXX`` escape: still the same JSON, but inert on a terminal."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    # json.dumps escapes C0 inside strings itself: a raw newline is the layout's own
    return "".join(
        _json_escape(ch) if ch != "\n" and unicodedata.category(ch) in _UNSAFE_CATEGORIES else ch
        for ch in text
    )


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts)) if ts else "?"


def _age(ts: float) -> str:
    s = max(0.0, time.time() - ts)
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s / n:.1f}{unit}"
    return f"{s:.0f}s"


Handler = Callable[[UploadEngine, argparse.Namespace], Awaitable[int]]


def _runner(handler: Handler) -> Callable[[argparse.Namespace], int]:
    """Wrap a command: open an engine, run, turn every error into a message and exit 1."""

    def go(args: argparse.Namespace) -> int:
        async def main() -> int:
            async with UploadEngine(engine_config(args)) as eng:
                return await handler(eng, args)

        try:
            return run(main())
        except (CommitterError, EngineError, ValueError) as exc:
            print(f"zerorename: error: {safe(exc)}", file=sys.stderr)
            return 1

    return go


def _uploads_source(eng: UploadEngine, args: argparse.Namespace, *, destructive: bool) -> Any:
    """The uploads a command acts on; a whole bucket is read freely, but aborted only with
    ``--all-of-bucket``."""
    dest = Destination.parse(args.prefix)
    whole = args.all_of_bucket if destructive else dest.whole_bucket
    if args.older_than is not None:
        return uploads_older_than(eng, dest, args.older_than, all_of_bucket=whole)
    return uploads_under(eng, dest, all_of_bucket=whole)


def _upload_line(u: UploadInfo) -> str:
    return safe(f"s3://{u.bucket}/{u.key}") + f" {safe(u.upload_id)}"


def _upload_json(u: UploadInfo) -> dict[str, Any]:
    return {"bucket": u.bucket, "key": u.key, "uploadId": u.upload_id, "initiated": u.initiated}


async def _uploads_list(eng: UploadEngine, args: argparse.Namespace) -> int:
    if args.json:  # one document, its list streamed
        with clijson.JsonList("uploads list", "uploads", prefix=args.prefix) as doc:
            async for u in _uploads_source(eng, args, destructive=False):
                doc.add(_upload_json(u))
        return 0
    count = 0
    async for u in _uploads_source(eng, args, destructive=False):
        count += 1
        if args.json:
            print(
                safe_json(
                    {
                        "bucket": u.bucket,
                        "key": u.key,
                        "uploadId": u.upload_id,
                        "initiated": u.initiated,
                    },
                    indent=None,
                )
            )
        else:
            print(
                f"{_when(u.initiated)}  {_age(u.initiated):>7}  {safe(f's3://{u.bucket}/{u.key}')}"
                f"  {safe(u.upload_id)}"
            )
    if not args.json:
        print(f"{count} pending uploads", file=sys.stderr)
    return 0


async def _uploads_abort(eng: UploadEngine, args: argparse.Namespace) -> int:
    if args.json:
        return await _uploads_abort_json(eng, args)
    verb = "would abort" if args.dry_run else "aborted"
    if args.dry_run:
        count = 0
        async for u in _uploads_source(eng, args, destructive=True):
            count += 1
            print(f"{verb} {_upload_line(u)}")
    else:
        with _progress(args, "uploads abort", None, "uploads") as bar:

            def report(u: UploadInfo) -> None:
                print(f"{verb} {_upload_line(u)}")
                bar.advance(1)

            source = _uploads_source(eng, args, destructive=True)
            count = await abort_uploads(eng, source, on_abort=report)
    print(f"{count} uploads {verb}", file=sys.stderr)
    return 0


async def _uploads_abort_json(eng: UploadEngine, args: argparse.Namespace) -> int:
    """``uploads abort --json``: the uploads aborted (or that would be), one document."""
    field = "wouldAbort" if args.dry_run else "aborted"
    with clijson.JsonList("uploads abort", field, prefix=args.prefix, dryRun=args.dry_run) as doc:
        source = _uploads_source(eng, args, destructive=True)
        if args.dry_run:
            count = 0
            async for u in source:
                count += 1
                doc.add(_upload_json(u))
        else:
            with _progress(args, "uploads abort", None, "uploads") as bar:

                def add(u: UploadInfo) -> None:
                    doc.add(_upload_json(u))
                    bar.advance(1)

                count = await abort_uploads(eng, source, on_abort=add)
        doc.set(count=count)
    return 0


def _kind_label(job: Job) -> str:
    """A zerorename job's kind as ``jobs list|show|resume|abort`` report it: the committer
    its ``job.json`` names, ``zerorename/?`` for a job without one."""
    return "zerorename/" + (job.kind if job.kind_recorded else "?")


async def _jobs_list(eng: UploadEngine, args: argparse.Namespace) -> int:
    """zerorename's jobs and Hadoop S3A's magic jobs, one line each, sorted by job id; the
    kind column tells them apart (``zerorename/<committer>``, ``stream`` for a streaming
    query's batch job, as ``jobs show|resume|abort`` say, or ``s3a/magic``)."""
    from zerorename.committers.s3a.jobs import list_s3a_jobs

    dest = Destination.parse(args.dest)
    ids: StreamJobIds | None = getattr(args, "stream_ids", None)
    streams = await ids(eng, dest) if ids is not None else frozenset()
    rows: list[tuple[str, str, str, str]] = []
    s3a = set()
    async for sj in list_s3a_jobs(eng, dest):
        s3a.add(sj.job_id)
        rows.append((sj.job_id, "s3a/magic", sj.state, _when(sj.created)))
    async for entry in list_jobs(eng, dest):
        if entry.job_id in s3a and entry.marker is None and entry.journal is None:
            continue  # S3A's directory, listed above
        created = _when(entry.marker.created) if entry.marker else "?"
        kind = "zerorename/" + (entry.marker.committer if entry.marker else "?")
        if entry.job_id in streams:
            kind = "stream"
        rows.append((entry.job_id, kind, entry.state, created))
    if getattr(args, "json", False):
        jobs = [dict(zip(("jobId", "kind", "state", "created"), r, strict=True)) for r in rows]
        clijson.emit("jobs list", dest=dest.uri, jobs=sorted(jobs, key=lambda j: j["jobId"]))
        return 0
    for job_id, kind, state, created in sorted(rows):
        print(safe(f"{job_id}  {kind:<20}  {state:<40}  created {created}"))
    print(f"{len(rows)} jobs under {safe(dest.uri)}", file=sys.stderr)
    return 0


async def _s3a_action(eng: UploadEngine, dest: Destination, args: argparse.Namespace) -> int:
    """show / resume / abort of a Hadoop S3A magic job (see :mod:`s3ajobs`)."""
    from zerorename.committers.s3a.abort import S3AAbortResult, kept_lines
    from zerorename.committers.s3a.jobs import (
        NOTHING_ROLLED_BACK,
        abort_s3a_job,
        resume_s3a_job,
        show_s3a_job,
    )

    job_id = str(args.job_id)

    def say(line: str) -> None:
        print(safe(line), file=sys.stderr)

    if args.action == "show":
        info = await show_s3a_job(eng, dest, job_id)
        if getattr(args, "json", False):
            clijson.emit("jobs show", kind="s3a/magic", job=info)
            return 0
        print(safe_json(info))
        return 0
    if args.action == "resume":
        res = await resume_s3a_job(eng, dest, job_id, report=say)
        if getattr(args, "json", False):
            clijson.emit(
                "jobs resume",
                jobId=res.job_id,
                kind="s3a/magic",
                files=res.files,
                bytes=res.bytes,
                completedNow=res.completed_now,
                alreadyCompleted=res.already_completed,
                uploadsAborted=res.open_uploads_aborted,
                objectsDeleted=res.records_deleted,
                successWritten=res.success_written,
                messages=[],
            )
            return 0
        wrote = "_SUCCESS written" if res.success_written else "_SUCCESS left as it was"
        print(
            safe(
                f"S3A job {res.job_id} committed: {res.files} files, {res.bytes} bytes "
                f"({res.completed_now} completed now, {res.already_completed} were already); "
                f"{res.open_uploads_aborted} uploads of uncommitted task attempts aborted; "
                f"{wrote}; its directory ({res.records_deleted} objects) deleted"
            )
        )
        return 0
    as_json = bool(getattr(args, "json", False))

    def tell(res: S3AAbortResult) -> None:
        # before the abort deletes its note: what it kept is told even if it dies after
        for line in kept_lines(res):
            if as_json:
                say(line)
            else:
                print(safe(line))

    ab = await abort_s3a_job(eng, dest, job_id, report=say, tell=tell)
    done = f"its directory ({ab.records_deleted} objects) deleted"
    if as_json:
        clijson.emit(
            "jobs abort",
            jobId=ab.job_id,
            kind="s3a/magic",
            rolledBack=ab.rolled_back,
            uploadsAborted=ab.uploads_aborted,
            objectsDeleted=ab.records_deleted,
            kept=[uri for uri, _ in ab.maybe_completed] + [uri for uri, _ in ab.kept],
            otherPendingUploads=ab.other_pending,
            messages=[] if ab.rolled_back else [NOTHING_ROLLED_BACK],
        )
        return 0
    if ab.rolled_back:
        print(safe(f"S3A job {ab.job_id} aborted: {ab.uploads_aborted} uploads aborted, {done}"))
    else:
        left = f"{ab.uploads_aborted} uploads of uncommitted task attempts aborted"
        print(safe(f"S3A job {ab.job_id}: {NOTHING_ROLLED_BACK}; {left}, {done}"))
    if ab.other_pending:
        print(
            safe(
                f"left {ab.other_pending} pending uploads under {dest.uri} that no record of "
                "this job names (S3A keys carry no job id; see `zerorename uploads list`)"
            )
        )
    return 0


def _need_job(args: argparse.Namespace) -> str:
    if not args.job_id:
        raise CommitterError(f"jobs {args.action} needs a JOB_ID (see `zerorename jobs list`)")
    return str(args.job_id)


async def _stored_spelling(eng: UploadEngine, dest: Destination, job_id: str) -> str:
    """The id as the job's records spell it. A UUID typed in another spelling (upper case,
    no hyphens, braces: any form ``uuid.UUID`` reads) is the canonical lower-case form
    zerorename and Hadoop write, unless an S3A job is stored under exactly the typed text
    (``fs.s3a.committer.uuid`` as a user gave it). Without this, an S3A or a stream
    batch's job named in another spelling was missed by its own lookup and handled as a
    plain zerorename job: a committed S3A job's directory deleted, a stream batch
    published outside its log (stop 37's attack)."""
    import uuid

    from zerorename.committers.s3a.read import find_s3a_job

    try:
        canonical = str(uuid.UUID(job_id))
    except ValueError:
        return job_id  # a Hadoop JobID, or not an id: the lookups judge it
    if canonical == job_id or await find_s3a_job(eng, dest, job_id) is not None:
        return job_id
    return canonical


async def _jobs_action(eng: UploadEngine, args: argparse.Namespace) -> int:
    from zerorename.cli.claims import CLAIM_VERBS, command_claim
    from zerorename.committers.s3a.jobs import job_committed

    if args.action == "list":
        return await _jobs_list(eng, args)
    dest = Destination.parse(args.dest)
    job_id = await _stored_spelling(eng, dest, _need_job(args))
    if args.action in CLAIM_VERBS:  # of a resume and an abort racing, one acts
        settled = partial(job_committed, eng, dest, job_id) if args.action == "resume" else None
        async with command_claim(eng, dest, job_id, args.action, settled=settled):
            return await _job_action(eng, dest, job_id, args)
    return await _job_action(eng, dest, job_id, args)


async def _job_action(
    eng: UploadEngine, dest: Destination, job_id: str, args: argparse.Namespace
) -> int:
    from zerorename.committers.committer import MagicCommitter
    from zerorename.committers.s3a.jobs import UNRECORDED
    from zerorename.committers.s3a.read import find_s3a_job

    if await find_s3a_job(eng, dest, job_id) is not None:  # Hadoop 3.4's or 3.3's
        return await _s3a_action(eng, dest, args)
    streams: StreamJobs | None = getattr(args, "stream_jobs", None)
    stream = await streams(eng, dest, job_id, args.action) if streams is not None else None
    if stream is not None and args.action != "show":
        if getattr(args, "json", False):
            clijson.emit(
                f"jobs {args.action}", jobId=job_id, kind="stream", messages=list(stream.lines)
            )
            return 0
        for line in stream.lines:
            print(safe(line))
        return 0
    job = await MagicCommitter(eng, args.dest).open_job(job_id)
    if args.action == "show":
        st = await job.status()
        out: dict[str, Any] = {
            "jobId": st.job_id,
            "active": st.active,
            "committedTasks": st.pendingsets,
        }
        if st.marker is not None:
            out.update(
                committer=st.marker.committer,
                conflict=st.marker.conflict,
                scope=st.marker.scope,
                created=_when(st.marker.created),
                hostname=st.marker.hostname,
            )
        if st.journal is not None:
            j = st.journal
            out["commit"] = {
                "state": j.state.value,
                "pendingsetsDone": j.watermark,
                "pendingsets": j.pendingsets_total,
                "uploads": j.uploads_total,
                "bytes": j.bytes_total,
                "processes": j.processes,
                "updated": _when(j.updated),
                "error": j.error,
            }
        n = 0
        async for _ in job_uploads(eng, job.dest, job.job_id):
            n += 1
        out["pendingUploads"] = n
        if stream is not None:
            out["stream"] = stream.show
        if getattr(args, "json", False):
            kind = "stream" if stream is not None else _kind_label(job)
            clijson.emit("jobs show", kind=kind, job=out)
            return 0
        print(safe_json(out))
        return 0
    if args.action == "resume":

        def tick(p: CommitProgress) -> None:
            print(
                f"{p.phase}: {p.uploads_done}/{p.uploads_total} uploads, "
                f"{p.pendingsets_done}/{p.pendingsets_total} pendingsets",
                file=sys.stderr,
            )

        with _progress(args, f"resume job {job_id}", None, "uploads") as bar:
            hooked = getattr(args, "progress_hook", None) is not None
            res = await job.resume(
                progress=(lambda p: bar.update(p.uploads_done, p.uploads_total)) if hooked else tick
            )
        if getattr(args, "json", False):
            clijson.emit(
                "jobs resume",
                jobId=res.job_id,
                kind=_kind_label(job),
                files=res.files,
                bytes=res.bytes,
                messages=[],
            )
            return 0
        print(f"job {res.job_id} committed: {res.files} files, {res.bytes} bytes")
        return 0
    recorded = False  # only its pending uploads left: nothing of it to roll back
    async for _ in eng.list_objects(dest.bucket, job.layout.root):
        recorded = True
        break
    with _progress(args, f"abort job {job_id}", 1, "jobs") as bar:
        res_abort = await job.abort()
        bar.advance(1)
    unrecorded = f"no records of it are left, {UNRECORDED}"
    if getattr(args, "json", False):
        clijson.emit(
            "jobs abort",
            jobId=res_abort.job_id,
            kind=_kind_label(job),
            rolledBack=recorded,
            uploadsAborted=res_abort.uploads_aborted,
            objectsDeleted=res_abort.objects_deleted,
            kept=[],
            messages=[] if recorded else [unrecorded],
        )
        return 0
    if not recorded:
        print(
            f"job {res_abort.job_id}: {unrecorded}; "
            f"{res_abort.uploads_aborted} pending uploads named as its aborted"
        )
        return 0
    print(
        f"job {res_abort.job_id} aborted: {res_abort.uploads_aborted} uploads aborted, "
        f"{res_abort.objects_deleted} objects deleted"
    )
    return 0


def _object_uri(commit: dict[str, Any]) -> str:
    return f"s3://{commit['bucket']}/{commit['destinationKey']}"


def _inspect_lines(info: dict[str, Any], uri: str) -> list[str]:
    """Human lines for an inspected record; every value from the record (keys, ids, names,
    metrics) goes through :func:`safe`, so one record line is one terminal line."""
    kind = info["kind"]
    lines = [f"{kind}: {safe(uri)}"]
    if kind == "pendingset":
        lines.append(
            f"  job {safe(info.get('jobId'))}  task {safe(info.get('taskId'))}  attempt "
            f"{safe(info.get('taskAttempt'))}  {info['count']} uploads, {info['bytes']} bytes"
        )
        for c in info["commits"]:
            lines.append(
                f"  {safe(_object_uri(c))}  {safe(c['length'])} bytes  {_part_count(c)} parts  "
                f"upload {safe(c['uploadId'])}"
            )
        if info["count"] > info["commitsShown"]:
            lines.append(f"  ... {info['count'] - info['commitsShown']} more")
    elif kind == "pending":
        lines.append(
            f"  {safe(_object_uri(info))}  {safe(info['length'])} bytes  {_part_count(info)} parts"
        )
        lines.append(
            f"  job {safe(info['jobId'])}  task {safe(info['taskId'])}  "
            f"upload {safe(info['uploadId'])}"
        )
    elif kind in ("job", "plan", "journal"):
        lines += [f"  {safe(k)}: {safe(v)}" for k, v in info.items() if k != "kind"]
    else:
        lines.append(
            f"  job {safe(info['jobId'])} ({safe(info['committer'])}) at "
            f"{safe(info['date'])} on {safe(info['hostname'])}"
        )
        lines += [f"  {safe(k)}: {safe(v)}" for k, v in info["metrics"].items()]
        lines += [f"  {safe(name)}" for name in info["filenames"]]
    lines += [f"  checked: {text}" for text in info.get("checked", [])]
    lines += [f"  not checked: {text}" for text in info.get("notChecked", [])]
    return lines


def _part_count(commit: dict[str, Any]) -> int:
    """Parts of a commit: ours lists them with sizes, S3A's only their ETags."""
    return len(commit.get("parts") or commit.get("etags") or [])


def with_checks(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` (a ``.pending`` or ``.pendingset``) plus what reading it could and could not
    check (``checked``, ``notChecked``): an S3A record has no part sizes, and a record alone
    says nothing of its uploads' state in the store."""
    kind = info["kind"]
    if kind not in ("pending", "pendingset"):
        return info
    checked = ["strict JSON, the version, every field's type and range"]
    unchecked: list[str] = []
    commits = info["commits"] if kind == "pendingset" else [info]
    checked.append("bucket, key and upload id of each upload, its ETags in part order")
    if kind == "pendingset":
        checked.append("every commit's record and job, no destination twice")
    sizeless = sum(1 for c in commits if "parts" not in c)
    if sizeless:
        of = f" ({sizeless} of the {len(commits)} shown)" if kind == "pendingset" else ""
        unchecked.append(
            f"{Unchecked.PART_SIZES.value}: S3A records carry no part sizes{of}; they "
            "complete from their ETags"
        )
    if len(commits) > sizeless:
        checked.append(Unchecked.PART_SIZES.value)
    unchecked.append(
        "whether each upload is still pending, completed or gone (the record alone; "
        "`zerorename jobs show` asks the store)"
    )
    return {**info, "checked": checked, "notChecked": unchecked}


def _is_store_uri(text: str) -> bool:
    return text.startswith(("s3://", "s3a://", "s3n://"))


def inspect_file(path: str, *, max_commits: int = 20) -> dict[str, Any]:
    """A local ``_SUCCESS``, ``.pending`` or ``.pendingset`` (zerorename's or S3A's, copied
    out of a store) read by the same parsers as one in the store, into the dict that
    :func:`maintenance.inspect_record` gives."""
    name = os.path.basename(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise RecordFormatError(f"cannot read it: {exc.strerror}", location=path) from None
    if name.endswith(PENDINGSET_SUFFIX):
        header, records = read_pendingset(data, path)
        return {
            "kind": "pendingset",
            "uri": path,
            **header.to_dict(),
            "count": len(records),
            "bytes": sum(r.upload.length for r in records),
            "commits": [r.to_dict() for r in records[:max_commits]],
            "commitsShown": min(len(records), max_commits),
        }
    if name.endswith(PENDING_SUFFIX):
        return {"kind": "pending", **PendingRecord.from_json(data, location=path).to_dict()}
    if name.endswith("_SUCCESS"):
        return {"kind": "success", **SuccessData.from_json(data, location=path).to_dict()}
    raise RecordFormatError("not a _SUCCESS, .pending or .pendingset file", location=path)


def _print_inspected(info: dict[str, Any], where: str, as_json: bool) -> None:
    info = with_checks(info)
    if as_json:
        print(safe_json(info))
    else:
        print("\n".join(_inspect_lines(info, where)))


async def _inspect(eng: UploadEngine, args: argparse.Namespace) -> int:
    info = await inspect_record(eng, args.uri, max_commits=args.max_commits)
    _print_inspected(info, args.uri, args.json)
    return 0


def _inspect_command(args: argparse.Namespace) -> int:
    """``inspect``: an s3:// record through an engine, a local file with no request."""
    if _is_store_uri(args.uri):
        return _runner(_inspect)(args)
    try:
        info = inspect_file(args.uri, max_commits=args.max_commits)
    except CommitterError as exc:
        print(f"zerorename: error: {safe(exc)}", file=sys.stderr)
        return 1
    _print_inspected(info, args.uri, args.json)
    return 0


#: what runs each command :func:`jobargs.add_subcommands` defines, by its name
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "uploads list": _runner(_uploads_list),
    "uploads abort": _runner(_uploads_abort),
    "jobs": _runner(_jobs_action),
    "inspect": _inspect_command,
}


def add_subcommands(
    sub: Any,
    *,
    stream_jobs: StreamJobs | None = None,
    stream_ids: StreamJobIds | None = None,
    progress: Progress | None = None,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> None:
    """Add ``uploads``, ``jobs`` and ``inspect`` to an argparse subparsers object, run by
    :data:`COMMANDS` (the hooks: see :func:`jobargs.add_subcommands`)."""
    jobargs.add_subcommands(
        sub,
        run=COMMANDS.__getitem__,
        stream_jobs=stream_jobs,
        stream_ids=stream_ids,
        progress=progress,
        options=options,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The committer commands alone, without the streaming hook (``jobs resume|abort`` of a
    stream batch's job would not go through the query's log): for tests. Users run
    ``zerorename`` (zerorename.cli), which registers the hook; this module has no
    ``python -m`` entry for that reason."""
    parser = argparse.ArgumentParser(prog="zerorename")
    add_subcommands(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code
