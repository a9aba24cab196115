"""How long `rtip plan` takes as stacks grow: regions x GPU pools x models, up to >1,000 resources.

Prints one row per stack size and writes benchmarks/results/plan_speed.json. Each size is timed
end to end as the CLI runs it (read stack file, validate, run the program under the offline
engine, build the plan document), best of --repeat runs.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtip import offline, report  # noqa: E402
from rtip.stackfile import load  # noqa: E402
from serving.geo import ZONES  # noqa: E402
from serving.hardware import Cloud  # noqa: E402

POOL_SHAPES = {
    "aws": [
        ("g6.2xlarge", {"mode": "time_slice", "replicas": 2}),
        ("p5.48xlarge", {"mode": "mig", "layout": "all-balanced"}),
        ("g6e.12xlarge", {"mode": "whole"}),
        ("p5.48xlarge", {"mode": "whole"}),
    ],
    "gcp": [
        ("g2-standard-8", {"mode": "time_slice", "replicas": 2}),
        ("a3-highgpu-8g", {"mode": "mig", "layout": "all-3g.40gb"}),
        ("g2-standard-48", {"mode": "whole"}),
        ("a3-highgpu-8g", {"mode": "whole"}),
    ],
    "azure": [
        ("Standard_NC40ads_H100_v5", {"mode": "mig", "layout": "all-2g.24gb"}),
        ("Standard_ND96isr_MI300X_v5", {"mode": "whole"}),
        ("Standard_NC24ads_A100_v4", {"mode": "whole"}),
        ("Standard_ND96isr_H100_v5", {"mode": "whole"}),
    ],
}
MODELS = ["llama-3.2-1b-instruct", "llama-3.2-3b-instruct", "llama-3.1-8b-instruct",
          "qwen2.5-7b-instruct"]
# (regions, pools per region, models); regions are taken round-robin from AWS, GCP and Azure in
# the multi-cloud series, from AWS alone in the single-cloud one.
SIZES = [(1, 1, 1), (1, 4, 4), (2, 8, 8), (4, 8, 8), (4, 16, 16), (8, 16, 16), (8, 32, 32)]
MULTI_CLOUD = ["aws", "gcp", "azure"]


def _regions(count: int, clouds: list[str]) -> list[tuple[str, str]]:
    pools = {c: list(ZONES[Cloud(c)]) for c in clouds}
    picked: list[tuple[str, str]] = []
    i = 0
    while len(picked) < count:
        cloud = clouds[i % len(clouds)]
        if pools[cloud]:
            picked.append((cloud, pools[cloud].pop(0)))
        i += 1
    return picked


def _region(i: int, cloud: str, region: str, pools: int) -> dict:
    doc = {"cloud": cloud, "region": region, "zones": list(ZONES[Cloud(cloud)][region][:3]),
           "network": {"cidr": f"10.{i}.0.0/16"},
           "gpu_pools": [{"name": f"pool-{j}", "machine_type": POOL_SHAPES[cloud][j % 4][0],
                          "min_nodes": 0, "max_nodes": 3, "sharing": POOL_SHAPES[cloud][j % 4][1]}
                         for j in range(pools)]}
    if cloud == "gcp":
        doc["project"] = "rtip-bench-project"
        doc["project_number"] = "123456789012"  # staging encrypts secrets with a customer key
    return doc


def stack(regions: int, pools: int, models: int, clouds: list[str] | None = None) -> dict:
    return {"config": {"rtip:platform": {
        "environment": "staging",
        "regions": [_region(i, c, r, pools) for i, (c, r) in enumerate(_regions(regions, clouds or ["aws"]))],
        "models": [{"name": f"model-{k}", "catalog": MODELS[k % len(MODELS)], "peak_qps": 1 + k}
                   for k in range(models)],
    }}}


def plan_once(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    config = load(str(path))
    record = offline.run(config)
    report.document(record.plan, record)
    return time.perf_counter() - start, len(record.resources)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "plan_speed.json"))
    args = parser.parse_args()
    rows = []

    def measure(series: str, path: Path, regions: int, pools: int, models: int) -> None:
        times, count = [], 0
        for _ in range(args.repeat):
            seconds, count = plan_once(path)
            times.append(seconds)
        best = min(times)
        rows.append({"series": series, "regions": regions, "pools_per_region": pools, "models": models,
                     "resources": count, "seconds": round(best, 4),
                     "ms_per_resource": round(1000 * best / count, 3)})
        print(f"{series:>11}: {regions:>2} regions x {pools:>2} pools x {models:>2} models: {count:>5} "
              f"resources {best:7.3f} s  {1000 * best / count:6.3f} ms/resource", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        plan_once(ROOT / "stacks" / "Pulumi.prod.yaml")  # warm the imports of all three clouds
        measure("prod stack", ROOT / "stacks" / "Pulumi.prod.yaml", 4, 2, 4)
        for series, clouds in (("aws", ["aws"]), ("multi-cloud", MULTI_CLOUD)):
            for regions, pools, models in SIZES:
                path = Path(tmp) / f"Pulumi.bench-{series}-{regions}-{pools}-{models}.yaml"
                path.write_text(yaml.safe_dump(stack(regions, pools, models, clouds)))
                measure(series, path, regions, pools, models)
    xs, ys = [r["resources"] for r in rows], [r["seconds"] for r in rows]  # every series, one fit
    slope, intercept = statistics.linear_regression(xs, ys)
    r2 = statistics.correlation(xs, ys) ** 2
    summary = {
        "max_resources": max(xs),
        "max_ms_per_resource": max(r["ms_per_resource"] for r in rows),
        "fit_ms_per_resource": round(1000 * slope, 3),
        "fit_intercept_s": round(intercept, 4),
        "fit_r2": round(r2, 5),
        "target_ms_per_resource": 5.0,
    }
    print(f"linear fit: {summary['fit_ms_per_resource']} ms/resource + {summary['fit_intercept_s']} s, "
          f"r^2 = {summary['fit_r2']}")
    result = {"benchmark": "plan_speed", "python": platform.python_version(),
              "machine": platform.machine(), "repeat": args.repeat, "rows": rows, "summary": summary}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
