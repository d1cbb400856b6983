"""Whether a measured grid brackets the knee, and how to extend it (pure: no I/O).

A grid whose best setting sits at its largest concurrency (or part size) and beats its
neighbour there beyond the noise has not shown where throughput stops growing: the tuner
measures one step further (x2) and asks again, up to :data:`MAX_EXTENSIONS` steps, the
model's concurrency cap, S3's part limits or the memory bound. :func:`bracket` runs that
loop over any ``measure`` function, so it is tested with made-up figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from zerorename.errors import ConfigError
from zerorename.perf.scenarios.tune.model import (
    MAX_CONCURRENCY,
    SHARE,
    Setting,
    Spread,
    choose,
    indistinguishable,
)
from zerorename.units import GiB, format_size

#: most extension steps one grid gets
MAX_EXTENSIONS = 4
#: most memory (streamed sources: (parts in flight + 2) x part size) an extension may reach
MAX_MEMORY = 2 * GiB
#: S3's largest part
MAX_PART = 5 * GiB

#: settings -> their MB/s figures, one per run
Measure = Callable[[Sequence[Setting]], Mapping[Setting, Sequence[float]]]


@dataclass(frozen=True)
class Extension:
    """One step: the settings to measure next (none when a cap stopped it) and why."""

    settings: tuple[Setting, ...]
    why: str


def best_of(spreads: Mapping[Setting, Spread]) -> Setting:
    """The best median; among equal medians the cheapest (as :func:`pick` orders them)."""
    if not spreads:
        raise ConfigError("nothing was measured: no grid to extend")
    return choose(spreads, 0.0)[0]


def edge(settings: Sequence[Setting]) -> list[Setting]:
    """What tells whether the grid brackets the knee: the part size with the most
    concurrencies (the larger of equals), all of them, and the part sizes next to it at
    its largest concurrency."""
    if not settings:
        raise ConfigError("an empty grid has no edge")
    parts = sorted({s.part_size for s in settings})
    line_part = max(parts, key=lambda q: (sum(1 for s in settings if s.part_size == q), q))
    out = {s for s in settings if s.part_size == line_part}
    top = max(s.concurrency for s in out)
    at_top = sorted(s.part_size for s in settings if s.concurrency == top)
    i = at_top.index(line_part)
    out.update(Setting(top, q) for q in at_top[max(0, i - 1) : i + 2])
    return sorted(out, key=Setting.cost)


def _cap(s: Setting, object_size: int, max_memory: int) -> str | None:
    """Why ``s`` may not be measured, or None."""
    if s.concurrency > MAX_CONCURRENCY:
        return f"concurrency {s.concurrency} is above the cap of {MAX_CONCURRENCY}"
    if s.part_size > MAX_PART:
        return f"parts of {format_size(s.part_size)} are above S3's 5GiB"
    if s.part_size > object_size // 2:
        return f"parts of {format_size(s.part_size)} leave the object fewer than 2 parts"
    if s.concurrency > math.ceil(object_size / s.part_size):
        return f"concurrency {s.concurrency} is more than the object's parts"
    if s.memory() > max_memory:
        return f"{s.label()} needs {format_size(s.memory())}, above {format_size(max_memory)}"
    return None


def extension(
    spreads: Mapping[Setting, Spread],
    object_size: int,
    tolerance: float,
    max_memory: int = MAX_MEMORY,
    share: float = SHARE,
    tried: Collection[Setting] = (),
) -> Extension | None:
    """The next step when the best is at the grid's largest concurrency (or part size)
    and beats its neighbour on that axis beyond the noise (x2 up), or when the cheapest
    setting a pick may take is the smallest concurrency measured at its part size (/2
    down); None when the grid brackets. A setting in ``tried`` (its runs failed) is not
    asked for again."""
    best, _same, cheapest, _floor = choose(spreads, tolerance, share)
    top = spreads[best]
    steps: list[Setting] = []
    reasons: list[str] = []
    axes = (
        ("concurrency", [s for s in spreads if s.part_size == best.part_size], "concurrency"),
        ("part size", [s for s in spreads if s.concurrency == best.concurrency], "part_size"),
    )
    for axis, line, attr in axes:
        values = sorted({getattr(s, attr) for s in line})
        if len(values) < 2 or getattr(best, attr) != values[-1]:
            continue
        below = next(s for s in line if getattr(s, attr) == values[-2])
        low = spreads[below]
        if indistinguishable(top, low, tolerance):
            continue
        if attr == "concurrency":
            # one request per part is as far as concurrency goes
            n = math.ceil(object_size / best.part_size)
            up = min(2 * best.concurrency, n) if n > best.concurrency else 2 * best.concurrency
            step = Setting(up, best.part_size)
            shown = (str(best.concurrency), str(below.concurrency), str(step.concurrency))
        else:
            step = Setting(best.concurrency, 2 * best.part_size)
            shown = (
                format_size(best.part_size),
                format_size(below.part_size),
                format_size(step.part_size),
            )
        beat = (
            f"the best ({best.label()}, {top.median:.0f} MB/s [{top.low:.0f}-{top.high:.0f}]) "
            f"is the grid's largest {axis} and beats {shown[1]} "
            f"({low.median:.0f} MB/s [{low.low:.0f}-{low.high:.0f}]) beyond the noise"
        )
        if step in spreads or step in tried:
            continue
        why_not = _cap(step, object_size, max_memory)
        if why_not is not None:
            reasons.append(f"{beat}; not extended: {why_not}")
            continue
        steps.append(step)
        reasons.append(f"{beat}: measuring {axis} {shown[2]}")
    low_conc = min(s.concurrency for s in spreads if s.part_size == cheapest.part_size)
    down = Setting(max(1, cheapest.concurrency // 2), cheapest.part_size)
    fresh = down not in spreads and down not in tried
    if cheapest.concurrency == low_conc and fresh and _cap(down, object_size, max_memory) is None:
        mine = spreads[cheapest]
        steps.append(down)
        reasons.append(
            f"the cheapest setting within the noise of the best ({cheapest.label()}, "
            f"{mine.median:.0f} MB/s [{mine.low:.0f}-{mine.high:.0f}]) is the grid's smallest "
            f"concurrency: measuring concurrency {down.concurrency}"
        )
    if not reasons:
        return None
    return Extension(tuple(steps), "; ".join(reasons))


@dataclass(frozen=True)
class Bracket:
    """What bracketing did: the grid (initial plus extensions), every figure it measured,
    and one line per step (empty when the initial grid already bracketed the knee)."""

    settings: tuple[Setting, ...]
    added: tuple[Setting, ...]
    measured: dict[Setting, list[float]]
    steps: tuple[str, ...]


def bracket(
    initial: Sequence[Setting],
    measure: Measure,
    object_size: int,
    tolerance: float,
    max_memory: int = MAX_MEMORY,
    share: float = SHARE,
) -> Bracket:
    """Measure the initial grid's edge, then extend while :func:`extension` asks, at
    most :data:`MAX_EXTENSIONS` steps. A setting whose runs all failed is left out."""
    settings = list(dict.fromkeys(initial))
    added: list[Setting] = []
    measured: dict[Setting, list[float]] = {}

    tried: set[Setting] = set()

    def run(these: Sequence[Setting]) -> None:
        tried.update(these)
        got = measure(these)
        for s in these:
            if got.get(s):
                measured.setdefault(s, []).extend(got[s])

    run(edge(settings))
    steps: list[str] = []
    for _ in range(MAX_EXTENSIONS):
        if not measured:
            break
        spreads = {s: Spread.of(v) for s, v in measured.items()}
        ext = extension(spreads, object_size, tolerance, max_memory, share, tried)
        if ext is None:
            break
        steps.append(ext.why)
        if not ext.settings:
            break
        run(ext.settings)
        failed = [s for s in ext.settings if s not in measured]
        if failed:
            steps.append(f"every run of {', '.join(s.label() for s in failed)} failed: left out")
        new = [s for s in ext.settings if s in measured and s not in settings]
        added.extend(new)
        settings.extend(new)
    else:
        spreads = {s: Spread.of(v) for s, v in measured.items()}
        if measured and extension(spreads, object_size, tolerance, max_memory, share, tried):
            steps.append(
                f"stopped after {MAX_EXTENSIONS} extensions: the best is still at the edge"
            )
    ordered = tuple(sorted(settings, key=Setting.cost))
    return Bracket(ordered, tuple(added), measured, tuple(steps))


__all__ = [
    "MAX_EXTENSIONS",
    "MAX_MEMORY",
    "Bracket",
    "Extension",
    "best_of",
    "bracket",
    "edge",
    "extension",
]
