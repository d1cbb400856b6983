"""The deterministic simulation (:mod:`zerorename.sim`): a seed names actors
(batch jobs of every committer and conflict mode, S3A jobs, stream queries, operator
commands, a lifecycle rule, foreign writers), their interleaving at request granularity
and their faults; the checker holds the end state to DESIGN.md's invariants.

CI runs a fixed count of seeds (deterministic; ``ZERORENAME_SIM_SEEDS`` raises it) with
the known findings of issue 20 left out; the seeds that found those findings are kept
below as xfail(strict) regression tests, to flip when their fixes merge. Replay any seed
with ``python -m zerorename.sim --seed N --trace`` (``--shrink`` to shorten it)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import replace

import anyio
import pytest

from zerorename.committers import CommitOptions
from zerorename.sim.checker import check
from zerorename.sim.clock import VirtualLoop
from zerorename.sim.generate import generate
from zerorename.sim.model import (
    ActorSpec,
    FaultKind,
    FaultSpec,
    History,
    JobTold,
    Kind,
    Outcome,
    Schedule,
    StreamTold,
)
from zerorename.sim.run import run_schedule
from zerorename.sim.scheduler import Hung, Scheduler
from zerorename.sim.shrink import category, shrink

#: findings of issue 20 still open on this branch, and the simulation's own (10: two
#: operator commands on one job at once; 11: a replace after a committed job whose cleanup
#: did not finish; 12: a failed upload abort inside `jobs abort`), left out of the clean run
AVOID: frozenset[int] = frozenset()
SEEDS = int(os.environ.get("ZERORENAME_SIM_SEEDS", "250"))


def test_seeded_schedules_keep_every_invariant() -> None:
    bad = []
    for seed in range(SEEDS):
        r = run_schedule(generate(seed, avoid=AVOID))
        if not r.ok:
            bad.append(f"seed {seed}: {r.violations[0]}")
    assert bad == [], "replay: python -m zerorename.sim --seed N"


def test_a_seed_replays_the_same_schedule() -> None:
    a = run_schedule(generate(7))
    b = run_schedule(generate(7))
    assert a.trace == b.trace and a.violations == b.violations and len(a.trace) > 20
    again = run_schedule(replace(a.schedule, picks=a.picks))  # the recorded interleaving
    assert again.trace == a.trace


def test_generation_is_pure_and_avoid_leaves_the_known_combinations_out() -> None:
    assert generate(3) == generate(3)
    every_known = frozenset({1, 2, 4, 5, 10, 11, 12})
    for seed in range(200):
        s = generate(seed, avoid=every_known)
        assert all(a.kind is not Kind.S3A for a in s.actors)
        assert all(a.conflict != "replace" for a in s.actors if a.kind is Kind.JOB)
        assert sum(a.kind is Kind.JOB and a.conflict == "fail" for a in s.actors) <= 1


# -- the checker, on hand-made histories (pure: no store, no loop) ----------------------
def told(job: str, actor: int, conflict: str, *outcomes: Outcome, n: int = 2) -> JobTold:
    files = {f"out/p={t}/part-{t}-{job}.csv": f"{job} {t}".encode() for t in range(n)}
    j = JobTold(job, actor, "magic", conflict, files)
    j.told = [(10 + i, o, "") for i, o in enumerate(outcomes)]
    return j


def history(*jobs: JobTold) -> History:
    h = History()
    h.jobs = {j.job_id: j for j in jobs}
    return h


def test_checker_flags_a_committed_job_that_lost_files() -> None:
    a = told("a", 0, "append", Outcome.COMMITTED)
    whole = dict(a.files)
    assert check(whole, [], history(a)) == []
    part = dict(list(whole.items())[:1])
    assert [category(v) for v in check(part, [], history(a))] == ["inv 6 whole-or-absent"]
    assert [category(v) for v in check({}, [], history(a))] == ["inv 1/6 committed output lost"]


def test_checker_flags_a_job_told_both_committed_and_aborted() -> None:
    a = told("a", 0, "append", Outcome.CRASHED, Outcome.COMMITTED, Outcome.ABORTED)
    assert [category(v) for v in check(a.files, [], history(a))] == [
        "inv 6/11 contradictory outcomes"
    ]


def test_checker_flags_output_of_an_aborted_job_and_leftovers() -> None:
    a = told("a", 0, "append", Outcome.CRASHED, Outcome.ABORTED)
    assert check({}, [], history(a)) == []
    assert category(check(a.files, [], history(a))[0]) == "inv 2/4 visible after failure"


def test_checker_named_kept_objects_count_also_when_the_abort_then_died() -> None:
    # s3a-late 4607: the abort printed its kept lines, then died deleting its note; the
    # final abort found no job (refused): the named object is the operator's, the
    # unnamed half of the job would be inv 6
    a = told("a", 0, "append", Outcome.CRASHED, Outcome.REFUSED)
    first = next(iter(a.files))
    assert category(check({first: a.files[first]}, [], history(a))[0]) == "inv 6 whole-or-absent"
    a.kept = {first}
    assert check({first: a.files[first]}, [], history(a)) == []
    left = check({"out/__magic_job-a/job.json": b"{}"}, [("out/p=0/x-a.csv", "u1")], history(a))
    assert sorted(map(category, left)) == [
        "inv 4 job record left after cleanup",
        "inv 4 left pending after cleanup",
    ]


def test_checker_two_fail_mode_jobs_cannot_both_commit() -> None:
    a = told("a", 0, "fail", Outcome.COMMITTED)
    b = told("b", 1, "fail", Outcome.COMMITTED)
    both = {**a.files, **b.files}
    assert [category(v) for v in check(both, [], history(a, b))] == ["inv 6 fail-mode"]
    b.told = [(12, Outcome.FAILED, "conflict")]
    assert check(a.files, [], history(a, b)) == []


def test_checker_a_replace_may_remove_only_what_it_listed_after_it_completed() -> None:
    a = told("a", 0, "append", Outcome.COMMITTED)
    r = told("r", 1, "replace", Outcome.COMMITTED)
    h = history(a, r)
    completes = [(5 + i, 0, "CompleteMultipartUpload", k) for i, k in enumerate(a.files)]
    h.requests = [*completes, (9, 1, "ListObjectsV2", "out/")]
    assert check(r.files, [], h) == []  # r listed after a's last complete: a, then r
    h.requests = [completes[0], (6, 1, "ListObjectsV2", "out/"), completes[1]]
    assert category(check(r.files, [], h)[0]) == "inv 1/6 committed output lost"
    first = next(iter(a.files))
    assert category(check({**r.files, first: a.files[first]}, [], h)[0]) == (
        "inv 6 whole-or-absent"
    )


def test_checker_foreign_objects_and_streams() -> None:
    h = History()
    h.foreign = {"out10/f": (b"f", 1, 2), "out/f": (b"g", 1, 2)}
    assert check({"out10/f": b"f", "out/f": b"g"}, [], h) == []
    assert [category(v) for v in check({"out/f": b"g"}, [], h)] == ["inv 7 foreign object lost"]
    q = StreamTold("q", 0, {0: [b"q batch 0 task 0\n"]}, done=1)
    h = History()
    h.streams = {"q": q}
    log = b'{"last_batch": 0}'
    key = "stream/_zerorename_streams/q/log.json"
    assert check({key: log, "stream/a.csv": b"q batch 0 task 0\n"}, [], h) == []
    assert category(check({key: log}, [], h)[0]) == "stream batch lost"
    twice = {key: log, "stream/a": b"q batch 0 task 0\n", "stream/b": b"q batch 0 task 0\n"}
    assert category(check(twice, [], h)[0]) == "stream batch duplicated"


def test_shrink_drops_what_the_failure_does_not_need() -> None:
    jobs = [ActorSpec(Kind.JOB, tasks=3, delay=5) for _ in range(5)]
    actors = (*jobs, ActorSpec(Kind.ABORT))
    start = Schedule(1, actors, (FaultSpec(0, 3, FaultKind.LOST),), picks=(0, 1, 2, 3, 4, 5))

    def fails(s: Schedule) -> bool:  # "fails" while an abort and two jobs remain
        return sum(a.kind is Kind.JOB for a in s.actors) >= 2 and any(
            a.kind is Kind.ABORT for a in s.actors
        )

    small, _ = shrink(start, fails)
    assert [a.kind for a in small.actors].count(Kind.JOB) == 2 and len(small.actors) == 3
    assert small.faults == () and small.picks == () and all(a.tasks == 1 for a in small.actors)


# -- the seeds that found issue 20's findings ------------------------------------------
# Findings 1, 2, 4, 5 and the simulation's 10, 11, 12: each schedule failed before its
# fix (xfail strict until the fix merged) and passes since. Replay: python -m
# zerorename.sim [--profile P] --seed N --trace (--shrink for the short form).
def categories(seed: int, profile: str = "default") -> set[str]:
    return {category(v) for v in run_schedule(generate(seed, profile=profile)).violations}


def test_finding_1_stream_batch_aborted_by_jobs_abort_then_adopted() -> None:
    assert "stream batch lost" not in categories(119, "streams")


def test_finding_2_jobs_abort_deletes_a_committed_s3a_job() -> None:
    # S3A job 0 writes its _SUCCESS and dies in its cleanup (its 7th request: listing its
    # directory); append job 1 commits and writes its own _SUCCESS; then `jobs abort` of 0
    s3a = Schedule(
        1,
        (
            ActorSpec(Kind.S3A, tasks=1),
            ActorSpec(Kind.JOB, conflict="append", tasks=1),
            ActorSpec(Kind.ABORT),
        ),
        (FaultSpec(0, 7, FaultKind.CRASH_BEFORE),),
        picks=(0,) * 12 + (1,) * 60,
    )
    violations = run_schedule(s3a).violations
    assert not any(category(v) == "inv 1/6 committed output lost" for v in violations)


def test_finding_4_replace_deletes_part_of_a_concurrent_append() -> None:
    assert "inv 6 whole-or-absent" not in categories(144)


def test_finding_5_two_fail_mode_commits_both_succeed() -> None:
    assert "inv 6 fail-mode" not in categories(191)


def test_new_10_concurrent_resume_and_abort_of_one_job_both_succeed() -> None:
    assert "inv 6/11 contradictory outcomes" not in categories(26, "s3a")


def test_new_11_a_replaced_job_with_an_unfinished_commit_can_never_be_cleaned_up() -> None:
    assert "inv 4 job record left after cleanup" not in categories(103, "jobs")


def test_new_12_a_failed_upload_abort_leaves_an_upload_no_command_can_reach() -> None:
    assert "inv 4 left pending after cleanup" not in categories(472)


# -- the s3a-late profile's seeds (shrunk) ----------------------------------------------
def test_s3a_late_51_abort_of_a_committed_then_replaced_s3a_job_is_no_rollback() -> None:
    # S3A job 0 commits (_SUCCESS) and dies in its cleanup; replace job 1 replaces its
    # output; the final `jobs abort` of 0 found nothing to roll back: it must not say
    # "aborted" of a job that committed
    s = Schedule(
        51,
        (ActorSpec(Kind.S3A, tasks=2), ActorSpec(Kind.JOB, conflict="replace", tasks=1)),
        (FaultSpec(0, 11, FaultKind.CRASH_BEFORE),),
        picks=(),
        profile="s3a-late",
    )
    assert run_schedule(s).violations == []


def test_s3a_late_56_an_abort_that_died_never_keeps_a_committed_job_from_its_cleanup() -> None:
    # S3A job 1 commits (_SUCCESS) and its cleanup is throttled out; the operator's
    # `jobs abort` of it dies holding the job's command claim; the final resume must still
    # finish its cleanup (an abort of a committed job changes nothing, so a resume that
    # only finishes a committed job's cleanup needs no protection from one)
    s = Schedule(
        56,
        (ActorSpec(Kind.ABORT), ActorSpec(Kind.S3A, tasks=1)),
        (FaultSpec(0, 4, FaultKind.CRASH_BEFORE), FaultSpec(1, 7, FaultKind.THROTTLED)),
        picks=(1,) * 8,
        profile="s3a-late",
    )
    assert run_schedule(s).violations == []


# -- the default profile's seeds 0..999 (shrunk) ----------------------------------------
def _picks(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(","))


def test_default_250_540_a_replace_never_lists_part_of_a_committing_s3a_job() -> None:
    # Hadoop's S3A commits take no lock: a replace that listed an S3A job half completed
    # deleted that half; it now refuses while an S3A job's directory is there
    s3a_first = Schedule(
        250,
        (ActorSpec(Kind.JOB, conflict="replace", tasks=3), ActorSpec(Kind.S3A, tasks=3)),
        (),
        picks=(0,) * 21 + _picks("1,1,1,0,0,1,0,0,1,1,0,0,0,1,0,0,1,1,1,1,0,1"),
    )
    staging = Schedule(
        540,
        (ActorSpec(Kind.S3A, tasks=3), ActorSpec(Kind.JOB, "staging", "replace", tasks=2)),
        (),
        picks=_picks("1,1,0,1,1,0,1,0,1,0,1,1,0,0,0,0,0,1,0,1,1,1,1,1,1,0,1,0,1,1,1,1,0,1"),
    )
    for s in (s3a_first, staging):
        assert run_schedule(s).violations == []


def test_default_385_713_an_abort_that_finds_only_uploads_rolls_nothing_back() -> None:
    # an S3A job resumed (committed) leaves the upload of a task that never committed;
    # `jobs abort` of its id then finds no records, only that upload: it must not say the
    # job was aborted
    crashed_task = Schedule(
        385,
        (ActorSpec(Kind.RESUME), ActorSpec(Kind.S3A, tasks=3)),
        (FaultSpec(1, 7, FaultKind.CRASH_BEFORE),),
        picks=(0,) * 17 + _picks("1,1,0,0,0,1,0,0,1,0,0,0,1,1,0,1,0,0,0,1"),
    )
    lost_record = Schedule(
        713,
        (ActorSpec(Kind.S3A, tasks=2), ActorSpec(Kind.RESUME)),
        (FaultSpec(0, 5, FaultKind.CRASH_AFTER),),
        picks=(),
    )
    for s in (crashed_task, lost_record):
        assert run_schedule(s).violations == []


def test_default_1057_spark_aborts_a_batch_whose_commit_the_lock_refused() -> None:
    # the lifecycle rule aborts query 1's upload, so its batch's commit fails with
    # NoSuchUpload and its job keeps the destination's lock (left for resume/abort);
    # every run of query 0 then writes its intent with its journal, is refused by the
    # lock (which deletes the journal, not the intent), and Spark aborts the batch. The
    # abort saw its job named by the log's intent and kept it: the last run's uploads were
    # left pending. An intent whose job has no journal proves nothing (stream.log.recover):
    # the abort now drops it from the log and aborts the job.
    s = Schedule(
        1057,
        (
            ActorSpec(Kind.STREAM, tasks=3, batches=1),
            ActorSpec(Kind.STREAM, tasks=1, batches=1),
            ActorSpec(Kind.LIFECYCLE),
            ActorSpec(Kind.JOB, conflict="replace", tasks=3),
            ActorSpec(Kind.JOB, conflict="replace", tasks=2),
        ),
        (),
        picks=_picks(
            "3,3,1,1,3,1,1,1,1,1,3,1,0,0,0,0,1,0,0,0,1,3,0,3,3,3,3,4,4,1,0,3,3,3,0,4,1,1,0,4,"
            "4,4,0,3,3,3,4,0,4,0,4,4,1,1,4,4,0,2,1,0,4,0,1,2,0,4,2,0,1,1,0,1,0,0,0,0,1,0,1,4,"
            "0,0,1"
        ),
    )
    assert run_schedule(s).violations == []


# -- the streams profile's seeds 0..999 (shrunk) ----------------------------------------
def test_streams_695_the_operator_runs_the_zerorename_command_with_its_stream_hook() -> None:
    # a batch's driver dies holding the lock with the batch's intent in the log; the
    # operator's `jobs resume` of that job must finish it as `zerorename` does (recording
    # the batch in the query's log), so the restarted query does not write it again. The
    # simulation ran the committers' parser without the hook `zerorename` registers.
    s = Schedule(
        695,
        (ActorSpec(Kind.RESUME), ActorSpec(Kind.STREAM, tasks=1, batches=1)),
        (FaultSpec(1, 22, FaultKind.CRASH_AFTER),),
        picks=_picks("1,1,1,1,1,1,1,1,1,1,1,0,0,1,0,1,1,1,1,1,1,1,0,1,0,1,1,0,1"),
        profile="streams",
    )
    assert run_schedule(s).violations == []


def test_streams_1443_a_restarted_query_sees_a_batch_the_operator_resumed_meanwhile() -> None:
    # a batch's driver dies after its complete (intent and journal stored); the restarted
    # query reads the log (the intent) while the operator's `jobs resume` of that job
    # records the batch and deletes its journal; the query's commit then found no journal,
    # took the intent for a dead commit, wrote its stale log back (dropping the resume's
    # record) and wrote the batch a second time. It must read the log again first.
    s = Schedule(
        1443,
        (ActorSpec(Kind.RESUME), ActorSpec(Kind.STREAM, tasks=1, batches=1)),
        (FaultSpec(1, 23, FaultKind.CRASH_AFTER),),
        picks=_picks(
            "1,1,1,1,1,1,0,0,0,1,1,0,1,1,0,0,0,0,1,1,1,0,1,1,0,0,0,1,1,0,1,0,0,0,0,0,1,1,1,0,"
            "0,0,1,0,1,1,0,1,0,0,0,1,1,1,0,1,0,1,0,0,0,1,1,1,0,0,1,1,0,1,0,1,1"
        ),
        profile="streams",
    )
    assert run_schedule(s).violations == []


# -- the s3a profile's seeds 0..999 (shrunk) --------------------------------------------
def test_s3a_87_an_abort_keeps_and_names_what_an_s3a_job_may_have_completed() -> None:
    # the S3A job's first complete took effect but its answer was lost; `jobs abort` then
    # aborts the other uploads and keeps that object (S3A keys carry no job id: it may be
    # an identical re-run's), naming it to the operator. The checker held the object
    # against invariant 4; invariants 7 and 11 (and finding 3) say keep it and report it.
    s = Schedule(
        87,
        (ActorSpec(Kind.ABORT), ActorSpec(Kind.S3A, tasks=3)),
        (FaultSpec(1, 11, FaultKind.LOST),),
        picks=_picks("1,1,0,0,1,1,1,0,1,0,0,0,1,0,0,1,1,1,1,1"),
        profile="s3a",
    )
    assert run_schedule(s).violations == []


def test_s3a_1309_an_abort_run_again_finishes_the_rollback_an_earlier_one_began() -> None:
    # the S3A job dies after its first complete; `jobs abort` aborts the other two uploads
    # but one answer is lost, so it refuses ("run the command again"); the final abort
    # then found one upload completed and two gone, none pending, and said "nothing was
    # rolled back (it may have committed)" of a job whose commit never finished (resume
    # had just said abort rolls it back): it must say the job was rolled back
    s = Schedule(
        1309,
        (ActorSpec(Kind.S3A, tasks=3), ActorSpec(Kind.ABORT)),
        (FaultSpec(0, 11, FaultKind.CRASH_AFTER), FaultSpec(1, 10, FaultKind.LOST)),
        picks=(),
        profile="s3a",
    )
    assert run_schedule(s).violations == []


def test_checker_an_abort_may_keep_only_what_it_named() -> None:
    a = told("a", 0, "append", Outcome.CRASHED, Outcome.ABORTED)
    first = next(iter(a.files))
    a.kept = {first}
    assert check({first: a.files[first]}, [], history(a)) == []
    assert category(check(a.files, [], history(a))[0]) == "inv 2/4 visible after failure"


def test_a_run_of_seeds_ends_in_one_summary_line(capsys: pytest.CaptureFixture[str]) -> None:
    from zerorename.sim.__main__ import main

    assert main(["--seeds", "3..3", "--profile", "s3a"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("1 of 1 schedules ran with zero violations (profile s3a, seeds 3..3")
    assert "ms CPU per schedule" in last


# -- schedules that never ended ---------------------------------------------------------
def test_a_schedule_past_its_cpu_limit_is_a_hang_violation_not_a_stuck_run() -> None:
    # limit 0 s of CPU: the scheduler stops the run at its first pass; the run returns,
    # reporting the hang and where each task waited
    r = run_schedule(generate(7), limit=0.0)
    assert [category(v) for v in r.violations[:1]] == ["hang"]
    assert "of CPU" in r.violations[0]
    assert any(n.startswith("hang: task ") and "sim/" in n for n in r.notes)


@pytest.mark.parametrize("seed", [6532, 15065])
def test_hang_final_resume_of_a_job_waited_for_a_dead_jobs_lock(seed: int) -> None:
    # 6532: job 0 dies after its _SUCCESS, before its journal's `succeeded` (it keeps the
    # destination's lock); 15065: a job dies holding the lock before its journal. The final
    # recovery resumed an earlier dead job first, whose resume waited out the CLI's
    # lock_wait (900 s; on the wall clock it never ended) for that lock before the lock's
    # holder was resumed; the operator resumes the holder first, as the refusal tells, so
    # no command waits at all (the schedule's clock stays below the lock_wait)
    r = run_schedule(generate(seed))
    assert r.violations == []
    assert r.clock < CommitOptions().lock_wait, f"a command waited {r.clock:g} s"


def virtual(main: Callable[[Scheduler], Awaitable[None]], live: int = 1) -> Scheduler:
    """Run ``main(scheduler)`` beside the scheduler's driver on a virtual clock."""
    sched = Scheduler(0, (), None)
    sched.live = live

    async def run() -> None:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(main, sched)
                await sched.drive()
        except* Hung:
            pass

    with asyncio.Runner(loop_factory=VirtualLoop) as runner:
        runner.run(run())
    return sched


def test_a_wait_takes_the_schedules_clock_not_the_wall_clocks() -> None:
    # a lock wait of the CLI's 15 minutes: the clock jumps to each timer once every task
    # is parked (on the wall clock this test would take 15 minutes)
    woke: list[float] = []

    async def sleeper(sched: Scheduler) -> None:
        await anyio.sleep(900)
        woke.append(anyio.current_time())
        sched.live -= 1

    sched = virtual(sleeper)
    assert woke == [900.0] and sched.clock == 900.0 and sched.hang == []


def test_a_wait_that_never_ends_is_a_hang_on_the_schedules_clock() -> None:
    async def poller(sched: Scheduler) -> None:
        while True:  # noqa: ASYNC110 - a poll that never gives up
            await anyio.sleep(60)

    sched = virtual(poller)
    assert sched.hang[0].startswith("hang: its waits passed 86400 s")
    assert sched.clock > 86400


def test_tasks_that_all_wait_on_nothing_are_a_hang() -> None:
    async def stuck(sched: Scheduler) -> None:
        await anyio.Event().wait()  # nothing will set it

    sched = virtual(stuck)
    assert sched.hang and "every task waits on something" in sched.hang[0]


def test_ops_2146_a_resume_takes_a_dead_aborts_claim_over_once_success_names_the_job() -> None:
    # job 2 dies right after its _SUCCESS (journal still `completing`); an operator's
    # `jobs abort` dies holding the job's command claim. Resume refused ("being aborted by
    # another command": its takeover of a dead abort's claim read only the journal, not
    # the _SUCCESS), abort refused ("succeeded (its _SUCCESS is written)"): the job's
    # records stayed forever (inv 4)
    assert categories(2146, "ops") == set()


# -- stop 35's long run (seeds 0..9999), fixed in stop 36 by the abort note (s3aabort) --
def test_default_3947_an_abort_that_fails_after_deleting_a_kept_objects_record() -> None:
    # an S3A job dies after its first complete; `jobs abort` aborts the other upload,
    # deletes the pendingset that names the completed object, then fails (SlowDown past
    # the budget) before it reports what it kept: the final abort found no record of that
    # object, so it was neither named nor removed (1 of the job's 2 files visible, inv 6)
    assert categories(3947) == set()


def test_default_182_a_dead_resumes_claim_never_keeps_the_abort_out_for_good() -> None:
    # a `jobs resume` of a job that never started committing dies holding its claim: the
    # fix that left a failed run's claim in place stranded it (the final abort refused by
    # it forever, inv 4); now the final resume finds nothing to resume (NothingToResume) and
    # deletes the dead run's claim with its own
    assert categories(182) == set()


def test_s3a_9275_a_failed_abort_releases_a_claim_another_abort_still_runs_under() -> None:
    # abort A holds the job's command claim, abort B (same verb) goes on beside it, fails
    # and deleted the one shared claim on its way out; a resume then claimed the job while
    # A still ran: the resume committed the job and A reported it aborted (told both). Each
    # run now writes and deletes a claim object of its own (committers/cmdclaim.py)
    assert categories(9275, "s3a") == set()


@pytest.mark.parametrize(
    ("profile", "seed"),
    [("s3a", 4968), ("s3a-late", 203), ("s3a-late", 1913), ("s3a-late", 2369), ("s3a-late", 4607)],
)
def test_the_same_class_in_the_s3a_profiles(profile: str, seed: int) -> None:
    assert categories(seed, profile) == set()


# -- the stragglers profile (stop 38: speculative copies of stream tasks) -----------------
#: seeds that found leftovers before the fixes: 910 (a discarded batch's straggler set its
#: job up again after the abort's last listing: abort_job_storage lists the uploads once
#: more after deleting the records), 1187 and 1426 (its note went with the discard while
#: its marker stayed: StreamSink.drop deletes both in one request, then lists again)
STRAGGLER_SEEDS = (910, 1187, 1426)


def test_stragglers_leave_nothing_and_never_show() -> None:
    bad = []
    for seed in (*range(100), *STRAGGLER_SEEDS):
        r = run_schedule(generate(seed, profile="stragglers"))
        if not r.ok:
            bad.append(f"seed {seed}: {r.violations[0]}")
    assert bad == [], "replay: python -m zerorename.sim --profile stragglers --seed N"
