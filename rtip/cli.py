"""`rtip`: plan a stack offline.

Exit status: 0 planned, 2 bad input (stack file or spec), 1 the engine rejected the program.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console

from rtip import offline, render, report
from rtip.stackfile import StackFileError, load
from stacks.loader import SpecError, load_spec
from stacks.plan import plan_models

EXIT_BAD_INPUT = 2
EXIT_ENGINE = 1


def _plan(args: argparse.Namespace) -> int:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        config = load(args.stack)
        spec = load_spec(config.platform, config.source)
    except (StackFileError, SpecError) as problem:
        err.print(str(problem), markup=False)
        return EXIT_BAD_INPUT
    try:
        record = offline.run(config)
    except offline.EngineError as problem:
        err.print(f"{config.source}: engine: {problem}", markup=False)
        return EXIT_ENGINE
    doc = report.document(spec, record, plan_models(spec))
    if args.out:
        written = render.write(Path(args.out), doc, record)
        err.print(f"wrote {len(written)} files to {args.out}", markup=False)
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    else:
        # Off a terminal (pipes, CI logs) rich would wrap at 80 columns and cut cells.
        width = None if sys.stdout.isatty() else 200
        report.print_tables(doc, Console(highlight=False, width=width))
    for warning in record.warnings:
        err.print(f"warning: {warning}", markup=False)
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="rtip", description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="run the Pulumi program offline and print the plan")
    plan.add_argument("stack", help="a stack name in stacks/ or a path to a Pulumi.<name>.yaml")
    plan.add_argument("--json", action="store_true", help="print the plan as one JSON document")
    plan.add_argument("--out", metavar="DIR", help="write plan.json and the manifests to DIR")
    plan.set_defaults(func=_plan)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
