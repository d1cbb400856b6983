"""The checker: DESIGN.md's invariants 1-11 applied to the end state of one schedule and
to what each actor was told. It is written from the invariants, not from the code: it
never imports the committers' decisions; it knows only the keys and bytes each job
wrote, what each actor heard, and the store's final objects and pending uploads.

Pure: ``check(objects, pending, history)`` returns the violations, one line each."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence

from zerorename.testing.sim.model import DEST, SIBLING, History, JobTold, Outcome

STREAM_PREFIX = "stream/"


def _last(job: JobTold) -> Outcome | None:
    """The job's settled outcome: the last thing it (or an operator for it) was told
    that says committed or gone."""
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
        have, miss = _present(j, objects)
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


def _committed_end(job: JobTold) -> int:
    for step, o, _ in reversed(job.told):
        if o is Outcome.COMMITTED:
            return step
    return job.commit_end or 0


def check_jobs(objects: Mapping[str, bytes], history: History) -> list[str]:
    """Invariants 1, 2, 3, 6, 7, 11 for the batch jobs."""
    out: list[str] = []
    jobs = list(history.jobs.values())
    replaces = _replaces(jobs, objects)
    for j in jobs:
        have, miss = _present(j, objects)
        last = _last(j)
        name = f"job {j.job_id} (actor {j.actor}, {j.committer}/{j.conflict})"
        if have and miss:
            out.append(
                f"inv 6 whole-or-absent: {name} has {len(have)} of its {len(j.files)} files; "
                f"missing {sorted(miss)[:2]} (told: {_story(j)})"
            )
            continue
        if last is Outcome.COMMITTED and miss:
            end = _committed_end(j)
            later = [r for r in replaces if r is not j and (r.commit_end or 0) >= end
                     and all(_covers(r, k) for k in miss)]
            if not later:
                out.append(
                    f"inv 1/6 committed output lost: {name} reported success at step {end} "
                    f"but {len(miss)} of its files are gone, and no replace ordered after it "
                    f"(told: {_story(j)})"
                )
        if last in (Outcome.FAILED, Outcome.ABORTED) and have:
            out.append(
                f"inv 2/4 visible after failure: {name} was told {last.value} but "
                f"{len(have)} of its files are visible (told: {_story(j)})"
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


def check_foreign(objects: Mapping[str, bytes], history: History) -> list[str]:
    """Invariant 7: what another writer put is deleted only by a replace that may be
    ordered after it (never in a sibling prefix)."""
    out: list[str] = []
    replaces = _replaces(list(history.jobs.values()), objects)
    for key, (data, sent, answered) in history.foreign.items():
        if answered is None or objects.get(key) == data:
            continue
        if key.startswith(f"{SIBLING}/") or not any(
            _covers(r, key) and (r.commit_end or 0) >= sent for r in replaces
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
                out.append(f"stream {q.query_id}: its log is not JSON")
        last = log.get("last_batch")
        logged = last if isinstance(last, int) else -1
        if q.done and logged != q.done - 1:
            out.append(
                f"stream {q.query_id}: the query finished {q.done} batches but its log's "
                f"last batch is {last}"
            )
        for b, datas in sorted(q.batches.items()):
            if b > max(logged, q.done - 1):
                continue
            for t, data in enumerate(datas):
                if counts[data] != 1:
                    out.append(
                        f"stream {q.query_id} (actor {q.actor}): batch {b} task {t} is in the "
                        f"destination {counts[data]} times, want 1 (the log records the batch; "
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
    for key, upload_id in pending:
        if upload_id in history.foreign_uploads:
            continue
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
        check_jobs(objects, history)
        + check_foreign(objects, history)
        + check_streams(objects, history)
        + check_leftovers(objects, pending, history)
    )
