"""Request-level discrete-event simulator of one model's deployment in one region.

Pure Python (numpy, scipy); imports nothing from the Pulumi side. Modules, one purpose each:
- `config`: frozen inputs (step-time rule, engine limits, fleet, cold start, targets);
- `engine`: one replica as vLLM 0.11.0's V1 scheduler runs it; `kvcache`: its KV blocks;
- `router`: round-robin, least-loaded, prefix-aware;
- `metrics`: the replica's vLLM metrics; `prometheus`: the simulated Prometheus's storage,
  rate() and quantile arithmetic; `promql`: the PromQL parser and evaluator;
- `hpa`, `policies`: the HPA algorithm, the KEDA ScaledObject and baseline autoscalers;
- `fleet`: nodes, zones, cold starts, scale-in, zone failures;
- `traces`: trace loaders, rescaling and generators;
- `sim`: the event loop; `results`: what a run reports.
"""

from serving.simulator.config import (
    BLOCK_SIZE,
    FULLEST,
    ColdStartSpec,
    EngineConfig,
    Failover,
    FleetConfig,
    StepTime,
    Targets,
    ZoneFailure,
    default_batch_limits,
)
from serving.simulator.policies import (
    Clairvoyant,
    GpuUtilizationHpa,
    KedaAutoscaler,
    KnativeKpa,
    StaticPolicy,
)
from serving.simulator.results import ReplicaStart, SimResult
from serving.simulator.router import LeastLoaded, PrefixAware, RoundRobin, make_router
from serving.simulator.sim import SimConfig, Simulation, simulate
from serving.simulator.traces import (
    Trace,
    diurnal,
    load_azure_2023,
    load_csv,
    load_jsonl,
    poisson,
    servegen_bursty,
)

__all__ = [
    "BLOCK_SIZE",
    "FULLEST",
    "Clairvoyant",
    "ColdStartSpec",
    "EngineConfig",
    "Failover",
    "FleetConfig",
    "GpuUtilizationHpa",
    "KedaAutoscaler",
    "KnativeKpa",
    "LeastLoaded",
    "PrefixAware",
    "ReplicaStart",
    "RoundRobin",
    "SimConfig",
    "SimResult",
    "Simulation",
    "StaticPolicy",
    "StepTime",
    "Targets",
    "Trace",
    "ZoneFailure",
    "default_batch_limits",
    "diurnal",
    "load_azure_2023",
    "load_csv",
    "load_jsonl",
    "make_router",
    "poisson",
    "servegen_bursty",
    "simulate",
]
