"""The tuner's model and its noise-aware pick (pure: no I/O, no clock).

From what ``perf tune`` measured of an endpoint (the round trip of small requests, one
part's time on one connection, the client's CPU per GiB, the server's ceiling) the model
predicts each setting's throughput for the object (its round trips, one per wave of parts
in flight, plus its bytes at the lower ceiling) and proposes the cheapest setting near the
best prediction; the pool is derived from it and the job commit's completes in flight,
never swept. Then :func:`pick` reads the grid measured around the proposal: every
setting's spread over interleaved repetitions, the settings indistinguishable from the
best, the cheapest of those that reaches a share of the best, and one line on how sure
that is and why.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from zerorename.errors import ConfigError
from zerorename.units import GiB, MiB, format_size

#: part sizes the model proposes from (S3's minimum is 5 MiB)
PART_LADDER = (8 * MiB, 16 * MiB, 32 * MiB, 64 * MiB, 128 * MiB)
MIN_PART = 5 * MiB
#: most requests in flight the model proposes for one process
MAX_CONCURRENCY = 64
#: S3's most parts per upload
MAX_PARTS = 10_000
#: completes per second the job commit's completes in flight should sustain
COMMIT_RATE = 1000.0
COMMIT_MIN, COMMIT_MAX = 8, 64
#: the share of the best's median MB/s a pick must reach
SHARE = 0.9
#: a burst whose client CPU was at least this share of its wall time was the client's limit
BUSY = 0.85
#: a burst slower than this share of what round trips and one connection's rate allow
#: was held back by the server
SLOW = 0.8
MB = 1_000_000


@dataclass(frozen=True)
class Probe:
    """What was measured of the endpoint: the median round trip of small requests
    (seconds), one part of ``part_bytes`` sent on one connection in ``part_s`` seconds
    (request included), the client's CPU seconds per GiB uploaded, and the server's
    ceiling in bytes/s (None when the burst that measures it kept the client busy: the
    server was not the limit)."""

    rtt_s: float
    part_bytes: int
    part_s: float
    cpu_s_per_gib: float
    server_bps: float | None = None
    burst_bps: float | None = None

    def __post_init__(self) -> None:
        for name in ("rtt_s", "part_s", "cpu_s_per_gib"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise ConfigError(f"probe {name} must be a finite number > 0, got {value!r}")
        if self.part_bytes < 1:
            raise ConfigError(f"probe part_bytes must be >= 1, got {self.part_bytes!r}")
        for name in ("server_bps", "burst_bps"):
            rate = getattr(self, name)
            if rate is not None and (not math.isfinite(rate) or rate <= 0):
                raise ConfigError(f"probe {name} must be a finite number > 0, got {rate!r}")

    @property
    def single_bps(self) -> float:
        """Bytes per second one connection sends a body at (the round trip taken out;
        at least a twentieth of the part's time counts as sending)."""
        return self.part_bytes / max(self.part_s - self.rtt_s, self.part_s / 20)

    @property
    def client_bps(self) -> float:
        """Bytes per second one core of the client can drive (1 / CPU per byte)."""
        return GiB / self.cpu_s_per_gib

    @property
    def ceiling_bps(self) -> float:
        """What the model aims at: the burst's rate net of its round trips when one was
        measured (the client's threads and the server together, as the runs have them),
        else the lower of one core's rate and the server's ceiling."""
        if self.burst_bps is not None:
            return self.burst_bps
        if self.server_bps is None:
            return self.client_bps
        return min(self.client_bps, self.server_bps)

    @property
    def bound(self) -> str:
        """Which ceiling decided, in words."""
        if self.server_bps is not None and self.server_bps < self.client_bps:
            return "server (the burst left the client idle)"
        if self.burst_bps is not None:
            return "client (busy through the burst)"
        if self.server_bps is not None:
            return "client CPU (below the server's measured ceiling)"
        return "client CPU (one core)"


def burst_time(probe: Probe, burst_bytes: int, concurrency: int, part: int) -> float:
    """Seconds a burst (one multipart upload of ``burst_bytes`` in ``part``-byte parts,
    ``concurrency`` in flight) takes when only the round trips, one connection's rate and
    the client's CPU limit it: create and complete, then waves of parts in parallel."""
    waves = math.ceil(math.ceil(burst_bytes / part) / max(1, concurrency))
    wire = 2 * probe.rtt_s + waves * (probe.rtt_s + part / probe.single_bps)
    return max(wire, burst_bytes / probe.client_bps)


def burst_rate(probe: Probe, burst_bytes: int, concurrency: int, part: int, wall_s: float) -> float:
    """A burst's bytes per second net of its round trips (create, complete, one per wave
    of parts), at most 4x its gross rate."""
    waves = math.ceil(math.ceil(burst_bytes / part) / max(1, concurrency))
    return burst_bytes / max(wall_s - (2 + waves) * probe.rtt_s, wall_s / 4)


def server_ceiling(
    burst_bytes: int,
    wall_s: float,
    client_busy_s: float,
    expected_s: float,
    busy: float = BUSY,
) -> float | None:
    """The server's ceiling from a burst of parallel part uploads: its throughput when
    the client's threads ran (or waited for a core) less than ``busy`` of the wall time
    (``client_busy_s``: the client waited on the server) and
    the burst took longer than the round trips and one connection's rate explain
    (``expected_s`` / :data:`SLOW`); else None (the server's ceiling was not reached)."""
    if burst_bytes < 1 or not wall_s > 0 or not math.isfinite(wall_s):
        raise ConfigError(f"a burst needs bytes >= 1 and a time > 0, got {burst_bytes}, {wall_s}")
    if not math.isfinite(client_busy_s) or client_busy_s < 0:
        raise ConfigError(f"a burst's client busy time must be >= 0, got {client_busy_s!r}")
    if not math.isfinite(expected_s) or expected_s < 0:
        raise ConfigError(f"a burst's expected time must be >= 0, got {expected_s!r}")
    if client_busy_s >= busy * wall_s or wall_s * SLOW <= expected_s:
        return None
    return burst_bytes / wall_s


@dataclass(frozen=True, order=True)
class Setting:
    """One upload setting: requests in flight and part size."""

    concurrency: int
    part_size: int

    def memory(self) -> int:
        """Bytes a streamed source holds: (parts in flight + 2) x part size."""
        return (self.concurrency + 2) * self.part_size

    def cost(self) -> tuple[int, int]:
        """Cheaper first: fewer connections, then less memory."""
        return (self.concurrency, self.memory())

    def label(self) -> str:
        return f"concurrency {self.concurrency}, parts {format_size(self.part_size)}"


@dataclass(frozen=True)
class Proposal:
    """The model's answer before measuring, and why."""

    setting: Setting
    in_flight_bytes: int
    expected_bps: float
    commit_completes: int
    why: str


def expected_bps(probe: Probe, object_size: int, s: Setting) -> float:
    """Bytes per second one object is uploaded at with ``s``: a round trip each for
    create and complete, one per wave of parts in flight together, plus its bytes at the
    lower of the ceiling and that many connections' rate. (A steady-state model, bytes
    in flight = rate x round trip, proposed half the measured knee on the sink at 50 ms:
    an object of a few waves pays its round trips in full.)"""
    parts = max(1, math.ceil(object_size / s.part_size))
    conc = max(1, min(s.concurrency, parts))
    waves = math.ceil(parts / conc)
    rate = min(probe.ceiling_bps, conc * probe.single_bps)
    return object_size / ((2 + waves) * probe.rtt_s + object_size / rate)


def candidates(object_size: int) -> list[Setting]:
    """Every setting the model weighs: a part size of the ladder (or S3's smallest) that
    the object has at least one of and at most 10,000 of, and 1 to min(MAX_CONCURRENCY,
    parts) requests in flight."""
    ladder = [p for p in (MIN_PART, *PART_LADDER) if p <= object_size] or [MIN_PART]
    ladder = [p for p in ladder if math.ceil(object_size / p) <= MAX_PARTS] or [ladder[-1]]
    return [
        Setting(c, p)
        for p in ladder
        for c in range(1, min(MAX_CONCURRENCY, math.ceil(object_size / p)) + 1)
    ]


def commit_completes(rtt_s: float) -> int:
    """Completes in flight for the job commit: enough for COMMIT_RATE per second at this
    round trip, within [COMMIT_MIN, COMMIT_MAX]."""
    return max(COMMIT_MIN, min(COMMIT_MAX, math.ceil(COMMIT_RATE * rtt_s)))


def propose(probe: Probe, object_size: int, share: float = SHARE) -> Proposal:
    """The cheapest setting (fewest requests in flight, then least memory) whose
    :func:`expected_bps` reaches ``share`` of the best any candidate is expected to give."""
    if object_size < 1:
        raise ConfigError(f"object size must be >= 1 byte, got {object_size!r}")
    weighed = {s: expected_bps(probe, object_size, s) for s in candidates(object_size)}
    top = max(weighed.values())
    chosen = min((s for s, v in weighed.items() if v >= share * top), key=Setting.cost)
    in_flight = chosen.concurrency * chosen.part_size
    server = "not reached" if probe.server_bps is None else f"{probe.server_bps / MB:.0f} MB/s"
    why = (
        f"RTT {probe.rtt_s * 1000:.2f} ms, one connection {probe.single_bps / MB:.0f} MB/s, "
        f"client {probe.cpu_s_per_gib:.2f} CPU s/GiB (one core: {probe.client_bps / MB:.0f} "
        f"MB/s), server ceiling {server}, ceiling {probe.ceiling_bps / MB:.0f} MB/s, bound: "
        f"{probe.bound}. An upload of "
        f"{format_size(object_size)} modelled as round trips (create, complete, one per wave "
        f"of parts) plus its bytes at min(ceiling, connections x one's rate): at best "
        f"{top / MB:.0f} MB/s; the cheapest within {share:.0%} of it: "
        f"{chosen.concurrency} x {format_size(chosen.part_size)} parts "
        f"({format_size(in_flight)} in flight)"
    )
    return Proposal(chosen, in_flight, weighed[chosen], commit_completes(probe.rtt_s), why)


def grid(proposal: Proposal, object_size: int) -> list[Setting]:
    """The settings measured around the proposal: half, the same and twice the
    concurrency (1, 2 and 4 around 1), at the proposed part size and twice it (half of
    it when the object has fewer than two parts of twice it); a concurrency above the
    object's parts becomes one per part; cheapest first."""
    c, p = proposal.setting.concurrency, proposal.setting.part_size
    parts = [p]
    if object_size > 2 * p:
        parts.append(2 * p)
    elif p // 2 >= MIN_PART:
        parts.append(p // 2)
    concs = sorted({max(1, c // 2), c, min(MAX_CONCURRENCY, 2 * c)})
    if c == 1:  # nothing below one request: look further up instead
        concs.append(4)
    # more requests in flight than the object has parts is the same as one per part
    fit = {Setting(min(k, math.ceil(object_size / q)), q) for q in parts for k in concs}
    return sorted(fit, key=Setting.cost)


@dataclass(frozen=True)
class Spread:
    """One setting's measured MB/s: its runs' median and range."""

    low: float
    median: float
    high: float
    runs: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ConfigError("a setting has no measured run")
        return cls(min(values), statistics.median(values), max(values), len(values))


@dataclass(frozen=True)
class Pick:
    """The measured answer: the setting, every setting's spread, the best, those
    indistinguishable from it, and how sure in one line."""

    setting: Setting
    spreads: dict[Setting, Spread]
    best: Setting
    indistinguishable: tuple[Setting, ...]
    sureness: str
    #: the MB/s a pick had to reach (a share of the best's median)
    floor: float = 0.0

    def knee(self) -> int:
        """The fewest requests in flight indistinguishable from the best that reach the
        floor."""
        return min(
            s.concurrency for s in self.indistinguishable if self.spreads[s].median >= self.floor
        )


def indistinguishable(a: Spread, b: Spread, tolerance: float) -> bool:
    """Two figures cannot be told apart: their ranges overlap, or their medians are
    within ``tolerance`` (a floor on the noise when runs are few)."""
    overlap = a.low <= b.high and b.low <= a.high
    top = max(a.median, b.median)
    return overlap or abs(a.median - b.median) <= tolerance * top


def pick(
    measured: Mapping[Setting, Sequence[float]], tolerance: float = 0.05, share: float = SHARE
) -> Pick:
    """The cheapest setting indistinguishable from the best (by median MB/s) whose median
    reaches ``share`` of the best's: wide spreads make settings indistinguishable that
    are far apart, and a pick must still give most of the best throughput."""
    if not measured:
        raise ConfigError("nothing was measured: no setting to pick from")
    if not 0 <= tolerance < 1:
        raise ConfigError(f"tolerance must be in [0, 1), got {tolerance!r}")
    if not 0 < share <= 1:
        raise ConfigError(f"share must be in (0, 1], got {share!r}")
    spreads = {s: Spread.of(v) for s, v in measured.items()}
    best, same, chosen, floor = choose(spreads, tolerance, share)
    why = _sureness(chosen, spreads, same, tolerance, floor)
    return Pick(chosen, spreads, best, same, why, floor)


def choose(
    spreads: Mapping[Setting, Spread], tolerance: float, share: float = SHARE
) -> tuple[Setting, tuple[Setting, ...], Setting, float]:
    """The best (median; the cheaper of equals), the settings indistinguishable from it
    (cheapest first), the cheapest of those that reaches ``share`` of the best's median,
    and that floor in MB/s."""
    if not spreads:
        raise ConfigError("nothing was measured: no setting to pick from")
    best = max(spreads, key=lambda s: (spreads[s].median, [-x for x in s.cost()]))
    same = tuple(
        sorted(
            (s for s in spreads if indistinguishable(spreads[s], spreads[best], tolerance)),
            key=Setting.cost,
        )
    )
    floor = share * spreads[best].median
    chosen = next(s for s in same if spreads[s].median >= floor)
    return best, same, chosen, floor


def _sureness(
    chosen: Setting,
    spreads: Mapping[Setting, Spread],
    same: Sequence[Setting],
    tolerance: float,
    floor: float,
) -> str:
    runs = min(s.runs for s in spreads.values())
    mine = spreads[chosen]
    if runs < 2:
        return (
            f"not sure: one run per setting, so no spread was measured; {len(same)} of "
            f"{len(spreads)} settings are within {tolerance:.0%} of the best and the cheapest "
            f"is picked; run --reps 3 or more"
        )
    noise = max((s.high - s.low) / s.median for s in spreads.values() if s.median > 0)
    if len(same) == 1:
        return (
            f"sure: over {runs} interleaved runs its slowest ({mine.low:.0f} MB/s) beats "
            f"every other setting's fastest (spreads up to {noise:.0%})"
        )
    cheaper = [s for s in spreads if s.cost() < chosen.cost()]
    below = [s for s in cheaper if s in same]
    said = []
    if len(cheaper) > len(below):
        said.append(f"{len(cheaper) - len(below)} cheaper setting(s) measurably slower")
    if below:
        said.append(
            f"{len(below)} cheaper one(s) within the noise but below {floor:.0f} MB/s "
            f"(the share of the best's median a pick must reach)"
        )
    tail = ", ".join(said) or "no cheaper setting was measured"
    return (
        f"fairly sure: {len(same)} settings are indistinguishable from the best over {runs} "
        f"interleaved runs (spreads up to {noise:.0%} overlap), the cheapest is picked and "
        f"{tail}"
    )


@dataclass(frozen=True)
class Advice:
    """A setting in each user's terms."""

    setting: Setting
    commit_completes: int
    executor_cores: int

    @property
    def python_pool(self) -> int:
        """One Python process may upload and commit at once: both need connections."""
        return self.setting.concurrency + self.commit_completes

    @property
    def spark_pool(self) -> int:
        """A Spark task's worker only uploads and the commit's worker only completes;
        both read poolSize, so it covers the larger of the two."""
        return max(self.setting.concurrency, self.commit_completes)

    def engine_config(self) -> str:
        s = self.setting
        return (
            f"EngineConfig(part_size={s.part_size // MiB} * MiB, max_concurrency="
            f"{s.concurrency}, batch_concurrency={self.commit_completes}, "
            f"max_pool_connections={self.python_pool})"
        )

    def spark_options(self) -> dict[str, str]:
        s = self.setting
        return {
            "partSize": f"{s.part_size // MiB}m",
            "concurrency": str(s.concurrency),
            "poolSize": str(self.spark_pool),
        }

    def to_json(self) -> dict[str, object]:
        s = self.setting
        n = self.executor_cores
        return {
            "engine_config": self.engine_config(),
            "part_size": s.part_size,
            "concurrency": s.concurrency,
            "pool": self.python_pool,
            "commit_completes_in_flight": self.commit_completes,
            "spark_options": self.spark_options(),
            "memory_bytes_per_process": s.memory(),
            "executor_cores": n,
            "per_executor": {
                "python_workers": n,
                "connections": n * self.spark_pool,
                "memory_bytes": n * s.memory(),
            },
        }

    def lines(self) -> list[str]:
        s = self.setting
        n = self.executor_cores
        spark = ", ".join(f'.option("{k}", "{v}")' for k, v in self.spark_options().items())
        return [
            f"  Python:  {self.engine_config()}",
            f"  PySpark: {spark}  (per Python worker; an executor with {n} cores runs {n} "
            f"workers: {n * self.spark_pool} connections, {format_size(n * s.memory())})",
            f"  job commit: {self.commit_completes} completes in flight  (PySpark: "
            f'.option("commitConcurrency", "{self.commit_completes}"))',
            f"  memory: {format_size(s.memory())} per process for streamed sources "
            f"(({s.concurrency} parts in flight + 2) x {format_size(s.part_size)})",
        ]


__all__ = [
    "Advice",
    "Pick",
    "Probe",
    "Proposal",
    "Setting",
    "Spread",
    "burst_rate",
    "burst_time",
    "candidates",
    "choose",
    "commit_completes",
    "expected_bps",
    "grid",
    "indistinguishable",
    "pick",
    "propose",
    "server_ceiling",
]
