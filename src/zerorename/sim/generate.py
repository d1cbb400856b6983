"""A schedule from a seed (pure): which actors, their settings and start steps, and the
faults planned for them. ``avoid`` leaves out the actor combinations that reach the known
findings of issue 20 (1, 2, 4, 5), so a run can count schedules with no violation while
those are being fixed, and those of the simulation's own findings: 10 (two operator
commands on one job at once: each operator takes another job), 11 (a replace after a
committed job whose cleanup did not finish: no replace, as with 4), 12 (a failed upload
abort inside ``jobs abort``: operators meet no fault)."""

from __future__ import annotations

import random

from zerorename.sim.model import ActorSpec, FaultKind, FaultSpec, Kind, Schedule

KIND_WEIGHTS = {
    Kind.JOB: 40,
    Kind.STREAM: 10,
    Kind.S3A: 8,
    Kind.ABORT: 10,
    Kind.RESUME: 5,
    Kind.UPLOADS: 3,
    Kind.LIFECYCLE: 4,
    Kind.FOREIGN: 8,
}
FAULT_WEIGHTS = {
    FaultKind.CRASH_BEFORE: 30,
    FaultKind.CRASH_AFTER: 30,
    FaultKind.LOST: 20,
    FaultKind.THROTTLED: 20,
}
#: weights of a focused run (``--profile``): streams with operators and the lifecycle
#: rule; S3A jobs with operators and later zerorename jobs; many concurrent jobs
PROFILES: dict[str, dict[Kind, int]] = {
    "default": KIND_WEIGHTS,
    "streams": {Kind.STREAM: 30, Kind.ABORT: 25, Kind.RESUME: 5, Kind.LIFECYCLE: 10, Kind.JOB: 10},
    "s3a": {Kind.S3A: 30, Kind.ABORT: 25, Kind.RESUME: 10, Kind.JOB: 35},
    # as s3a, but the operator comes late (after other jobs committed)
    "s3a-late": {Kind.S3A: 30, Kind.ABORT: 25, Kind.RESUME: 10, Kind.JOB: 35},
    "jobs": {Kind.JOB: 80, Kind.FOREIGN: 10, Kind.ABORT: 5, Kind.RESUME: 5},
    # speculative copies of stream tasks beside their batches' commits (stop 38's CI find)
    "stragglers": {Kind.STREAM: 35, Kind.STRAGGLER: 45, Kind.ABORT: 10, Kind.JOB: 10},
    "ops": {
        Kind.JOB: 40,
        Kind.STREAM: 10,
        Kind.ABORT: 15,
        Kind.RESUME: 10,
        Kind.CLEANUP: 15,
        Kind.UPLOADS: 10,
        Kind.LIFECYCLE: 5,
    },
}
COMMITTERS = ("magic", "staging", "partitioned")
CONFLICTS = ("fail", "append", "replace")
#: the actors whose requests may meet a planned fault
FAULTY = (Kind.JOB, Kind.S3A, Kind.STREAM, Kind.ABORT, Kind.RESUME, Kind.CLEANUP)


def _pick(rng: random.Random, weights: dict[Kind, int] | dict[FaultKind, int]) -> object:
    keys = list(weights)
    return rng.choices(keys, weights=[weights[k] for k in keys])[0]  # type: ignore[index]


def generate(
    seed: int, *, avoid: frozenset[int] = frozenset(), profile: str = "default"
) -> Schedule:
    """The schedule seed ``seed`` names (in ``profile``)."""
    rng = random.Random(seed if profile == "default" else f"{profile}/{seed}")
    weights = dict(PROFILES[profile])
    if 2 in avoid:
        weights.pop(Kind.S3A, None)
    actors: list[ActorSpec] = []
    for _ in range(rng.randint(2, 6)):
        kind = _pick(rng, weights)
        assert isinstance(kind, Kind)
        committer = rng.choice(COMMITTERS)
        conflicts = [c for c in CONFLICTS if not (c == "replace" and 4 in avoid)]
        conflict = rng.choice(conflicts)
        if (
            5 in avoid
            and conflict == "fail"
            and any(a.kind is Kind.JOB and a.conflict == "fail" for a in actors)
        ):
            conflict = "append"
        delay = 0 if rng.random() < 0.5 else rng.randint(1, 40)
        if profile == "s3a-late" and kind in (Kind.ABORT, Kind.RESUME):
            delay = rng.randint(40, 150)
        if kind is Kind.STRAGGLER:  # as often after its batch's commit as before it
            delay = rng.randint(0, 200)
        actors.append(
            ActorSpec(
                kind,
                committer=committer,
                conflict=conflict,
                tasks=rng.randint(1, 3),
                batches=rng.randint(1, 3),
                delay=delay,
            )
        )
    faults: list[FaultSpec] = []
    for i, a in enumerate(actors):
        calm = 12 in avoid and a.kind in (Kind.ABORT, Kind.RESUME, Kind.CLEANUP)
        if a.kind in FAULTY and rng.random() < 0.4 and not calm:
            kind = _pick(rng, FAULT_WEIGHTS)
            assert isinstance(kind, FaultKind)
            # early requests as often as late ones: short actors (an S3A job's cleanup
            # is its 7th request) meet faults too
            faults.append(FaultSpec(i, rng.randint(1, rng.choice((8, 16, 32))), kind))
    return Schedule(seed, tuple(actors), tuple(faults), avoid=avoid, profile=profile)
