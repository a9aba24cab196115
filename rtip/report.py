"""The plan as data (the `--json` document) and as tables for a terminal."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.table import Table

from rtip.offline import Record
from stacks.layout import plan_region
from stacks.plan import ModelRegionPlan
from stacks.schema import StackSpec

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
            "zones": res.inputs["zones"], "kubernetes_version": res.inputs["kubernetesVersion"],
            "built": True, "pools": pools,
        })
    return clusters


def _model(plan: ModelRegionPlan, spec: StackSpec) -> dict[str, Any]:
    return {
        "name": plan.model, "catalog": plan.catalog, "region": plan.region, "cloud": plan.cloud,
        "tier": str(plan.tier), "peak_qps": plan.peak_qps, "pool": plan.pool,
        "slice": plan.resource, "slice_memory_gb": plan.slice_memory_gb,
        "slice_mode": str(plan.slice.mode), "mig_profile": plan.slice.mig_profile,
        "tensor_parallel": plan.slice.tensor_parallel, "quantization": str(plan.quantization),
        "max_model_len": plan.max_model_len,
        "memory_needed_gb": round(plan.capacity.memory_needed_gb, 2),
        "replicas": {"min": plan.min_replicas, "max": plan.max_replicas,
                     "source": plan.replicas_source},
        "autoscaling": {"query": plan.autoscaling.query, "threshold": plan.autoscaling.threshold,
                        "polling_interval_s": plan.autoscaling.polling_interval_s,
                        "fallback_replicas": plan.autoscaling.fallback_replicas},
        "cost_per_replica_hour": plan.cost_per_replica_hour,
        "cold_start_s": plan.cold_start.to_json(),
        "throughput": {
            "qps": round(plan.capacity.qps, 3),
            "output_tokens_per_s": round(plan.capacity.output_tokens_per_s, 1),
            "batch": plan.capacity.batch,
            "ttft_p99_ms": round(plan.capacity.ttft_p99_s * 1000, 1),
            "tpot_p99_ms": round(plan.capacity.tpot_p99_s * 1000, 1),
        },
        "headroom": round(plan.headroom, 3),
        "source_uri": plan.source_uri,
    }


MODEL_DEPLOYMENT_TYPE = "rtip:k8s:ModelDeployment"


def _add_deployments(record: Record, models: list[dict[str, Any]],
                     clusters: list[dict[str, Any]]) -> None:
    """What each model's deployment on its region's cluster runs, as the record has it: the
    runtime image, whether weights come from the NVMe cache, and the component's notes."""
    cluster_of = {c["region"]: c["name"] for c in clusters if c["built"]}
    deployed = {(r.inputs["cluster"], r.inputs["model"]): r.inputs
                for r in record.resources if r.type == MODEL_DEPLOYMENT_TYPE}
    for m in models:
        got = deployed.get((cluster_of.get(m["region"]), m["name"]))
        if got is not None:
            m["deployment"] = {"runtime_image": got["runtimeImage"], "model_cache": got["modelCache"],
                               "notes": got["notes"]}


def _add_pool_plans(spec: StackSpec, clusters: list[dict[str, Any]]) -> None:
    """Each built pool's planned nodes: at peak and at the models' replica floor."""
    by_region = {c["region"]: c for c in clusters if c["built"]}
    for region in spec.regions:
        cluster = by_region.get(region.region)
        if cluster is None:
            continue
        layout = plan_region(spec, region)
        cluster["packing"] = layout.packing.method
        decided = {d.pool: d for d in layout.pools}
        for pool in cluster["pools"]:
            d = decided[pool["name"]]
            pool.update({"planned": d.planned, "nodes_at_peak": d.nodes_at_peak,
                         "nodes_at_floor": d.nodes_at_floor,
                         "cost_per_hour_at_peak": d.cost_per_hour_at_peak})


def document(spec: StackSpec, record: Record, models: list[ModelRegionPlan]) -> dict[str, Any]:
    """The plan as one JSON document: what `rtip plan --json` prints and `--out` saves."""
    platform = next((r for r in record.resources if r.type == PLATFORM_TYPE), None)
    unbuilt = list(platform.inputs.get("unbuiltRegions", [])) if platform else []
    clusters = _clusters(record)
    for region in spec.regions:
        if f"{region.cloud}/{region.region}" in unbuilt:
            clusters.append({
                "name": None, "cloud": region.cloud, "region": region.region,
                "zones": list(region.zones), "kubernetes_version": spec.kubernetes_version,
                "built": False, "pools": [],
            })
    _add_pool_plans(spec, clusters)
    model_rows = [_model(m, spec) for m in models]
    _add_deployments(record, model_rows, clusters)
    counts = Counter(r.type for r in record.resources)
    registries = [
        {"cloud": r.type.split(":")[1], "source": r.inputs["source"], "regions": r.inputs["regions"]}
        for r in record.resources if r.type.startswith("rtip:") and r.type.endswith(":Registries")
    ]
    return {
        "stack": record.stack,
        "environment": spec.environment,
        "clusters": clusters,
        "unbuilt_regions": unbuilt,
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
    }


def print_tables(doc: dict[str, Any], console: Console) -> None:
    console.print(f"[bold]rtip plan[/bold] stack [cyan]{doc['stack']}[/cyan] "
                  f"({doc['environment']}): {len(doc['resources'])} resources")
    clusters = Table(title="Clusters", title_justify="left")
    for col in ("cluster", "cloud", "region", "zones", "k8s", "built"):
        clusters.add_column(col)
    for c in doc["clusters"]:
        clusters.add_row(c["name"] or "-", c["cloud"], c["region"], ", ".join(c["zones"]),
                         c["kubernetes_version"], "yes" if c["built"] else "[red]not yet[/red]")
    console.print(clusters)

    pools = Table(title="GPU pools", title_justify="left")
    for col in ("cluster", "pool", "machine type", "GPU", "GPUs/node", "nodes min-max", "at peak",
                "sharing", "zones", "NVMe cache", "$/h at peak", "change replaces"):
        pools.add_column(col)
    for c in doc["clusters"]:
        for p in c["pools"]:
            sharing = p["sharing"] + (" (planned)" if p.get("planned") else "")
            pools.add_row(c["name"], p["name"], p["machine_type"], p["gpu"],
                          str(p["gpus_per_node"]), f"{p['min_nodes']}-{p['max_nodes']}",
                          str(p.get("nodes_at_peak", "-")), sharing, str(len(p["zones"])),
                          p["nvme_path"] or "none", f"{p.get('cost_per_hour_at_peak', 0.0):,.2f}",
                          ", ".join(p["replace_on_change"]) or "-")
    console.print(pools)

    models = Table(title="Models", title_justify="left")
    for col in ("model", "region", "tier", "pool", "slice", "slice GB", "needs GB", "TP", "weights",
                "QPS/replica", "p99 TTFT ms", "p99 TPOT ms", "replicas", "$/h each", "cold start s",
                "warm node s"):
        models.add_column(col)
    for m in doc["models"]:
        models.add_row(m["name"], m["region"], m["tier"], m["pool"], m["slice"],
                       f"{m['slice_memory_gb']:g}", f"{m['memory_needed_gb']:g}",
                       str(m["tensor_parallel"]), m["quantization"],
                       f"{m['throughput']['qps']:g}", f"{m['throughput']['ttft_p99_ms']:g}",
                       f"{m['throughput']['tpot_p99_ms']:g}",
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
    for region in doc["unbuilt_regions"]:
        console.print(f"[yellow]warning:[/yellow] {region} is validated and planned but its "
                      "cluster is not built yet")


__all__ = ["document", "print_tables"]
