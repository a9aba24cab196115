"""`rtip images STACK`: per region, every toolkit image the plan runs there and how it gets there.

Read from the offline record, so the list is exactly what `pulumi up` would apply: every image a
Kubernetes object of a region's cluster names (pod templates, custom resources, Helm values),
matched back to its pinned upstream (serving/charts.py IMAGES). For each: the upstream reference,
the reference the cluster pulls from the region's registry, and how it gets there, as the
registries of components/<cloud>/registries.py provide it:

- AWS: an ECR pull-through cache rule `<prefix>/<namespace>` per upstream ECR reaches without a
  login (or with the stack's `registries.upstream_credentials`); otherwise a repository of the
  stack's own (`registries.images`), filled once in the first AWS region and replicated by ECR to
  the others. For those the platform engineer runs the printed copy once: `crane copy` keeps the
  image's digest (all platforms by default; go-containerregistry cmd/crane/doc/crane_copy.md), so
  a digest the stack pins is what the cluster finds; `crane auth login` takes ECR's token from
  `aws ecr get-login-password` (crane_auth_login.md: `-u`, `--password-stdin`).
- GCP: the Artifact Registry remote repository `<prefix>-<namespace>`.
- Azure: the ACR cache rule `<namespace>-<image key>`.

Registry hosts are as the offline engine resolves them (on AWS, its account ID).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from rtip import offline
from rtip.deploycheck.graph import cluster_of
from rtip.deploycheck.images import OPERATOR_TAGGED, image_fields
from rtip.recorded import record_or_status
from serving.charts import IMAGES, UPSTREAMS
from serving.hardware import Cloud
from serving.images import cache_path, regional_ref
from stacks.schema import StackSpec

# What the AMD operator builds in the cluster and pushes to the region's registry itself.
BUILT_IN_CLUSTER = ("the AMD GPU operator builds the amdgpu driver image on the cluster and pushes "
                    "it here, tagged <os>-<kernel>-<driver version> (ROCm/gpu-operator v1.5.1)")


@dataclass(frozen=True)
class RegionImage:
    key: str | None  # serving/charts.py IMAGES key; None: not a pinned toolkit image
    upstream: str | None  # the pinned upstream reference (by digest where the stack pins one)
    pulled: str  # the reference the cluster pulls
    via: str  # pull-through cache rule | mirrored repository | remote repository | cache rule | ...
    source: str  # which rule or repository, and what it fetches from
    copy: tuple[str, ...] = field(default=())  # the commands that fill a mirrored repository


@dataclass(frozen=True)
class RegionImages:
    region: str
    cloud: str
    cluster: str
    images: tuple[RegionImage, ...]


def _suffix(key: str, cloud: Cloud, digests: dict[str, str]) -> str:
    """The end of `key`'s regional reference: `<join><namespace>/<path>` and its tag or digest
    (serving.images.regional_ref under an empty registry root)."""
    return regional_ref(IMAGES[key].ref, "", cloud, digests.get(key))


def _how(key: str, pulled: str, cloud: Cloud, region: str, source_region: str | None,
         spec: StackSpec) -> tuple[str, str, tuple[str, ...]]:
    upstream, path = cache_path(key)
    prefix = spec.registries.name_prefix
    if cloud is Cloud.AWS:
        creds = spec.registries.upstream_credentials
        if upstream.ecr_needs_credential and upstream.host not in creds:
            repo = f"{prefix}/{upstream.namespace}/{path}"
            if region != source_region:
                return "mirrored repository", f"{repo}, replicated by ECR from {source_region}", ()
            host = pulled.split("/", 1)[0]
            pin = spec.registries.digests.get(key)
            src = f"{upstream.host}/{path}" + (f"@{pin}" if pin else f":{IMAGES[key].tag}")
            return "mirrored repository", f"{repo}, filled from {upstream.host}/{path}", (
                f"aws ecr get-login-password --region {region} | "
                f"crane auth login {host} -u AWS --password-stdin",
                f"crane copy {src} {host}/{repo}:{IMAGES[key].tag}")
        login = " with the stack's login" if upstream.ecr_needs_credential else ""
        return ("pull-through cache rule",
                f"ECR rule {prefix}/{upstream.namespace} <- {upstream.ecr_url}{login}", ())
    if cloud is Cloud.GCP:
        remote = upstream.gcp_uri or "Docker Hub (preset DOCKER_HUB)"
        return "remote repository", f"Artifact Registry {prefix}-{upstream.namespace} <- {remote}", ()
    return ("cache rule",
            f"ACR rule {upstream.namespace}-{key}: {upstream.namespace}/{path} <- {upstream.host}/{path}", ())


def region_images(record: offline.Record) -> list[RegionImages]:
    """Every region's images, in the stack's region order."""
    spec: StackSpec = record.plan.spec
    digests = dict(spec.registries.digests)
    clusters = [r for r in record.resources if r.type.startswith("rtip:") and r.type.endswith(":Cluster")]
    found: dict[str, dict[tuple[str, str], RegionImage]] = {c.urn: {} for c in clusters}
    aws = [r.region for r in spec.regions if r.cloud == Cloud.AWS]
    source_region = aws[0] if aws else None
    by_urn = {c.urn: c for c in clusters}
    for r in record.resources:
        if not r.type.startswith("kubernetes:"):
            continue
        cluster = cluster_of(record, r)
        if cluster is None or cluster.urn not in by_urn:
            continue
        cloud, region = Cloud(cluster.inputs["cloud"]), str(cluster.inputs["region"])
        for path, ref in image_fields(r):
            key = next((k for k in sorted(IMAGES) if ref.endswith(_suffix(k, cloud, digests))), None)
            if key is not None:
                upstream = IMAGES[key].ref if key not in digests else \
                    f"{IMAGES[key].repository}@{digests[key]}"
                via, source, copy = _how(key, ref, cloud, region, source_region, spec)
                item = RegionImage(key, upstream, ref, via, source, copy)
            elif (r.type.rsplit(":", 1)[-1], path) in OPERATOR_TAGGED:
                item = RegionImage(None, None, ref, "built in the cluster", BUILT_IN_CLUSTER)
            else:
                item = RegionImage(None, None, ref, "not a toolkit image",
                                   f"{r.type} {path}: no entry of serving/charts.py IMAGES")
            found[cluster.urn].setdefault((item.key or "", ref), item)
    return [RegionImages(str(c.inputs["region"]), str(c.inputs["cloud"]), c.name,
                         tuple(found[c.urn][k] for k in sorted(found[c.urn])))
            for c in sorted(clusters, key=lambda c: [r.region for r in spec.regions].index(
                str(c.inputs["region"])))]


def document(record: offline.Record) -> dict[str, Any]:
    return {"stack": record.stack, "upstreams": sorted(UPSTREAMS),
            "regions": [{**asdict(r), "images": [asdict(i) for i in r.images]}
                        for r in region_images(record)]}


def _print(doc: dict[str, Any]) -> None:
    out = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    table = Table(title=f"Images of stack {doc['stack']}", title_justify="left")
    for col in ("region", "image", "upstream", "pulled from", "how"):
        table.add_column(col, overflow="fold")
    commands: list[str] = []
    for region in doc["regions"]:
        for i in region["images"]:
            table.add_row(region["region"], i["key"] or "-", i["upstream"] or "-", i["pulled"],
                          f"{i['via']}: {i['source']}")
            commands += [c for c in i["copy"] if c not in commands]
    out.print(table)
    if commands:
        out.print("Fill the mirrored repositories once (ECR replicates them to the other regions):")
        for c in commands:
            out.print(f"  {c}", markup=False)


def run_command(stack: str, as_json: bool) -> int:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    got = record_or_status(stack, err)
    if isinstance(got, int):
        return got
    _, record = got
    doc = document(record)
    if as_json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        _print(doc)
    return 0


__all__ = ["BUILT_IN_CLUSTER", "RegionImage", "RegionImages", "document", "region_images", "run_command"]
