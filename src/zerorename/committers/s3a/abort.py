"""``jobs abort`` of a Hadoop S3A magic job, and the note that lets a second abort finish
what an interrupted one began.

An S3A key carries no job id, so an abort deletes no object: each object at a key the
job's committed tasks recorded is kept and named to the operator. Those names come from
the job's pendingsets, which the abort itself deletes. An abort that dies after deleting
them, and before it reported, would leave objects that no later command can name. So the
abort works in this order, and may die after any step:

1. read and check every record; refuse a committed job (nothing changed);
2. abort every pending upload the records name;
3. when it keeps objects, write its note (:attr:`S3AJobLayout.abort_note`, inside the
   job's directory, outside every attempt directory) naming each, with why it was kept;
4. delete the pendingsets whose every upload is complete, then the rest of the directory
   but the note: a directory cut short there names a missing upload, so it never looks
   committed;
5. tell the caller what it kept (``tell``: the CLI prints it), then delete the note.

An abort that finds a note reports what the note names together with what it finds, and
its rolled-back verdict is the note's when that one rolled the job back. A resume refuses
a job with a note: an abort has begun removing its records. A note that is not one this
module wrote for this job is refused, in one line, with nothing changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from zerorename.committers.codec.success import success_filename
from zerorename.committers.errors import CommitterError, JournalError, wrap_engine_errors
from zerorename.committers.objectstore import ABORT_NOTE_CAP, Store
from zerorename.committers.paths import Destination
from zerorename.committers.s3a.layout import S3AJobLayout, check_output_key
from zerorename.committers.s3a.read import (
    S3ACommit,
    S3AJobScan,
    UploadState,
    all_completed,
    drop_shared_dir_if_empty,
    open_scan,
    pending_index,
    read_commits,
    read_success,
    rolled_back,
    states_of,
)
from zerorename.committers.store import Check, is_ours, keys_under, read_optional
from zerorename.engine.results import ObjectInfo, multipart_etag

Report = Callable[[str], None]
#: the ``kind`` of an abort note
NOTE_KIND = "zerorename.s3a-abort"
NOTE_VERSION = 1
#: the longest ``why`` a note may carry (zerorename's are under 200 characters)
WHY_MAX = 1000


@dataclass(frozen=True)
class S3AAbortResult:
    """What ``abort`` did to an S3A job, and what it left and why."""

    job_id: str
    uploads_aborted: int
    records_deleted: int
    #: (object URI, why it was kept) for each object at a key the job's committed tasks
    #: recorded that is exactly what completing the upload made: the job's, or an
    #: identical one another job wrote (S3A keys carry no job id); never deleted
    maybe_completed: tuple[tuple[str, str], ...]
    #: (object URI, why) for each other object at such a key (another writer's)
    kept: tuple[tuple[str, str], ...]
    #: pending uploads under the destination that no record of this job names
    other_pending: int
    #: False: the job had committed tasks and none of their uploads was pending, so there
    #: was nothing to roll back (it may have committed and its output since been replaced
    #: or deleted, or its uploads were aborted): only its records were deleted
    rolled_back: bool = True


@dataclass(frozen=True)
class AbortNote:
    """What an abort keeps, noted in the job's directory before it deletes a record: keys
    (in the destination's bucket) to why each was kept."""

    job_id: str
    rolled_back: bool
    uploads_aborted: int
    maybe_completed: dict[str, str]
    kept: dict[str, str]

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "kind": NOTE_KIND,
                "version": NOTE_VERSION,
                "jobId": self.job_id,
                "rolledBack": self.rolled_back,
                "uploadsAborted": self.uploads_aborted,
                "maybeCompleted": [{"key": k, "why": w} for k, w in self.maybe_completed.items()],
                "kept": [{"key": k, "why": w} for k, w in self.kept.items()],
            },
            sort_keys=True,
        ).encode()

    def merged(self, other: AbortNote) -> AbortNote:
        """This note's entries and ``other``'s (this one's reason wins where both name a
        key; a key either calls maybe-completed is maybe-completed); the uploads both
        aborted (``other``: a later abort's, which aborts only what is still pending)."""
        maybe = {**other.maybe_completed, **self.maybe_completed}
        kept = {k: w for k, w in {**other.kept, **self.kept}.items() if k not in maybe}
        return AbortNote(
            self.job_id,
            self.rolled_back or other.rolled_back,
            self.uploads_aborted + other.uploads_aborted,
            maybe,
            kept,
        )


def parse_note(data: bytes, layout: S3AJobLayout) -> AbortNote:
    """The note at ``layout.abort_note``, checked (pure): this module's kind and version,
    this job's id, and keys inside the destination that are not records; anything else is
    a CommitterError that names the note and what to do."""

    def bad(why: str) -> CommitterError:
        return CommitterError(
            f"{layout.uri(layout.abort_note)} is not an abort note of S3A job "
            f"{layout.job_id} ({why}): refused, nothing changed; read it (JSON), and delete "
            "it by hand only once you know which objects it names"
        )

    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad(f"not JSON: {type(exc).__name__}") from None
    if not isinstance(doc, dict):
        raise bad("not a JSON object")
    if doc.get("kind") != NOTE_KIND or doc.get("version") != NOTE_VERSION:
        raise bad(f"kind {doc.get('kind')!r} version {doc.get('version')!r}")
    if doc.get("jobId") != layout.job_id:
        raise bad(f"it names job {doc.get('jobId')!r}")
    rolled, count = doc.get("rolledBack"), doc.get("uploadsAborted")
    if not isinstance(rolled, bool):
        raise bad("rolledBack is not true or false")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise bad("uploadsAborted is not a count")

    def entries(field: str) -> dict[str, str]:
        items = doc.get(field)
        if not isinstance(items, list):
            raise bad(f"{field} is not a list")
        out: dict[str, str] = {}
        for item in items:
            if not isinstance(item, dict) or set(item) != {"key", "why"}:
                raise bad(f"an entry of {field} is not {{key, why}}")
            key, why = item["key"], item["why"]
            if not isinstance(key, str) or not isinstance(why, str) or len(why) > WHY_MAX:
                raise bad(f"an entry of {field} is not a key and a reason")
            problem = check_output_key(layout.dest, layout.dest.bucket, key)
            if problem is not None:
                raise bad(problem)
            out[key] = why
        return out

    maybe, kept = entries("maybeCompleted"), entries("kept")
    if set(maybe) & set(kept):
        raise bad("a key is both maybe-completed and kept")
    return AbortNote(layout.job_id, rolled, count, maybe, kept)


async def read_note(store: Store, scan: S3AJobScan) -> AbortNote | None:
    """The job's abort note, checked; None when there is none."""
    if not scan.abort_note:
        return None
    lay = scan.layout
    data = await read_optional(store, lay.dest.bucket, lay.abort_note, max_size=ABORT_NOTE_CAP)
    return None if data is None else parse_note(data, lay)


def refuse_if_noted(scan: S3AJobScan, verb: str) -> None:
    """A command other than abort refuses a job whose abort began (nothing changed)."""
    if scan.abort_note:
        lay = scan.layout
        raise JournalError(
            f"S3A job {lay.job_id}: an abort began ({lay.uri(lay.abort_note)} is there), so "
            f"it cannot {verb}; run `zerorename jobs abort` again to finish rolling it back"
        )


def fail_batch(what: str, result: Any) -> None:
    if result.failed:
        first = result.failures[0]
        raise CommitterError(
            f"{what}: {result.failed} failed, e.g. s3://{first.bucket}/{first.key}: "
            f"{first.error}; the job's records are kept: run the command again"
        )


async def delete_job_directory(
    store: Store, layout: S3AJobLayout, keys: Sequence[str] | None = None, *, but: str = ""
) -> int:
    """Delete the job's directory (``root`` ends in '/': never a sibling job's) but the key
    ``but``: the ``keys`` a scan of it found (None: all it holds now), so a record written
    since (a new application attempt's) stays, and so does the job; a Hadoop 3.3 job's
    shared ``__magic/`` too, when nothing but its marker is left in it."""
    bucket = layout.dest.bucket
    doomed: Any = (
        keys_under(store, bucket, layout.root, lambda k: k != but)
        if keys is None
        else [k for k in keys if k != but and k.startswith(layout.root)]
    )
    deleted = await store.delete_objects(bucket, doomed)
    if layout.shared and not but:
        deleted += await drop_shared_dir_if_empty(store, layout.dest)
    return deleted


def _why_kept(c: S3ACommit, info: ObjectInfo, foreign: dict[str, str]) -> tuple[bool, str]:
    """Why the object at a committed record's key stays: (may it be the job's, why)."""
    u = c.record.upload
    name = success_filename(u.key)
    if name in foreign:
        return False, f"named by job {foreign[name]}'s _SUCCESS"
    if is_ours(u, info, Check.DELETE):
        return True, (
            "exactly what completing the job's upload made, or an identical object another "
            "job wrote there (S3A keys carry no job id)"
        )
    if multipart_etag(u) is None:
        return True, "the job's part ETags are not MD5s (an encrypted store?): it cannot be told"
    have = info.etag.strip('"')
    if info.size != u.length or "-" in have:
        return False, "its size or ETag differs from what this job uploaded: another writer's"
    return True, (
        "its ETag is not the multipart ETag of the job's upload (another writer's, or a store "
        "that names multipart objects otherwise): it cannot be told"
    )


def _complete_sets(
    scan: S3AJobScan, done: Sequence[S3ACommit], states: Sequence[UploadState]
) -> list[str]:
    """Keys of the committed tasks' pendingsets whose every upload is complete (pure)."""
    lay = scan.layout
    keys = {lay.uri(k): k for sets in scan.pendingsets.values() for k in sets}
    incomplete = {
        c.source for c, st in zip(done, states, strict=True) if st is not UploadState.COMPLETED
    }
    return sorted(keys[c.source] for c in done if c.source in keys and c.source not in incomplete)


def kept_lines(res: S3AAbortResult) -> list[str]:
    """What an abort tells the operator about the objects it kept (the CLI's lines)."""
    lines = []
    if res.maybe_completed:
        n = len(res.maybe_completed)
        shown = ", ".join(uri for uri, _ in res.maybe_completed[:10])
        more = f" and {n - 10} more" if n > 10 else ""
        lines += [
            f"kept {n} objects this job may have completed: {shown}{more}",
            "S3A keys carry no job id: an object identical to what the job's upload made may "
            "be a re-run's, so none is deleted; delete them yourself once you know they are "
            "this job's (see the README: What zerorename will and will not delete)",
        ]
    return lines + [f"kept {uri}: {why}" for uri, why in res.kept]


async def abort_s3a_job(
    store: Store,
    dest: Destination,
    job_id: str,
    *,
    concurrency: int | None = None,
    report: Report | None = None,
    tell: Callable[[S3AAbortResult], None] | None = None,
) -> S3AAbortResult:
    """Roll back an S3A job: abort every pending upload its records name, delete the
    job's directory. No object is deleted: an object at a key its committed tasks recorded
    is kept and reported (S3A keys carry no job id, so an identical object of a re-run
    cannot be told from the job's). Refused, with nothing changed, when the job committed:
    the destination's ``_SUCCESS`` names it, or every upload its committed tasks recorded
    is a completed object (``jobs resume`` finishes its cleanup). ``tell`` is given the
    result before the last record (the abort note) is deleted: an abort cut short after
    that has told what it kept, one cut short before it leaves the note to the next."""
    say = report or (lambda _: None)
    async with wrap_engine_errors(f"aborting S3A job {job_id} under {dest.uri}"):
        scan = await open_scan(store, dest, job_id)
        lay = scan.layout
        success = await read_success(store, dest)
        if success is not None and success.job_id == job_id:
            raise JournalError(
                f"S3A job {job_id} committed ({dest.uri}/_SUCCESS names it): abort would "
                "delete committed output; `zerorename jobs resume` finishes its cleanup"
            )
        noted = await read_note(store, scan)
        foreign = {n: success.job_id for n in success.filenames} if success is not None else {}
        attempts = sorted(
            set(scan.attempts) | {e.attempt for e in scan.pendings if e.attempt is not None}
        )
        commits = await read_commits(store, scan, attempts)
        index = await pending_index(store, dest)
        done = [c for c in commits if c.committed]
        states, infos = await states_of(store, done, index, Check.RESUME)
        if all_completed(states):
            raise JournalError(
                f"S3A job {job_id} committed (every upload its committed tasks recorded is a "
                "completed object; its cleanup did not finish): abort would delete committed "
                "output; `zerorename jobs resume` finishes its cleanup"
            )
        named = {(c.record.upload.key, c.record.upload.upload_id) for c in commits}
        pending = {
            (c.record.upload.key, c.record.upload.upload_id): c.record.upload
            for c in commits
            if (c.record.upload.key, c.record.upload.upload_id) in index
        }
        say(f"aborting {len(pending)} pending uploads")
        fail_batch(
            "aborting the job's uploads",
            await store.abort_many(list(pending.values()), concurrency=concurrency),
        )
        maybe: dict[str, str] = {}  # each key once (two attempts may name one)
        kept: dict[str, str] = {}
        for c, st, info in zip(done, states, infos, strict=True):
            if st is UploadState.PENDING or info is None:
                continue
            ours, why = _why_kept(c, info, foreign)
            (maybe if ours else kept)[c.record.upload.key] = why
        found = AbortNote(
            job_id,
            rolled_back(states, infos),
            len(pending),
            maybe,
            {k: w for k, w in kept.items() if k not in maybe},
        )
        note = found if noted is None else noted.merged(found)
        keeps = bool(note.maybe_completed or note.kept) or noted is not None
        if keeps and note != noted:
            await store.put_object(dest.bucket, lay.abort_note, note.to_json())
        # first the pendingsets whose every upload is complete, then the rest but the note:
        # an abort that dies in between leaves pendingsets naming a missing upload, never a
        # directory that looks committed (every recorded upload complete)
        whole = _complete_sets(scan, done, states)
        deleted = await store.delete_objects(dest.bucket, whole) if whole else 0
        gone = set(whole)
        rest = [k for k in scan.keys if k not in gone]
        deleted += await delete_job_directory(store, lay, rest, but=lay.abort_note if keeps else "")
        result = S3AAbortResult(
            job_id,
            note.uploads_aborted,
            deleted + keeps,
            tuple((dest.uri_of(k), w) for k, w in sorted(note.maybe_completed.items())),
            tuple((dest.uri_of(k), w) for k, w in sorted(note.kept.items())),
            len(index - named),
            note.rolled_back,
        )
        if tell is not None:
            tell(result)
        if keeps:
            await store.delete_objects(dest.bucket, [lay.abort_note])
            if lay.shared:
                await drop_shared_dir_if_empty(store, dest)
    return result
