"""`rtip`: plan a stack offline; print the stack file's JSON Schema.

Exit status: 0 done, 2 bad input (stack file, spec, weights folder), 1 the engine rejected the
program or a deploy check failed, 3 `models status` found a region whose copy is not ready yet.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rtip import check as policy_check
from rtip import deploycheck, render, report, weights
from rtip import images as region_images
from rtip.recorded import EXIT_BAD_INPUT, EXIT_ENGINE, record_or_status
from rtip.simulate import add_parser as add_simulate_parser
from rtip.stackfile import StackConfig, StackFileError, json_schema, load
from stacks.loader import SpecError, load_spec
from stacks.schema import StackSpec


def _stack(stack: str, err: Console) -> tuple[StackConfig, StackSpec] | None:
    """The stack's config and validated spec, or None after printing every problem."""
    try:
        config = load(stack)
        return config, load_spec(config.platform, config.source)
    except (StackFileError, SpecError) as problem:
        err.print(str(problem), markup=False)
        return None


def _plan(args: argparse.Namespace) -> int:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    got = record_or_status(args.stack, err)
    if isinstance(got, int):
        return got
    config, record = got
    # Would it apply, schedule and run: the checks read the record `pulumi up` would apply.
    findings = deploycheck.run_checks(record)
    doc = report.document(record.plan, record, findings)
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
    # Notes (what a check could not look at) go to --json only; errors and warnings print here.
    for finding in (f for f in findings if f.severity is not deploycheck.Severity.INFO):
        err.print(f"{config.source}: {finding.severity} [{finding.check}] {finding.urn}: "
                  f"{finding.message}", markup=False)
    errors = [f for f in findings if f.severity is deploycheck.Severity.ERROR]
    if errors:
        err.print(f"{config.source}: {len(errors)} deploy check(s) failed: `pulumi up` would not "
                  "apply, schedule or run as planned", markup=False)
        return EXIT_ENGINE
    return 0


def _publish(args: argparse.Namespace) -> int:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    loaded = _stack(args.stack, err)
    if loaded is None:
        return EXIT_BAD_INPUT
    spec = loaded[1]
    try:
        result = weights.publish(spec, args.model, Path(args.source))
    except weights.WeightsError as problem:
        err.print(f"rtip models publish: {problem}", markup=False)
        return EXIT_BAD_INPUT
    what = "already current" if result.unchanged else f"published (was {result.previous or 'none'})"
    print(f"{result.model} version {result.version}: {result.files} files, {result.bytes} bytes "
          f"in s3://{result.bucket}: {what}")
    return 0


def _status(args: argparse.Namespace) -> int:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    loaded = _stack(args.stack, err)
    if loaded is None:
        return EXIT_BAD_INPUT
    spec = loaded[1]
    names = [args.model] if args.model else [m.name for m in spec.models]
    if args.model and args.model not in {m.name for m in spec.models}:
        err.print(f"rtip models status: model {args.model!r} is not in this stack", markup=False)
        return EXIT_BAD_INPUT
    try:
        results = [weights.status(spec, n) for n in names]
    except weights.WeightsError as problem:
        err.print(f"rtip models status: {problem}", markup=False)
        return EXIT_BAD_INPUT
    doc = [{"model": r.model, "version": r.version, "regions": [
        {"region": g.region, "bucket": g.bucket, "state": g.state, "files": g.files,
         "replicated": g.replicated, "problems": list(g.problems)} for g in r.regions]} for r in results]
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        table = Table(title="Weights replication", title_justify="left")
        for col in ("model", "version", "region", "state", "files", "problems"):
            table.add_column(col)
        for r in doc:
            if not r["regions"]:
                table.add_row(r["model"], "-", "-", "not published", "-", "")
            for g in r["regions"]:
                table.add_row(r["model"], r["version"], g["region"], g["state"],
                              f"{g['replicated']}/{g['files']}", "; ".join(g["problems"]))
        Console(highlight=False, width=None if sys.stdout.isatty() else 200).print(table)
    return 0 if all(g["state"] == "ready" for r in doc for g in r["regions"]) else 3


def _schema(args: argparse.Namespace) -> int:
    text = json.dumps(json_schema(), indent=2) + "\n"
    if not args.out:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.out).write_text(text)
    except OSError as problem:
        Console(stderr=True, highlight=False).print(f"rtip schema: {args.out}: {problem.strerror}",
                                                    markup=False)
        return EXIT_BAD_INPUT
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="rtip", description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="run the Pulumi program offline and print the plan")
    plan.add_argument("stack", help="a stack name in stacks/ or a path to a Pulumi.<name>.yaml")
    plan.add_argument("--json", action="store_true", help="print the plan as one JSON document")
    plan.add_argument("--out", metavar="DIR", help="write plan.json and the manifests to DIR")
    plan.set_defaults(func=_plan)

    schema = sub.add_parser("schema", help="print the stack file's JSON Schema (for editors: the "
                                           "yaml-language-server line of each stack file)")
    schema.add_argument("--out", metavar="FILE", help="write it to FILE (stacks/stack.schema.json)")
    schema.set_defaults(func=_schema)

    check = sub.add_parser("check", help="run the policy pack over the offline plan (exit 1 on a "
                                          "mandatory violation)")
    check.add_argument("stack", help="a stack name in stacks/ or a path to a Pulumi.<name>.yaml")
    check.add_argument("--json", action="store_true", help="print the violations as JSON")
    check.set_defaults(func=lambda a: policy_check.run_command(a.stack, a.json))

    images = sub.add_parser("images", help="per region, every toolkit image the plan runs, the "
                                           "reference its cluster pulls and how it gets there "
                                           "(with the copy commands of mirrored ones)")
    images.add_argument("stack", help="a stack name in stacks/ or a path to a Pulumi.<name>.yaml")
    images.add_argument("--json", action="store_true", help="print them as one JSON document")
    images.set_defaults(func=lambda a: region_images.run_command(a.stack, a.json))

    models = sub.add_parser("models", help="publish model weights and check their replication")
    msub = models.add_subparsers(dest="models_command", required=True)
    pub = msub.add_parser("publish", help="upload a model folder to the stack's weights store")
    pub.add_argument("stack")
    pub.add_argument("model", help="a model name of the stack")
    pub.add_argument("--from", dest="source", required=True, metavar="DIR",
                     help="the model folder (config.json, *.safetensors, tokenizer files)")
    pub.set_defaults(func=_publish)
    st = msub.add_parser("status", help="per region, whether the current version has replicated "
                                        "(exit 3 while any region is not ready)")
    st.add_argument("stack")
    st.add_argument("model", nargs="?")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=_status)
    add_simulate_parser(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
