"""The checker: DESIGN.md's invariants 1-11 applied to the end state of one schedule and
to what each actor was told. It is written from the invariants, not from the code: it
never imports the committers' decisions; it knows only the keys and bytes each job
wrote, what each actor heard, and the store's final objects and pending uploads.

Pure: ``check(objects, pending, history)`` returns the violations, one line each."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence

from zerorename.sim.model import DEST, SIBLING, History, JobTold, Outcome, Request

STREAM_PREFIX = "stream/"


def _last(job: JobTold) -> Outcome | None:
    """The job's settled outcome: committed once anyone was told it committed (an abort
    told later does not undo that: it must have refused), else the last thing it (or an
    operator for it) was told that says gone."""
    if job.said(Outcome.COMMITTED):
        return Outcome.COMMITTED
    for _, o, _ in reversed(job.told):
        if o in (Outcome.COMMITTED, Outcome.FAILED, Outcome.ABORTED):
            return o
    return None


def _present(job: JobTold, objects: Mapping[str, bytes]) -> tuple[list[str], list[str]]:
    """(keys holding exactly the job's bytes, keys that do not)."""
    have = [k for k, v in job.files.items() if objects.get(k) == v]
    miss = [k for k, v in job.files.items() if objects.get(k) != v]
    return have, miss


def _replaces(jobs: Sequence[JobTold], objects: Mapping[str, bytes]) -> list[JobTold]:
    """Replace jobs that count as committed: told so, or whole at the end and never told
    they failed."""
    out = []
    for j in jobs:
        if j.conflict != "replace":
            continue
        _, miss = _present(j, objects)
        last = _last(j)
        if last is Outcome.COMMITTED or (last is None and j.files and not miss):
            out.append(j)
    return out


def _covers(replace: JobTold, key: str) -> bool:
    """Whether ``replace`` may replace ``key``: the destination, or for a partitioned
    job only the partitions it wrote."""
    if not key.startswith(f"{DEST}/"):
        return False
    if replace.committer != "partitioned":
        return True
    parts = {k.rsplit("/", 1)[0] for k in replace.files}
    return key.rsplit("/", 1)[0] in parts


def _last_complete(job: JobTold, log: Sequence[Request]) -> int | None:
    """The step at which the last of the job's files was completed (None: one never was
    in the scheduled run; the final recovery completes after every listing)."""
    steps: dict[str, int] = {}
    for step, _, op, key in log:
        if op == "CompleteMultipartUpload" and key in job.files:
            steps[key] = step
    return max(steps.values()) if steps and len(steps) == len(job.files) else None


def _listings(replace: JobTold, log: Sequence[Request]) -> list[int]:
    """Steps at which the replace job's process listed the data of the destination."""
    return [
        s
        for s, actor, op, key in log
        if actor == replace.actor
        and op == "ListObjectsV2"
        and key.startswith(f"{DEST}/")
        and "__magic" not in key
    ]


def _explained(
    j: JobTold,
    key: str,
    replaces: Sequence[JobTold],
    log: Sequence[Request],
    miss: Sequence[str],
) -> bool:
    """Whether ``key`` of job ``j`` may be gone: a committed replace covering it listed the
    destination once every file of ``j`` was complete (so it is ordered after ``j``), and
    then every file of ``j`` it covers is gone (it replaced what it saw, not a part)."""
    done = _last_complete(j, log)
    if done is None:
        return False
    return any(
        r is not j
        and _covers(r, key)
        and any(s > done for s in _listings(r, log))
        and all(k in miss for k in j.files if _covers(r, k))
        for r in replaces
    )


def check_jobs(
    objects: Mapping[str, bytes], history: History, log: Sequence[Request] = ()
) -> list[str]:
    """Invariants 1, 2, 3, 6, 7, 11 for the batch jobs."""
    out: list[str] = []
    jobs = list(history.jobs.values())
    replaces = _replaces(jobs, objects)
    for j in jobs:
        have, miss = _present(j, objects)
        last = _last(j)
        name = f"job {j.job_id} (actor {j.actor}, {j.committer}/{j.conflict})"
        if j.said(Outcome.COMMITTED) and j.said(Outcome.ABORTED):
            out.append(
                f"inv 6/11 contradictory outcomes: {name} was told both committed and "
                f"aborted: no serial order of those commands allows that (told: {_story(j)})"
            )
        if last is not Outcome.COMMITTED:
            # invariant 7 (and 11) before 4: an abort keeps what it cannot prove the job's
            # (an S3A key carries no job id) and names each one to the operator; once
            # named (even by an abort that then died) they are the operator's to decide
            have = [k for k in have if k not in j.kept]
        if last in (Outcome.FAILED, Outcome.ABORTED):
            if have:
                out.append(
                    f"inv 2/4 visible after failure: {name} was told {last.value} but "
                    f"{len(have)} of its files are visible (told: {_story(j)})"
                )
            continue
        lost = [k for k in miss if not _explained(j, k, replaces, log, miss)]
        if not lost or (last is not Outcome.COMMITTED and not have):
            continue  # whole (or replaced after it), or never committed: absent
        if have:
            out.append(
                f"inv 6 whole-or-absent: {name} has {len(have)} of its {len(j.files)} files; "
                f"missing {sorted(lost)[:2]}, which no replace ordered after it removed "
                f"(told: {_story(j)})"
            )
        else:
            out.append(
                f"inv 1/6 committed output lost: {name} reported success but all "
                f"{len(lost)} of its files are gone, and no replace ordered after it "
                f"(told: {_story(j)})"
            )
    fails = [
        j
        for j in jobs
        if j.conflict == "fail" and _last(j) is Outcome.COMMITTED and not _present(j, objects)[1]
    ]
    for a_i, a in enumerate(fails):
        for b in fails[a_i + 1 :]:
            out.append(
                f"inv 6 fail-mode: jobs {a.job_id} (actor {a.actor}) and {b.job_id} (actor "
                f"{b.actor}) both committed with conflict=fail and both outputs are there: "
                "no serial order allows that"
            )
    return out


def _story(j: JobTold) -> str:
    return "; ".join(f"@{s} {o.value}{' ' + d[:80] if d else ''}" for s, o, d in j.told)


def check_foreign(
    objects: Mapping[str, bytes], history: History, log: Sequence[Request] = ()
) -> list[str]:
    """Invariant 7: what another writer put is deleted only by a replace that listed the
    destination after it (never in a sibling prefix)."""
    out: list[str] = []
    replaces = _replaces(list(history.jobs.values()), objects)
    for key, (data, sent, answered) in history.foreign.items():
        if answered is None or objects.get(key) == data:
            continue
        if key.startswith(f"{SIBLING}/") or not any(
            _covers(r, key) and any(s > sent for s in _listings(r, log)) for r in replaces
        ):
            out.append(f"inv 7 foreign object lost: {key} (PUT at step {sent}) is gone or changed")
    return out


def check_streams(objects: Mapping[str, bytes], history: History) -> list[str]:
    """The stream log agrees with the destination: every batch the query finished (and
    the log records) is there exactly once, no batch lost."""
    out: list[str] = []
    counts = Counter(v for k, v in objects.items() if k.startswith(STREAM_PREFIX))
    for q in history.streams.values():
        key = f"{STREAM_PREFIX}_zerorename_streams/{q.query_id}/log.json"
        log: dict[str, object] = {}
        if key in objects:
            try:
                log = dict(json.loads(objects[key]))
            except ValueError:
                out.append(f"stream log unreadable: query {q.query_id}'s log is not JSON")
        last = log.get("last_batch")
        logged = last if isinstance(last, int) else -1
        if q.done and logged != q.done - 1:
            out.append(
                f"stream log disagrees: query {q.query_id} finished {q.done} batches but its "
                f"log's last batch is {last}"
            )
        for b, datas in sorted(q.batches.items()):
            if b > max(logged, q.done - 1):
                continue
            for t, data in enumerate(datas):
                if counts[data] != 1:
                    what = "lost" if counts[data] == 0 else "duplicated"
                    out.append(
                        f"stream batch {what}: query {q.query_id} (actor {q.actor}) batch {b} "
                        f"task {t} is in the destination {counts[data]} times, want 1 (the log "
                        "records the batch; "
                        f"outcomes: {_runs(q.outcomes, b)})"
                    )
    return out


def _runs(outcomes: Sequence[tuple[int, int, str]], batch: int) -> str:
    return "; ".join(f"@{s} {a[:90]}" for s, b, a in outcomes if b == batch)


def check_leftovers(
    objects: Mapping[str, bytes], pending: Sequence[tuple[str, str]], history: History
) -> list[str]:
    """Invariant 4 after the final cleanup: no pending upload and no record of any job;
    the foreign writer's pending upload is aborted only by a prefix or age rule."""
    out: list[str] = []
    ids = list(history.jobs)
    s3a = [j for j, t in history.jobs.items() if t.committer == "s3a"]
    for key, upload_id in pending:
        if upload_id in history.foreign_uploads:
            continue
        if any(j in key for j in s3a):
            continue  # S3A keys prove no owner: abort reports such uploads, never guesses
        out.append(f"inv 4 left pending after cleanup: {key} (upload {upload_id})")
    for key in objects:
        if "__magic" in key and any(j in key for j in ids):
            out.append(f"inv 4 job record left after cleanup: {key}")
    live = {u for _, u in pending}
    if not history.prefix_aborts:
        for u in sorted(history.foreign_uploads - live):
            out.append(f"inv 7 a foreign pending upload was aborted: {u}")
    return out


def check(
    objects: Mapping[str, bytes], pending: Sequence[tuple[str, str]], history: History
) -> list[str]:
    """Every violation of the end state, one line each."""
    return (
        check_jobs(objects, history, history.requests)
        + check_foreign(objects, history, history.requests)
        + check_streams(objects, history)
        + check_leftovers(objects, pending, history)
    )
