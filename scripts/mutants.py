"""Single-line mutations of the committers' and the stream's decision modules: does the fast
suite kill each one?

    python scripts/mutants.py                 run every mutant, print the table
    python scripts/mutants.py --only window   mutants whose name contains 'window'
    python scripts/mutants.py --out docs/mutants.txt   also write the table there

Each mutant changes one line of a copy of ``src/`` (a comparison flipped, a condition dropped,
a branch's answer swapped) and runs the pure tests that cover that module against the copy.
A mutant is *killed* when those tests fail, *survived* when they pass, *stale* when its line
is no longer in the module (the list must follow the code). A survivor is a defect of the
suite unless EXPLAINED below says why the mutant behaves as the original does.
Exit status: 0 when every mutant is killed or explained, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = "src/zerorename"

WINDOW_TESTS = ("tests/unit/committers/commit/test_window.py",)
JOURNAL_TESTS = (
    "tests/unit/committers/commit/test_journal_table.py",
    "tests/unit/committers/commit/test_committers_journal.py",
)
CONFLICT_TESTS = (
    "tests/unit/committers/test_committers_conflict.py",
    "tests/unit/committers/test_protocol_memory.py",
)
OWNERSHIP_TESTS = (
    "tests/unit/committers/test_committers_ownership.py",
    "tests/unit/committers/test_committers_store.py",
    "tests/unit/engine/test_engine_records.py",
)
STREAMLOG_TESTS = ("tests/unit/spark_adapter/stream/test_streaming_log.py", "tests/unit/spark_adapter/stream/test_streaming_sink.py")
STREAMREAD_TESTS = ("tests/unit/spark_adapter/stream/test_streaming_read.py",)
S3A_TESTS = ("tests/unit/committers/s3a/test_s3a_layout.py",)


@dataclass(frozen=True)
class Mutant:
    name: str
    module: str  # relative to src/zerorename
    old: str  # one whole line's text, stripped; must occur exactly once
    new: str
    tests: tuple[str, ...]


MUTANTS: tuple[Mutant, ...] = (
    # the completion window: when to open, save and wait
    Mutant(
        "window-open-le",
        "committers/commit/window.py",
        "if self._next < self.persisted + self.window:",
        "if self._next <= self.persisted + self.window:",
        WINDOW_TESTS,
    ),
    Mutant(
        "window-stop-gt",
        "committers/commit/window.py",
        "if self._next >= self.total:",
        "if self._next > self.total:",
        WINDOW_TESTS,
    ),
    Mutant(
        "window-save-gt",
        "committers/commit/window.py",
        "if self.low - self.persisted >= max(1, self.window // 2):",
        "if self.low - self.persisted > max(1, self.window // 2):",
        WINDOW_TESTS,
    ),
    Mutant(
        "window-no-failure-stop",
        "committers/commit/window.py",
        "if self.failures:",
        "if False:",
        WINDOW_TESTS,
    ),
    Mutant(
        "window-must-check-le",
        "committers/commit/window.py",
        "return index < self.uncertain_until",
        "return index <= self.uncertain_until",
        WINDOW_TESTS,
    ),
    Mutant(
        "window-saved-any-mark",
        "committers/commit/window.py",
        "if not self.persisted <= mark <= self.low:",
        "if False:",
        WINDOW_TESTS,
    ),
    # the journal's table
    Mutant(
        "journal-started-abort-completes",
        "committers/commit/journal.py",
        "State.STARTED: {Event.SCANNED: State.COMPLETING, Event.ABORT: State.ROLLING_BACK},",
        "State.STARTED: {Event.SCANNED: State.COMPLETING, Event.ABORT: State.SUCCEEDED},",
        JOURNAL_TESTS,
    ),
    Mutant(
        "journal-replacing-abortable",
        "committers/commit/journal.py",
        "State.REPLACING: {Event.REPLACED: State.SUCCEEDED},",
        "State.REPLACING: {Event.REPLACED: State.SUCCEEDED, Event.ABORT: State.ROLLING_BACK},",
        JOURNAL_TESTS,
    ),
    Mutant(
        "journal-replace-skips-deletes",
        "committers/commit/journal.py",
        "return Event.COMPLETED_REPLACING if mode is ConflictMode.REPLACE else Event.COMPLETED",
        "return Event.COMPLETED",
        JOURNAL_TESTS,
    ),
    # conflicts and ownership
    Mutant(
        "conflict-fail-no-precheck",
        "committers/conflict.py",
        "return ConflictPlan(mode, scope, prefixes, (), True)",
        "return ConflictPlan(mode, scope, (), (), True)",
        CONFLICT_TESTS,
    ),
    Mutant(
        "conflict-fail-no-if-none-match",
        "committers/conflict.py",
        "return ConflictPlan(mode, scope, prefixes, (), True)",
        "return ConflictPlan(mode, scope, prefixes, (), False)",
        CONFLICT_TESTS,
    ),
    Mutant(
        "conflict-partitions-empty-allowed",
        "committers/conflict.py",
        "if any(not p for p in partitions):",
        "if False:",
        CONFLICT_TESTS,
    ),
    Mutant(
        "foreign-outside-dest",
        "committers/conflict.py",
        "if rel is None:",
        "if False:",
        CONFLICT_TESTS,
    ),
    Mutant(
        "foreign-own-job-foreign",
        "committers/conflict.py",
        "return not is_job_record(rel) and not key_carries_job(key, job_id)",
        "return not is_job_record(rel)",
        CONFLICT_TESTS,
    ),
    Mutant(
        "still-planned-any-etag",
        "committers/conflict.py",
        "return planned.get(key) == etag.strip('\"') and bool(etag)",
        "return key in planned",
        CONFLICT_TESTS,
    ),
    Mutant(
        "is-ours-any-size",
        "engine/records.py",
        "if info is None or info.size != upload.length:",
        "if info is None:",
        (*OWNERSHIP_TESTS, "tests/unit/committers/commit/test_settled_proof.py"),
    ),
    Mutant(
        "is-ours-any-etag",
        "engine/records.py",
        "return want is not None and info.etag.strip('\"') == want",
        "return want is not None",
        (*OWNERSHIP_TESTS, "tests/unit/committers/commit/test_settled_proof.py"),
    ),
    # the stream log's decisions
    Mutant(
        "streamlog-committed-eq",
        "spark_adapter/stream/log.py",
        "return self.last_batch is not None and batch <= self.last_batch",
        "return self.last_batch is not None and batch == self.last_batch",
        STREAMLOG_TESTS,
    ),
    Mutant(
        "streamlog-decide-other-intent-recovers",
        "spark_adapter/stream/log.py",
        "if p.batch != batch:",
        "if False:",
        STREAMLOG_TESTS,
    ),
    Mutant(
        "streamlog-recover-ignores-journal",
        "spark_adapter/stream/log.py",
        "return Recovery.RESUME if journal else Recovery.DISCARD",
        "return Recovery.RESUME",
        STREAMLOG_TESTS,
    ),
    Mutant(
        "streamsink-discard-without-reading-again",
        "spark_adapter/stream/sink.py",
        "if now.committed(intent.batch):",
        "if False:",
        # the shrunk schedule of simulation seed 1443 (streams) is its regression test
        ("tests/unit/sim/test_simulation.py", "tests/unit/spark_adapter/stream/test_streaming_sink.py"),
    ),
    Mutant(
        "streamsink-discard-before-log-stops-naming-it",
        "spark_adapter/stream/sink.py",
        "await self.write_log(bare)",
        "await self.discard(intent.job_id); await self.write_log(bare)",
        ("tests/unit/spark_adapter/stream/test_streaming_sink.py", "tests/unit/sim/test_simulation.py"),
    ),
    Mutant(
        "streamsink-recovery-reuses-prepared-run",
        "spark_adapter/stream/sink.py",
        "prepared=run if step is Step.COMMIT else None,",
        "prepared=run,",
        ("tests/unit/spark_adapter/stream/test_streaming_sink.py",),
    ),
    # a reader's snapshot
    Mutant(
        "streamread-log-went-back-ignored",
        "spark_adapter/stream/read.py",
        "if g2.batches < g1.batches or last1 > (-1 if g2.last_batch is None else g2.last_batch):",
        "if False:",
        STREAMREAD_TESTS,
    ),
    Mutant(
        "streamread-new-ge",
        "spark_adapter/stream/read.py",
        "new = [e for e in g2.recent if e.batch > last1]",
        "new = [e for e in g2.recent if e.batch >= last1]",
        STREAMREAD_TESTS,
    ),
    # S3A's layout
    Mutant(
        "s3a-job-dir-any-depth",
        "committers/s3a/layout.py",
        'if rel is None or not rel.endswith("/") or "/" in rel[:-1]:',
        'if rel is None or not rel.endswith("/"):',
        S3A_TESTS,
    ),
)

#: survivors that behave as the original does, and why
EXPLAINED: dict[str, str] = {
    "streamsink-discard-without-reading-again": (
        "covered twice: StreamSink.commit checks current.committed(batch_id) on the log _settle "
        "returns (the log read again), so a batch the operator's resume recorded meanwhile is "
        "still a duplicate, not written twice (test_streams_1443_... holds that); the early "
        "return only spares the discard of the resumed job, whose records are gone"
    ),
    "streamsink-discard-before-log-stops-naming-it": (
        "equivalent since recover() adopts only on proof (a journal: resume; none: discard): "
        "a crash between the discard and the log write leaves an intent naming a job with "
        "no records, which the next run discards again; test_a_recovery_that_dies_at_any_"
        "request_then_a_rerun crashes this recovery at every request, before and after, and "
        "finds batch 1 once, nothing pending, no record left"
    ),
    "s3a-job-dir-any-depth": (
        "equivalent: a deeper prefix leaves a '/' inside the id, which s3a_id_problem refuses "
        "on the next line, so job_id_of_dir still returns None"
    ),
}


def run_one(m: Mutant, timeout: float) -> tuple[str, str]:
    """(verdict, detail) of one mutant, on a copy of src/."""
    with tempfile.TemporaryDirectory(prefix="zr-mutant-") as tmp:
        shutil.copytree(ROOT / "src", Path(tmp) / "src")
        path = Path(tmp) / "src" / "zerorename" / m.module
        lines = path.read_text().splitlines(keepends=True)
        hits = [i for i, line in enumerate(lines) if line.strip() == m.old]
        if len(hits) != 1:
            return "stale", f"{len(hits)} lines of {m.module} read {m.old!r}"
        i = hits[0]
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        lines[i] = f"{indent}{m.new}\n"
        path.write_text("".join(lines))
        env = {**os.environ, "PYTHONPATH": str(Path(tmp) / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *m.tests]
        try:
            proc = subprocess.run(
                cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            return "killed", "timed out"
        tail = (proc.stdout.strip().splitlines() or [""])[-1]
        if proc.returncode == 0:
            return "survived", tail
        if proc.returncode == 1:
            return "killed", tail
        return "error", f"pytest exit {proc.returncode}: {tail or proc.stderr.strip()[-200:]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="run the mutants whose name contains this")
    ap.add_argument("--out", type=Path, help="also write the table to this file")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant [900]")
    args = ap.parse_args()
    rows: list[str] = []
    bad = 0
    for m in MUTANTS:
        if args.only not in m.name:
            continue
        verdict, detail = run_one(m, args.timeout)
        if verdict == "survived" and m.name in EXPLAINED:
            verdict, detail = "explained", EXPLAINED[m.name]
        bad += verdict not in ("killed", "explained")
        row = f"{verdict:9} {m.name:42} {m.module:30} {detail}"
        print(row, flush=True)
        rows.append(row)
    summary = f"{len(rows)} mutants: {len(rows) - bad} killed or explained, {bad} not"
    print(summary)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join([*rows, summary]) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
