"""``python -m zerorename.sim``: run seeds, replay one, shrink it.

python -m zerorename.sim --seeds 0..999            how many ran clean
python -m zerorename.sim --seed 20 --trace         one schedule, every request
python -m zerorename.sim --seed 20 --shrink        and its shortest failing form
python -m zerorename.sim --seeds 0..999 --avoid 1,2,4,5   without the known bugs
python -m zerorename.sim --seeds 0..99999 --jobs 8  in 8 processes; the last line sums up
python -m zerorename.sim --seed 20 --limit 30       a run past 30 s of CPU: a hang
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace

from zerorename.sim.generate import PROFILES, generate
from zerorename.sim.run import LIMIT, RunResult, run_schedule
from zerorename.sim.shrink import category, shrink


def seed_range(text: str) -> range:
    lo, sep, hi = text.partition("..")
    if not sep:
        return range(int(lo), int(lo) + 1)
    return range(int(lo), int(hi) + 1)


def avoid_set(text: str) -> frozenset[int]:
    return frozenset(int(x) for x in text.split(",") if x.strip())


def show(r: RunResult, *, trace: bool) -> None:
    print("\n".join(r.schedule.describe()))
    if trace:
        print("\n".join(r.trace))
        print("\n".join("  note: " + n for n in r.notes))
    for v in r.violations:
        print("VIOLATION " + v)
    if r.ok:
        print("no violation")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m zerorename.sim")
    p.add_argument("--seed", type=int, help="run (replay) this seed and print its schedule")
    p.add_argument("--seeds", type=seed_range, help="run seeds A..B, report the clean count")
    p.add_argument("--avoid", type=avoid_set, default=frozenset(), help="e.g. 1,2,4,5")
    p.add_argument("--profile", default="default", choices=sorted(PROFILES))
    p.add_argument("--trace", action="store_true", help="print every request of the run")
    p.add_argument("--shrink", action="store_true", help="shrink a failing seed")
    p.add_argument("--jobs", type=int, default=1, help="worker processes for --seeds")
    p.add_argument(
        "--limit",
        type=float,
        default=LIMIT,
        help=f"CPU seconds a schedule may use before it is reported as a hang (default "
        f"{LIMIT:g}; its waits take none: the schedule's clock is virtual)",
    )
    args = p.parse_args(argv)
    if args.seed is not None:
        r = run_schedule(
            generate(args.seed, avoid=args.avoid, profile=args.profile), limit=args.limit
        )
        show(r, trace=args.trace)
        if args.shrink and not r.ok:
            want = category(r.violations[0])
            start = replace(r.schedule, picks=r.picks)

            def fails(s: object) -> bool:
                out = run_schedule(s, limit=args.limit)  # type: ignore[arg-type]
                return any(category(v) == want for v in out.violations)

            small, runs = shrink(start, fails)
            print(f"\nshrunk in {runs} runs:")
            show(run_schedule(small, limit=args.limit), trace=True)
        return 0 if r.ok else 1
    if args.seeds is None:
        p.error("give --seed N or --seeds A..B")
    seeds: range = args.seeds
    wall, cpu = time.perf_counter(), time.process_time()
    chunks = [seeds[i : i + CHUNK] for i in range(0, len(seeds), CHUNK)]
    work = [(c, args.avoid, args.profile, args.limit) for c in chunks]
    if args.jobs > 1:
        ctx = multiprocessing.get_context("fork")  # the parent has run no schedule yet
        with ctx.Pool(args.jobs) as pool:
            parts = pool.map(run_seeds, work, chunksize=1)
            cpu_children = sum(p[1] for p in parts)
    else:
        parts = [run_seeds(w) for w in work]
        cpu_children = 0.0
    bad: dict[str, list[int]] = {}
    clean = 0
    for found, _ in parts:
        for seed, cats in found:
            clean += not cats
            for cat in cats:
                bad.setdefault(cat, []).append(seed)
    for cat, which in sorted(bad.items()):
        print(f"{cat}: {len(which)} seeds, e.g. {which[:8]}")
    used = time.process_time() - cpu + cpu_children
    n = len(seeds)
    took = time.perf_counter() - wall
    print(
        f"{clean} of {n} schedules ran with zero violations (profile {args.profile}, seeds "
        f"{seeds.start}..{seeds.stop - 1}, {args.jobs} processes, {took:.0f} s, "
        f"{used / max(n, 1) * 1000:.0f} ms CPU per schedule)"
    )
    return 0 if clean == n else 1


#: seeds one worker process runs at a time
CHUNK = 50


def run_seeds(
    work: tuple[range, frozenset[int], str, float],
) -> tuple[list[tuple[int, list[str]]], float]:
    """Run seeds (in a worker process or here): each seed's violation categories, and the
    CPU seconds it took."""
    seeds, avoid, profile, limit = work
    start = time.process_time()
    out = []
    for seed in seeds:
        r = run_schedule(generate(seed, avoid=avoid, profile=profile), limit=limit)
        out.append((seed, sorted({category(v) for v in r.violations})))
    return out, time.process_time() - start


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":  # set iteration order is part of a replay
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "zerorename.sim", *sys.argv[1:]])
    sys.exit(main())
