"""How fast the request-level simulator runs: the Azure 2023 conversation trace (19,366 requests,
~58 min) through Llama-3.1-8B replicas on A100-80GB, static and under the KEDA autoscaler.

Prints one row per scenario and writes benchmarks/results/simulator_speed.json. The goal (the
simulator issue) is a 19k-request trace in under 10 s on one core; each scenario is timed best of
--repeat runs, in this process, single-threaded.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from serving.autoscaling import Autoscaling  # noqa: E402
from serving.capacity import kv_token_capacity  # noqa: E402
from serving.hardware import GpuModel  # noqa: E402
from serving.models import CATALOG  # noqa: E402
from serving.profiles import SliceKind, profile  # noqa: E402
from serving.simulator import (  # noqa: E402
    ColdStartSpec,
    EngineConfig,
    FleetConfig,
    KedaAutoscaler,
    SimConfig,
    StepTime,
    Targets,
    load_azure_2023,
    simulate,
)

TRACE = ROOT.parent / "shared" / "traces" / "azure2023_AzureLLMInferenceTrace_conv.csv"
OUT = ROOT / "benchmarks" / "results" / "simulator_speed.json"
MODEL = "llama-3.1-8b-instruct"
# MLPerf Inference Llama-3.1-8B server p99 limits (FACTS.md section 7).
TARGETS = Targets(ttft_s=2.0, tpot_s=0.1)


def _engine() -> EngineConfig:
    card = CATALOG[MODEL]
    kind = SliceKind(GpuModel.A100_80GB)
    prof = profile(card, kind)
    kv_tokens = kv_token_capacity(card, card.variant_weights_gb(prof.quantization), kind.memory_gb)
    return EngineConfig.vllm_defaults(StepTime.from_profile(prof), kv_tokens // 16, 80.0,
                                      "NVIDIA A100-SXM4-80GB")


def _keda() -> KedaAutoscaler:
    behavior = {
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": "Percent", "value": 100, "periodSeconds": 15},
            {"type": "Pods", "value": 4, "periodSeconds": 15}]},
        "scaleDown": {"stabilizationWindowSeconds": 600, "selectPolicy": "Min", "policies": [
            {"type": "Pods", "value": 1, "periodSeconds": 60}]},
    }
    auto = Autoscaling(model=MODEL, query=f'sum(vllm:num_requests_waiting{{model_name="{MODEL}"}})',
                       threshold=2, polling_interval_s=15, cooldown_s=300, min_replicas=2, max_replicas=8,
                       fallback_replicas=8, behavior=behavior)
    return KedaAutoscaler(auto.scaled_object_spec(f"{MODEL}-predictor", "http://prometheus:9090"))


def _scenarios() -> list[tuple[str, SimConfig, str, object]]:
    engine = _engine()
    cold = ColdStartSpec(full_s=731.9, warm_s=209.0, node_ready_s=410.0)
    static = SimConfig(engine=engine, fleet=FleetConfig(zones=("a", "b", "c"), initial_replicas=3,
                                                         cold_start=cold), targets=TARGETS, model_name=MODEL)
    scaled = SimConfig(engine=engine, fleet=FleetConfig(zones=("a", "b", "c"), initial_replicas=2,
                                                         cold_start=cold), targets=TARGETS, model_name=MODEL)
    return [
        ("static-3-least-loaded", static, "least-loaded", None),
        ("static-3-round-robin", static, "round-robin", None),
        ("keda-2..8-least-loaded", scaled, "least-loaded", "keda"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    trace = load_azure_2023(TRACE)
    rows = []
    print(f"{'scenario':28} {'requests':>8} {'best s':>7} {'req/s':>8} {'attain':>7} {'ttft p99':>9} "
          f"{'tpot p99':>9} {'GPU-h':>6}")
    for name, cfg, router, policy in _scenarios():
        best = float("inf")
        summary: dict[str, object] = {}
        for _ in range(args.repeat):
            auto = _keda() if policy == "keda" else None
            t0 = time.perf_counter()
            res = simulate(trace, cfg, router=router, autoscaler=auto)
            best = min(best, time.perf_counter() - t0)
            summary = res.summary()
        rows.append({"scenario": name, "requests": len(trace), "best_s": round(best, 3),
                     "requests_per_s": round(len(trace) / best), **summary})
        print(f"{name:28} {len(trace):8d} {best:7.2f} {len(trace) / best:8.0f} {summary['attainment']:7.4f} "
              f"{summary['ttft_p99_s']:9.3f} {summary['tpot_p99_s']:9.4f} {summary['gpu_hours']:6.2f}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({
        "trace": TRACE.name, "model": MODEL, "gpu": "A100-80GB", "goal_s": 10.0,
        "python": platform.python_version(), "machine": platform.machine(), "rows": rows,
    }, indent=2, default=str) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
