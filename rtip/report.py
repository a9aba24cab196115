"""The plan as data (the `--json` document) and as tables for a terminal."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from rtip.offline import Record
from serving.autoscaling import FALLBACK_BEHAVIOR
from serving.slo_rules import bounds
from stacks.model_plan import ModelRegionPlan
from stacks.plan import Plan

CLUSTER_TYPE_SUFFIX = ":Cluster"
POOL_TYPE = "rtip:k8s:GpuPool"
PLATFORM_TYPE = "rtip:platform:Platform"


def _clusters(record: Record) -> list[dict[str, Any]]:
    clusters = []
    for res in record.resources:
        if not (res.type.startswith("rtip:") and res.type.endswith(CLUSTER_TYPE_SUFFIX)):
            continue
        pools = [
            {
                "name": p.inputs["pool"],
                "machine_type": p.inputs["machineType"],
                "gpu": p.inputs["gpu"],
                "gpus_per_node": p.inputs["gpusPerNode"],
                "min_nodes": p.inputs["minNodes"],
                "max_nodes": p.inputs["maxNodes"],
                "zones": p.inputs["zones"],
                "sharing": p.inputs["sharing"],
                "capacity_type": p.inputs["capacityType"],
                # The node autoscaler that owns the pool between its floor and max_nodes.
                "autoscaler": p.inputs.get("autoscaler"),
                "labels": p.inputs["labels"],
                "taints": p.inputs["taints"],
                "nvme_path": p.inputs.get("nvmePath"),
                # Fields of the pool's cloud resources whose change replaces them (AKS MIG profile).
                "replace_on_change": sorted({f for c in record.children(p.urn)
                                             for f in c.options.get("replaceOnChanges", [])}),
            }
            for p in record.children(res.urn) if p.type == POOL_TYPE
        ]
        clusters.append({
            "name": res.name, "cloud": res.inputs["cloud"], "region": res.inputs["region"],
            "zones": res.inputs["zones"], "zones_down": res.inputs.get("zonesDown", []),
            "kubernetes_version": res.inputs["kubernetesVersion"],
            "pools": pools,
        })
    return clusters


def _model(plan: ModelRegionPlan) -> dict[str, Any]:
    return {
        "name": plan.model, "catalog": plan.catalog, "region": plan.region, "cloud": plan.cloud,
        "tier": str(plan.tier), "percentile": plan.tier_spec.percentile, "peak_qps": plan.peak_qps,
        "pool": plan.pool,
        "slice": plan.resource, "slice_memory_gb": plan.slice_memory_gb,
        "slice_mode": str(plan.slice.mode), "mig_profile": plan.slice.mig_profile,
        "tensor_parallel": plan.slice.tensor_parallel, "quantization": str(plan.quantization),
        "max_model_len": plan.max_model_len,
        # The longest response vLLM serves, and the scale-in drain that lets one finish.
        "max_output_tokens": plan.max_output_tokens, "drain_grace_s": plan.grace_s,
        "memory_needed_gb": round(plan.capacity.memory_needed_gb, 2),
        "replicas": {"min": plan.min_replicas, "max": plan.max_replicas,
                     "source": plan.replicas_source},
        "autoscaling": {"query": plan.autoscaling.query, "threshold": plan.autoscaling.threshold,
                        "polling_interval_s": plan.autoscaling.polling_interval_s,
                        "fallback_behavior": FALLBACK_BEHAVIOR,
                        "fallback_replicas": plan.autoscaling.fallback_replicas},
        "cost_per_replica_hour": plan.cost_per_replica_hour,
        "cold_start_s": plan.cold_start.to_json(),
        "throughput": {
            "qps": round(plan.capacity.qps, 3),
            # "simulated": serving.measured sized it; the closed form's screening answer beside it.
            "sized_by": plan.capacity.source,
            "closed_form_qps": (round(plan.capacity.closed_form_qps, 3)
                                if plan.capacity.closed_form_qps is not None else None),
            "in_flight": (round(plan.capacity.in_flight, 1)
                          if plan.capacity.in_flight is not None else None),
            "output_tokens_per_s": round(plan.capacity.output_tokens_per_s, 1),
            "batch": plan.capacity.batch,
            "ttft_ms": round(plan.capacity.ttft_tail_s * 1000, 1),
            "tpot_ms": round(plan.capacity.tpot_tail_s * 1000, 1),
        },
        "headroom": round(plan.headroom, 3),
        "source_uri": plan.source_uri,
    }


def _qps(throughput: dict[str, Any]) -> str:
    """A replica's sized rate, with the closed form's screening answer where the simulator sized it."""
    closed = throughput.get("closed_form_qps")
    return f"{throughput['qps']:g}" + (f" ({closed:g})" if closed is not None else "")


MODEL_DEPLOYMENT_TYPE = "rtip:k8s:ModelDeployment"


def _add_deployments(record: Record, models: list[dict[str, Any]],
                     clusters: list[dict[str, Any]]) -> None:
    """What each model's deployment on its region's cluster runs, as the record has it: the
    runtime image, whether weights come from the NVMe cache, and the component's notes."""
    cluster_of = {c["region"]: c["name"] for c in clusters}
    deployed = {(r.inputs["cluster"], r.inputs["model"]): r.inputs
                for r in record.resources if r.type == MODEL_DEPLOYMENT_TYPE}
    for m in models:
        got = deployed.get((cluster_of.get(m["region"]), m["name"]))
        if got is not None:
            m["deployment"] = {"runtime_image": got["runtimeImage"], "model_cache": got["modelCache"],
                               "notes": got["notes"]}


def _add_pool_plans(plan: Plan, clusters: list[dict[str, Any]]) -> None:
    """Each pool's planned nodes (at peak and at the models' replica floor) and what the stack
    stated, so the plan shows both."""
    by_region = {c["region"]: c for c in clusters}
    for region in plan.regions:
        cluster = by_region[region.name]
        cluster["packing"] = region.packing_method
        for pool in cluster["pools"]:
            d = region.pool(pool["name"])
            pool.update({"planned": d.planned, "stated_min_nodes": d.stated_min_nodes,
                         "nodes_at_peak": d.nodes_at_peak, "nodes_at_floor": d.nodes_at_floor,
                         "cost_per_hour_at_peak": d.cost_per_hour_at_peak})


def _tiers(plan: Plan) -> list[dict[str, Any]]:
    used = {m.tier for m in plan.models} | {plan.spec.default_tier}
    return [{"name": t.tier, "ttft_ms": t.ttft_ms, "tpot_ms": t.tpot_ms, "percentile": t.percentile,
             "availability": t.availability, "burst_headroom": t.burst_headroom,
             "allows_time_slicing": t.allows_time_slicing, "stack_defined": name in plan.spec.tiers,
             "used": name in used,
             # Where the SLO alerts count a miss: vLLM's bucket at or below each target.
             "alert_bounds_ms": dict(zip(("ttft", "tpot"), (round(b * 1000, 6) for b in bounds(t)),
                                         strict=True))}
            for name, t in sorted(plan.tiers.items())]


def deploy_checks(findings: Sequence[Any]) -> list[dict[str, str]]:
    """Deploy-time findings (rtip.deploycheck) as the JSON document lists them."""
    return [{"check": f.check, "severity": str(f.severity), "resource": f.urn, "message": f.message}
            for f in findings]


def document(plan: Plan, record: Record, findings: Sequence[Any] = ()) -> dict[str, Any]:
    """The plan as one JSON document: what `rtip plan --json` prints and `--out` saves."""
    spec = plan.spec
    clusters = _clusters(record)
    _add_pool_plans(plan, clusters)
    models = plan.models
    model_rows = [_model(m) for m in models]
    _add_deployments(record, model_rows, clusters)
    counts = Counter(r.type for r in record.resources)
    registries = [
        {"cloud": r.type.split(":")[1], "source": r.inputs["source"], "regions": r.inputs["regions"]}
        for r in record.resources if r.type.startswith("rtip:") and r.type.endswith(":Registries")
    ]
    return {
        "stack": record.stack,
        "environment": spec.environment,
        "posture": {k: (str(v) if k == "environment" else v) for k, v in vars(plan.posture).items()},
        "tiers": _tiers(plan),
        # Where the models' SLO alerts go: severity -> the secret config value holding its webhook.
        "alert_webhooks": dict(spec.alert_webhooks),
        "heartbeat_webhooks": dict(spec.heartbeat_webhooks),
        "clusters": clusters,
        "registries": registries,
        "models": model_rows,
        # GPU $/h of the models' slices: at peak (max replicas) and at the floor (min replicas).
        "cost_per_hour": round(sum(m.cost_per_hour_at_max for m in models), 2),
        # What the GPU nodes cost at peak: whole nodes, with the capacity packing leaves unused.
        "node_cost_per_hour": round(sum(p.get("cost_per_hour_at_peak", 0.0) for c in clusters
                                        for p in c["pools"]), 2),
        "cost_per_hour_min": round(sum(m.cost_per_hour_at_min for m in models), 2),
        "resource_counts": dict(sorted(counts.items())),
        "resources": [r.to_json() for r in record.resources],
        "outputs": record.outputs,
        "warnings": record.warnings,
        "deploy_checks": deploy_checks(findings),
    }


def print_tables(doc: dict[str, Any], console: Console) -> None:
    console.print(f"[bold]rtip plan[/bold] stack [cyan]{doc['stack']}[/cyan] "
                  f"({doc['environment']}): {len(doc['resources'])} resources")
    clusters = Table(title="Clusters", title_justify="left")
    for col in ("cluster", "cloud", "region", "zones", "k8s"):
        clusters.add_column(col)
    for c in doc["clusters"]:
        down = f" (down: {', '.join(c['zones_down'])}; out of the NodePools)" if c["zones_down"] else ""
        clusters.add_row(c["name"], c["cloud"], c["region"], ", ".join(c["zones"]) + down,
                         c["kubernetes_version"])
    console.print(clusters)

    tiers = Table(title="SLO tiers", title_justify="left")
    for col in ("tier", "TTFT ms", "TPOT ms", "at", "availability", "burst headroom", "time-slicing",
                "defined by", "alerts: a miss past (ms)"):
        tiers.add_column(col)
    for t in doc["tiers"]:
        if t["used"]:
            tiers.add_row(t["name"], f"{t['ttft_ms']:g}", f"{t['tpot_ms']:g}", f"p{t['percentile']:g}",
                          f"{t['availability']:g}", f"{t['burst_headroom']:g}",
                          "yes" if t["allows_time_slicing"] else "no",
                          "stack" if t["stack_defined"] else "built-in",
                          " / ".join(f"{v:g}" for v in t["alert_bounds_ms"].values()))
    console.print(tiers)
    hooks, beats = doc["alert_webhooks"], doc["heartbeat_webhooks"]
    console.print("SLO alerts (latency burn per model, serving/slo_rules.py; the gateway's availability, "
                  "serving/gateway_slo.py): " + (
        ", ".join(f"{s} to the webhook in secret {k}" for s, k in sorted(hooks.items())) if hooks
        else "no alert_webhooks, so they reach Alertmanager and notify no one") + "; Watchdog " + (
        "heartbeat per cluster to " + ", ".join(f"{r}: secret {k}" for r, k in beats.items()) if beats
        else "to no one (no heartbeat_webhooks: a silent Prometheus or Alertmanager goes unnoticed)"),
        markup=False)

    pools = Table(title="GPU pools", title_justify="left")
    for col in ("cluster", "pool", "machine type", "GPU", "GPUs/node", "nodes min-max", "at peak",
                "node autoscaler", "sharing", "zones", "NVMe cache", "$/h at peak", "change replaces"):
        pools.add_column(col)
    for c in doc["clusters"]:
        for p in c["pools"]:
            sharing = p["sharing"] + (" (planned)" if p.get("planned") else "")
            floor = f"{p['min_nodes']}-{p['max_nodes']}"
            if p.get("stated_min_nodes") != p["min_nodes"]:
                floor += f" (stated min {p.get('stated_min_nodes')})"
            pools.add_row(c["name"], p["name"], p["machine_type"], p["gpu"],
                          str(p["gpus_per_node"]), floor,
                          str(p.get("nodes_at_peak", "-")), p.get("autoscaler") or "-", sharing,
                          str(len(p["zones"])),
                          p["nvme_path"] or "none", f"{p.get('cost_per_hour_at_peak', 0.0):,.2f}",
                          ", ".join(p["replace_on_change"]) or "-")
    console.print(pools)

    models = Table(title="Models", title_justify="left")
    for col in ("model", "region", "tier", "pool", "slice", "slice GB", "needs GB", "TP", "weights",
                "QPS/replica (closed form)", "TTFT ms (tail)", "TPOT ms (tail)", "replicas", "$/h each",
                "cold start s", "warm node s"):
        models.add_column(col)
    for m in doc["models"]:
        models.add_row(m["name"], m["region"], m["tier"], m["pool"], m["slice"],
                       f"{m['slice_memory_gb']:g}", f"{m['memory_needed_gb']:g}",
                       str(m["tensor_parallel"]), m["quantization"],
                       _qps(m["throughput"]), f"{m['throughput']['ttft_ms']:g}",
                       f"{m['throughput']['tpot_ms']:g}",
                       f"{m['replicas']['min']}-{m['replicas']['max']}",
                       f"{m['cost_per_replica_hour']:.2f}", f"{m['cold_start_s']['total_s']:g}",
                       f"{m['cold_start_s']['warm_node_s']:g}")
    console.print(models)
    for m in doc["models"]:
        for note in m.get("deployment", {}).get("notes", []):
            console.print(f"[yellow]note:[/yellow] {m['name']} in {m['region']}: {note}")
    console.print(f"GPU cost of the models: ${doc['cost_per_hour']:,.2f}/h at peak, "
                  f"${doc['cost_per_hour_min']:,.2f}/h at the replica floor; GPU nodes at peak "
                  f"(whole nodes, as packed): ${doc['node_cost_per_hour']:,.2f}/h")

    stores = Table(title="Registries and weights stores", title_justify="left")
    for col in ("cloud", "source region", "copies in"):
        stores.add_column(col)
    for r in doc["registries"]:
        stores.add_row(r["cloud"], r["source"], ", ".join(r["regions"]))
    console.print(stores)

    counts = Table(title="Resources by type", title_justify="left")
    counts.add_column("type")
    counts.add_column("count", justify="right")
    for t, n in doc["resource_counts"].items():
        counts.add_row(t, str(n))
    console.print(counts)


__all__ = ["document", "print_tables"]
