"""`rtip simulate STACK --trace FILE`: replay a trace through each model's deployment as the plan
builds it (stacks/simulation.py) and print the SLO checklist (stacks/slo_check.py).

Exit status: 0 every item passed (or was skipped), 1 an item failed, 2 bad input (stack file,
model, --zone-loss, trace).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import threading
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from rtip.stackfile import StackFileError, load
from serving.simulator import FULLEST, Simulation, Trace, ZoneFailure, load_azure_2023, load_csv, load_jsonl
from stacks.loader import SpecError
from stacks.plan import Plan, load_plan
from stacks.simulation import SCALINGS, Deployment, SimulationInputError, deployment, select, trace_for
from stacks.slo_alerts import EVALUATION_INTERVAL_S, burn_alerts, overdue_page
from stacks.slo_check import UTIL_TARGET, checklist, figures

EXIT_FAIL = 1
EXIT_BAD_INPUT = 2
AZURE_HEADER = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
PROGRESS_MIN_REQUESTS = 20_000  # below this a run takes a few seconds: no bar


class BadInput(ValueError):
    pass


def read_trace(path: str) -> Trace:
    """The Azure 2023 CSVs natively; other CSVs with `timestamp,input_tokens,output_tokens`;
    JSONL objects with the same keys."""
    file = Path(path)
    try:
        if file.suffix in (".jsonl", ".ndjson"):
            return load_jsonl(file)
        with file.open(newline="") as f:
            header = tuple(h.strip() for h in f.readline().strip().split(","))
        return load_azure_2023(file) if header[:3] == AZURE_HEADER else load_csv(file)
    except OSError as err:
        raise BadInput(f"--trace {path}: {err.strerror or err}") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise BadInput(f"--trace {path}: {err}") from None


def parse_zone_loss(text: str) -> tuple[str, float]:
    match = re.fullmatch(r"\s*([^@\s]+)\s*@\s*([0-9]+(?:\.[0-9]*)?)\s*", text)
    if not match:
        raise BadInput(f"--zone-loss {text!r}: expected ZONE@SECONDS, e.g. us-east-1a@600")
    return match.group(1), float(match.group(2))


def _run(sim: Simulation, label: str, console: Console | None) -> object:
    """The run, with a progress bar on simulated time when `console` is given."""
    if console is None:
        return sim.run()
    total = max(1.0, sim.trace.duration_s)
    done = threading.Event()
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeRemainingColumn(), console=console, transient=True) as bar:
        task = bar.add_task(f"simulating {label}", total=total)

        def watch() -> None:
            while not done.wait(0.25):
                bar.update(task, completed=min(total, sim.now))

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            return sim.run()
        finally:
            done.set()
            watcher.join()


def simulate_one(plan: Plan, dep: Deployment, base: Trace, zone: tuple[str, float] | None,
                 start_s: float, duration_s: float | None, util_target: float,
                 console: Console | None = None, scaling: str = "rate") -> dict[str, object]:
    mp = dep.plan
    try:
        trace = trace_for(mp, base, scaling)
    except ValueError as err:
        raise BadInput(f"--trace: cannot scale it to {mp.model}'s peak {mp.peak_qps:g} req/s: "
                       f"{err}") from None
    if start_s or duration_s is not None:
        trace = trace.window(start_s, start_s + duration_s if duration_s is not None else math.inf)
        if len(trace) < 1:
            raise BadInput(f"--start/--duration: no request of the scaled trace in that window ({mp.model})")
    failure = None
    if zone is not None:
        if zone[0] not in dep.fleet.zones and zone[0] != FULLEST:
            raise BadInput(f"--zone-loss: zone {zone[0]!r} is not one of {mp.model}'s zones in "
                           f"{mp.region}: {', '.join(dep.fleet.zones)} (or {FULLEST})")
        if not 0 <= zone[1] < trace.duration_s:
            raise BadInput(f"--zone-loss at {zone[1]:g} s: the run's trace lasts {trace.duration_s:.0f} s")
        failure = ZoneFailure(*zone)
    # The run ends when the last request is served (no idle tail to dilute the figures).
    cfg = dep.sim_config((failure,) if failure else ())
    sim = Simulation(trace, cfg, "least-loaded", dep.autoscaler())
    show = console if console is not None and len(trace) >= PROGRESS_MIN_REQUESTS else None
    result = _run(sim, dep.name, show)
    items = checklist(result, dep, trace, failure, util_target)  # type: ignore[arg-type]
    alerts = burn_alerts(sim.store, mp.model, cfg.namespace, mp.tier_spec, result.end_s)
    overdue = overdue_page(sim.store, mp, cfg.namespace, result.end_s)
    return {
        "model": mp.model, "region": mp.region, "tier": mp.tier, "peak_qps": mp.peak_qps,
        "trace": {"source": trace.source, "requests": len(trace), "duration_s": round(trace.duration_s, 3)},
        # The zone really lost: FULLEST is chosen when it fails.
        "zone_loss": {"zone": result.extra["zones_lost"][0][1], "at_s": failure.at_s,
                      "chosen": failure.zone == FULLEST} if failure else None,
        "inputs": dep.inputs(), "figures": figures(result, dep),  # type: ignore[arg-type]
        "checklist": [i.to_json() for i in items], "slo_alerts": alerts, "replicas_overdue": overdue,
        "passed": all(i.status != "FAIL" for i in items),
    }


def _fmt(x: object, unit: str = "") -> str:
    return "-" if x is None else f"{x:.3f}{unit}" if isinstance(x, float) else f"{x}{unit}"


def _worst(w: dict[str, object]) -> str:
    """The report's line for `figures.worst_minute` (stacks/slo_check.py)."""
    if w["t_s"] is None:
        return "no minute served"
    return (f"worst clock minute from {w['t_s']:.0f} s: TTFT p99 {_fmt(w['ttft_p99_s'])} s, "
            f"TPOT p99 {_fmt(w['tpot_p99_s'])} s; {w['minutes_over']} of {w['minutes']} minutes "
            "over the tier")


def print_report(doc: dict[str, object], console: Console) -> None:
    for run in doc["models"]:  # type: ignore[attr-defined]
        f = run["figures"]
        console.print(f"[bold]{run['model']}[/bold] in {run['region']} (tier {run['tier']}, peak "
                      f"{run['peak_qps']:g} req/s): {run['trace']['requests']} requests over "
                      f"{run['trace']['duration_s']:.0f} s")
        table = Table(show_header=True, title_justify="left")
        for col in ("item", "status", "figures behind it"):
            table.add_column(col, overflow="fold")
        for item in run["checklist"]:
            style = {"PASS": "green", "FAIL": "red"}.get(item["status"], "yellow")
            table.add_row(item["item"], f"[{style}]{item['status']}[/{style}]", item["detail"])
        console.print(table)
        reps, tts = f["replicas"], f["time_to_scale"]
        console.print(
            f"  TTFT p50/p95/p99 {_fmt(f['ttft_p50_s'])}/{_fmt(f['ttft_p95_s'])}/{_fmt(f['ttft_p99_s'])} s; "
            f"TPOT p50/p95/p99 {_fmt(f['tpot_p50_s'])}/{_fmt(f['tpot_p95_s'])}/{_fmt(f['tpot_p99_s'])} s; "
            f"attainment {_fmt(f['attainment'])}; failed {f['failed']}\n"
            f"  {_worst(f['worst_minute'])}\n"
            f"  replicas min/mean/max {reps['min']}/{_fmt(reps['mean'])}/{reps['max']}; "
            f"scale-ups {tts['count']} (mean {_fmt(tts['mean_s'])} s, max {_fmt(tts['max_s'])} s to ready); "
            f"GPU utilization {_fmt(f['gpu_utilization'])}; GPU-hours {_fmt(f['gpu_hours'])} "
            f"(whole nodes {_fmt(f['node_gpu_hours'])}, packed {_fmt(f['packed_node_gpu_hours'])})",
            markup=False)
        fired = [a for a in run["slo_alerts"] if a["first_fired_s"] is not None]
        console.print("  SLO burn-rate alerts (its PrometheusRule, evaluated every "
                      f"{EVALUATION_INTERVAL_S:g} s): " + ("; ".join(
                          f"{a['severity']} {a['burn_rate']:g}x ({a['long_window']}/{a['short_window']}) "
                          f"from {a['first_fired_s']:.0f} s, {a['evaluations_firing']} evaluations"
                          for a in fired) or "none fired"), markup=False)
        overdue = run["replicas_overdue"]
        fired_at = overdue["first_fired_s"]
        paged = f"paged at {fired_at:.0f} s" if fired_at is not None else "did not page"
        console.print(f"  {overdue['alert']} (a pod not Ready for {overdue['not_ready_window_s']} s and "
                      f"not being deleted): {paged}", markup=False)


def command(args: argparse.Namespace) -> int:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        config = load(args.stack)
        plan = load_plan(config.platform, config.source)
    except (StackFileError, SpecError) as problem:
        err.print(str(problem), markup=False)
        return EXIT_BAD_INPUT
    try:
        if not 0 < args.util_target <= 1:
            raise BadInput(f"--util-target {args.util_target}: expected a fraction in (0, 1]")
        if args.start < 0 or (args.duration is not None and args.duration <= 0):
            raise BadInput("--start must be >= 0 and --duration > 0")
        zone = parse_zone_loss(args.zone_loss) if args.zone_loss else None
        models = select(plan, args.model)
        base = read_trace(args.trace)
        runs = [simulate_one(plan, deployment(plan, mp), base, zone, args.start, args.duration,
                             args.util_target, err if err.is_terminal else None, args.scale)
                for mp in models]
    except (BadInput, SimulationInputError) as problem:
        err.print(f"rtip simulate: {problem}", markup=False)
        return EXIT_BAD_INPUT
    doc = {"stack": config.stack, "trace": args.trace, "models": runs,
           "passed": all(r["passed"] for r in runs)}
    if args.plot:
        try:
            plot(doc, Path(args.plot))
        except OSError as problem:
            err.print(f"rtip simulate: --plot {args.plot}: {problem.strerror or problem}", markup=False)
            return EXIT_BAD_INPUT
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        print_report(doc, Console(highlight=False, width=None if sys.stdout.isatty() else 200))
    return 0 if doc["passed"] else EXIT_FAIL


def plot(doc: dict[str, object], path: Path) -> None:
    """One column per model: latency percentiles, queue, replicas, GPU utilization over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib loads only when a plot is asked for

    runs = doc["models"]  # type: ignore[index]
    fig, axes = plt.subplots(4, len(runs), figsize=(6 * len(runs), 11), sharex="col", squeeze=False)
    for col, run in enumerate(runs):  # type: ignore[arg-type]
        f, targets = run["figures"], run["inputs"]["targets"]
        lat, s = f["latency_series"], f["series"]
        nan = float("nan")
        ax = axes[0][col]
        ax.set_title(f"{run['model']} in {run['region']}")
        for key, label in (("ttft_p50_s", "TTFT p50"), ("ttft_p99_s", "TTFT p99"),
                           ("tpot_p99_s", "TPOT p99")):
            ax.plot(lat["t"], [nan if v is None else v for v in lat[key]], label=label)
        ax.axhline(targets["ttft_s"], color="tab:red", linestyle="--", label="TTFT target")
        ax.axhline(targets["tpot_s"], color="tab:purple", linestyle=":", label="TPOT target")
        ax.set_yscale("log")
        ax.set_ylabel("seconds")
        ax.legend(fontsize=7)
        axes[1][col].plot(s["t"], s["waiting"], label="waiting")
        axes[1][col].plot(s["t"], s["running"], label="running")
        axes[1][col].set_ylabel("requests")
        axes[1][col].legend(fontsize=7)
        axes[2][col].step(s["t"], s["ready"], where="post", label="ready")
        axes[2][col].step(s["t"], s["starting"], where="post", label="starting")
        axes[2][col].set_ylabel("replicas")
        axes[2][col].legend(fontsize=7)
        axes[3][col].plot(s["t"], s["gpu_util"])
        axes[3][col].set_ylim(0, 1.05)
        axes[3][col].set_ylabel("GPU utilization")
        axes[3][col].set_xlabel("seconds")
        if run["zone_loss"]:
            for row in axes:
                row[col].axvline(run["zone_loss"]["at_s"], color="black", linewidth=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("simulate", help="replay a trace through the planned deployments and check the "
                                        "SLO (exit 1 when an item fails)")
    p.add_argument("stack", help="a stack name in stacks/ or a path to a Pulumi.<name>.yaml")
    p.add_argument("--trace", required=True, metavar="FILE",
                   help="Azure 2023 CSV, or CSV/JSONL with timestamp,input_tokens,output_tokens; "
                        "scaled so its busiest minute is the model's peak_qps")
    p.add_argument("--scale", choices=SCALINGS, default="rate",
                   help="reach each model's peak by rate on the trace's own clock (default) or by "
                   "compressing time")
    p.add_argument("--model", help="one model of the stack (default: every model, in its first region)")
    p.add_argument("--zone-loss", metavar="ZONE@SECONDS",
                   help=f"lose ZONE at SECONDS into the run ({FULLEST}: the zone with the most ready "
                        "replicas then)")
    p.add_argument("--start", type=float, default=0.0, metavar="SECONDS",
                   help="simulate the scaled trace from here (default 0)")
    p.add_argument("--duration", type=float, metavar="SECONDS",
                   help="simulate this much of the scaled trace (default: all of it)")
    p.add_argument("--util-target", type=float, default=UTIL_TARGET, metavar="FRACTION",
                   help=f"steady-state GPU utilization target (default {UTIL_TARGET})")
    p.add_argument("--json", action="store_true", help="print every figure as one JSON document")
    p.add_argument("--plot", metavar="PNG", help="draw latency, queue, replicas and GPU utilization")
    p.set_defaults(func=command)


__all__ = ["add_parser", "command", "parse_zone_loss", "plot", "read_trace", "simulate_one"]
