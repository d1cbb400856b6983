"""``zerorename perf SCENARIO --target TARGET``: the benchmark harness.

Each scenario module plans a list of runs (client x setting); the harness opens the
target, runs every planned run ``--reps`` times (clients alternated, order rotated per
repetition) each in a fresh child process, then prints the median and min-max of every
metric, the ratios of our clients against the baselines of the same group, and the
scenario's notes; ``--json`` writes everything (machine, versions, settings, samples,
summaries, ratios) and ``--plot`` a PNG. Over HTTPS (``--tls`` or an https:// URL) the run
also records the negotiated TLS version and cipher and prints what the cipher costs on
this CPU next to the clients' CPU per GiB (perf/tlsinfo.py).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from zerorename.logsafe import redact_url
from zerorename.perf import SCENARIO_NAMES, report, scenarios, tlsinfo
from zerorename.perf.model import (
    ChildFailed,
    Run,
    Sample,
    Target,
    positive_float,
    positive_int,
    run_in_child,
)
from zerorename.perf.opentarget import TargetError, open_target


def scenario_module(name: str) -> ModuleType:
    """The module of scenario ``name``: ``perf/scenarios/NAME.py``, or
    ``perf/scenarios/NAME/scenario.py`` for a scenario with parts of its own (a folder)."""
    module = importlib.import_module(f"{scenarios.__name__}.{name}")
    if hasattr(module, "__path__"):  # a package: the scenario's folder
        module = importlib.import_module(f"{module.__name__}.scenario")
    return module


#: scenario name -> module, from the one list of them (:data:`SCENARIO_NAMES`); each
#: imports its optional dependencies only when it runs
SCENARIOS: dict[str, ModuleType] = {name: scenario_module(name) for name in SCENARIO_NAMES}

_SECRET_WORDS = ("secret", "password", "token", "credential", "access_key")


#: engine.config's ADDRESSING_STYLES, spelt out: the harness (and a baseline's child) loads
#: no engine; tests/unit/perf/test_perf_names.py holds the two equal
ADDRESSING_STYLES = ("auto", "path", "virtual")


def add_common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("target and output")
    g.add_argument(
        "--target",
        default="moto",
        help="moto (embedded moto server), rgw (starts Ceph RGW), sink (do-nothing S3 "
        "server: the client alone), aws, or an endpoint URL such as http://127.0.0.1:9000 "
        "(credentials from the AWS chain). Default: moto",
    )
    g.add_argument(
        "--bucket", help="bucket for aws/URL targets (embedded ones use zerorename-bench)"
    )
    g.add_argument("--create-bucket", action="store_true", help="create --bucket first")
    g.add_argument(
        "--tls",
        action="store_true",
        help="embedded targets over HTTPS, verified with a CA made for the run: the sink "
        "serves HTTPS itself, RGW natively, moto behind a TLS front; every client is given "
        "the CA. The JSON records the negotiated TLS version and cipher, and the report "
        "prints the cipher's cost on this CPU as the floor of CPU s/GiB (default: off)",
    )
    g.add_argument(
        "--ca-bundle",
        metavar="FILE",
        help="CA bundle (PEM) verifying an https:// URL target, for every client "
        "(default: AWS_CA_BUNDLE, else the system's roots)",
    )
    g.add_argument(
        "--region", help="region (default: AWS_REGION, else us-east-1 for embedded targets)"
    )
    g.add_argument(
        "--addressing-style",
        choices=ADDRESSING_STYLES,
        help="S3 addressing (default: path for embedded and URL targets, auto for aws)",
    )
    g.add_argument(
        "--rgw-store",
        default="bluestore",
        choices=["memstore", "bluestore"],
        help="object store of the embedded RGW: bluestore writes to a sparse 20 GiB file "
        "(as a real RGW writes to disk; multi-GiB runs fit); memstore keeps 4 GiB in RAM and "
        "starts faster, but fills on multi-GiB runs because RGW frees deleted data only "
        "after its garbage collection (default: bluestore)",
    )
    g.add_argument(
        "--reps", type=positive_int, default=3, help="repetitions of every run (default: 3)"
    )
    g.add_argument("--json", metavar="FILE", help="write the full results as JSON")
    g.add_argument("--plot", metavar="FILE.png", help="write a PNG plot (matplotlib)")
    g.add_argument(
        "--quiet", action="store_true", help="no progress display (the table still prints)"
    )
    g.add_argument(
        "--run-timeout",
        type=positive_float,
        default=1800.0,
        help="seconds one measured run may take before it is stopped and reported as "
        "failed; the other runs go on (default: 1800)",
    )
    g.add_argument(
        "--profile",
        metavar="DIR",
        help="also profile one extra run of each of our clients with pyinstrument and write "
        "the profiles (text) to DIR; they are not part of the figures (default: off)",
    )


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(
        prog="zerorename perf", description=__doc__.split("\n")[0] if __doc__ else None
    )
    sub = p.add_subparsers(dest="scenario", required=True, metavar="SCENARIO")
    for name, mod in SCENARIOS.items():
        sp = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(sp)
        add_common(sp)
        sp.set_defaults(func=main_args)
    return p


# --- progress ----------------------------------------------------------------------------


class _Progress:
    """A rich progress bar on a terminal; a line per finished run otherwise."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.total = total
        self.done = 0
        self._bar: Any = None
        self._task: Any = None
        self._quiet = quiet
        if quiet or not sys.stderr.isatty():
            return
        try:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )
        except ImportError:
            return
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        )
        self._bar.start()
        self._task = self._bar.add_task("starting", total=total)

    def status(self, text: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=text)
        elif not self._quiet:
            print(f"[perf] {text}", file=sys.stderr, flush=True)

    def advance(self, text: str) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1)
        elif not self._quiet:
            print(f"[perf {self.done}/{self.total}] {text}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _short(metrics: dict[str, float]) -> str:
    keys = report.metric_order(set(metrics))[:4]
    return " ".join(f"{k}={metrics[k]:.4g}" for k in keys)


# --- the run -----------------------------------------------------------------------------


def execute(
    scenario: ModuleType,
    args: argparse.Namespace,
    target: Target,
    progress: _Progress | None = None,
    failures: list[dict[str, Any]] | None = None,
    plan: list[Run] | None = None,
) -> list[Sample]:
    """Every planned run ``args.reps`` times, each in a child; clients alternated. A run
    that fails or times out is recorded in ``failures`` and the others go on."""
    if failures is None:
        failures = []
    if plan is None:
        plan = scenario.plan(args, target)
    if not plan:
        raise SystemExit("nothing to run: the options select no client or setting")
    reps = max(1, int(args.reps))
    prog = progress or _Progress(len(plan) * reps, quiet=True)
    samples: list[Sample] = []
    timeout = float(getattr(args, "run_timeout", 1800.0))
    for rep in range(reps):
        shift = rep % len(plan)
        for run in plan[shift:] + plan[:shift]:
            label = f"{run.client} {run.group}".strip()
            prog.status(f"rep {rep + 1}/{reps}: {label}")
            try:
                metrics = run_in_child(run.func, target, run.params, timeout=timeout)
            except (ChildFailed, subprocess.TimeoutExpired) as exc:
                why = (
                    f"no result within --run-timeout {timeout:.0f} s"
                    if isinstance(exc, subprocess.TimeoutExpired)
                    else str(exc)
                )
                failures.append(
                    {"client": run.client, "group": run.group, "rep": rep, "error": why}
                )
                prog.advance(f"{label} rep {rep + 1}: FAILED")
                print(f"[perf] {label} rep {rep + 1} failed: {why}", file=sys.stderr, flush=True)
                continue
            samples.append(Sample(scenario.NAME, run.client, run.params, metrics, rep, run.group))
            prog.advance(f"{label} rep {rep + 1}: {_short(metrics)}")
    if getattr(args, "profile", None):
        os.makedirs(args.profile, exist_ok=True)
        ours = tuple(getattr(scenario, "OURS", ("zerorename",))) or ("zerorename",)
        for run in plan:
            if run.client not in ours:
                continue
            name = f"{scenario.NAME}-{run.client}-{run.group}".replace("/", "_").replace(" ", "_")
            path = os.path.join(args.profile, name + ".txt")
            prog.status(f"profiling {run.client} {run.group}")
            run_in_child(run.func, target, run.params, profile=path)
            prog.advance(f"profile: {path}")
    return samples


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in vars(args).items():
        if key == "func" or any(w in key.lower() for w in _SECRET_WORDS):
            continue
        out[key] = value
    return out


def unwritable(path: str | None, *, directory: bool = False) -> str | None:
    """Why ``path`` cannot be written (checked before any run, not after an hour of
    runs), or None when it can (or was not asked for)."""
    if not path:
        return None
    target = Path(path)
    if directory:
        if target.exists() and not target.is_dir():
            return f"{path} exists and is not a directory"
        parent = target if target.exists() else target.parent
    else:
        if target.is_dir():
            return f"{path} is a directory"
        if target.exists() and not os.access(target, os.W_OK):
            return f"{path} is not writable"
        parent = target.parent
    parent = parent if str(parent) else Path(".")
    if not parent.is_dir():
        return f"directory {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"directory {parent} is not writable"
    return None


def main_args(args: argparse.Namespace) -> int:
    for option, path, is_dir in (
        ("--json", args.json, False),
        ("--plot", args.plot, False),
        ("--profile", args.profile, True),
    ):
        why = unwritable(path, directory=is_dir)
        if why:
            print(f"zerorename perf: {option}: {why}; choose another path", file=sys.stderr)
            return 2
    scenario = SCENARIOS[args.scenario]
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    failures: list[dict[str, Any]] = []
    try:
        with open_target(
            args.target,
            bucket=args.bucket,
            region=args.region,
            addressing_style=args.addressing_style,
            create_bucket=args.create_bucket,
            rgw_store=args.rgw_store,
            tls=args.tls,
            ca_bundle=args.ca_bundle,
        ) as target:
            tls = tlsinfo.measure(target)
            plan: list[Run] = scenario.plan(args, target)
            progress = _Progress(len(plan) * max(1, int(args.reps)), args.quiet)
            try:
                samples = execute(scenario, args, target, progress, failures, plan)
            finally:
                progress.close()
    except (TargetError, ChildFailed, tlsinfo.TlsProbeError) as exc:
        print(f"zerorename perf {args.scenario}: {exc}", file=sys.stderr)
        return 1

    report.add_floor(samples, getattr(scenario, "FLOOR_METRIC", None))
    stats = report.summarize(samples)
    ours = tuple(getattr(scenario, "OURS", ("zerorename",)))
    rs = report.ratios(
        stats, ours, getattr(scenario, "PAIRS", None), getattr(scenario, "RATIO_METRICS", None)
    )
    notes_fn = getattr(scenario, "notes", None)
    notes: list[str] = list(notes_fn(samples, args)) if notes_fn else []

    shown = redact_url(target.endpoint_url) if target.endpoint_url else "AWS default"
    print(f"\n== zerorename perf {args.scenario} on {target.name} ({shown}) ==")
    print(f"reps: {args.reps}; figures: median [min-max]\n")
    if tls is not None:
        print("\n".join(tlsinfo.describe(tls)) + "\n")
        floors = tlsinfo.floor_notes(tls, stats)
        if floors:
            notes += ["client CPU over TLS against the floors (medians):", *floors]
    print(report.stats_table(stats))
    if rs:
        print("\nratios (ours / baseline, medians of the same run):\n")
        print(report.ratios_table(rs))
    if notes:
        print()
        for line in notes:
            print(line)
    if failures:
        print(f"\n{len(failures)} run(s) FAILED (not in the figures):")
        for fail in failures:
            first = (fail["error"].splitlines() or [""])[0]
            print(f"  {fail['client']} {fail['group']} rep {fail['rep'] + 1}: {first}")

    if args.plot:
        plot_fn = getattr(scenario, "plot", None)
        if plot_fn is not None:
            plot_fn(samples, args, args.plot)
        else:
            report.bar_plot(stats, args.plot, f"zerorename perf {args.scenario} ({target.name})")
        print(f"\nplot: {args.plot}")
    if args.json:
        doc = {
            "scenario": args.scenario,
            "command": " ".join(sys.argv),
            "started": started,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": report.machine(),
            "versions": report.versions(),
            "target": target.describe(),
            "tls": tls,
            "settings": _settings(args),
            "samples": [s.to_json() for s in samples],
            "summary": [s.to_json() for s in stats],
            "ratios": [r.to_json() for r in rs],
            "notes": notes,
            "failures": failures,
        }
        with open(args.json, "w") as out:
            json.dump(doc, out, indent=2, default=str)
        print(f"json: {args.json}")
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return cast(int, args.func(args))


def options_markdown() -> str:
    """The README's option tables: one per scenario, then the common ones (a test checks
    that the README carries exactly this text)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out: list[str] = []
    common: list[str] | None = None
    for name, sp in sub.choices.items():
        rows: list[str] = []
        shared: list[str] = []
        for action in sp._actions:
            if not action.option_strings or action.dest in ("help",):
                continue
            flag = max(action.option_strings, key=len)
            if action.metavar:
                flag += f" {action.metavar}"
            elif action.choices:
                flag += " {" + ",".join(str(c) for c in action.choices) + "}"
            elif action.nargs != 0:
                flag += " " + action.dest.upper()
            text = action.help or ""
            if "%(" in text:
                text = text % {**vars(action), "prog": sp.prog}
            text = text.replace("|", "\\|")
            row = f"| `{flag}` | {text} |"
            is_common = any(
                g.title == "target and output" and action in g._group_actions
                for g in sp._action_groups
            )
            (shared if is_common else rows).append(row)
        out += [
            f"`zerorename perf {name}`: {sp.description}",
            "",
            "| option | what it does |",
            "| --- | --- |",
            *rows,
            "",
        ]
        common = shared
    out += [
        "Every scenario also takes:",
        "",
        "| option | what it does |",
        "| --- | --- |",
        *(common or []),
    ]
    return "\n".join(out)


if __name__ == "__main__":  # python -m zerorename.perf.harness: the README's option tables
    print(options_markdown())
