"""The deployer: where `pulumi up` runs and as whom, against the clusters' API endpoints.

Every cluster's Kubernetes provider talks to its API from wherever `pulumi up` runs. A private
endpoint (the posture's `private_api`, or a region with no `api_access_cidrs`) answers only inside
its network, so a runner outside it cannot apply a single Kubernetes object; a public endpoint
answers only the listed ranges, so the runner's egress must be among them. Each cloud the stack
uses needs the identity its clusters grant cluster admin to (components/<cloud>/access.py).

The same identities name the stack's globally unique names and pin its providers (stacks/naming.py):
the AWS role's account ends every S3 bucket name and is the AWS providers' only allowed account,
the Azure subscription is hashed into the ACR and storage account names and pins the Azure
provider. A stack may leave the whole block out only where the posture's API is public (dev,
staging); its names then carry no account or subscription, so its `registries.name_prefix` must be
the organisation's own, and its providers follow the runner's credentials.
"""

from __future__ import annotations

from collections.abc import Iterator

from serving.posture import posture
from stacks.checks_base import Problem
from stacks.checks_values import MIN_API_PREFIX, NOT_PUBLIC, repeats
from stacks.schema import DeployerSpec, StackSpec

EXAMPLE = {
    "aws": "aws: {role_arn: arn:aws:iam::<account>:role/<deployer>}",
    "gcp": "gcp: {service_account: <name>@<project>.iam.gserviceaccount.com}",
    "azure": "azure: {object_id: <Entra object ID>, subscription_id: <subscription>}",
}


def check_deployer(spec: StackSpec) -> Iterator[Problem]:
    env = posture(spec.environment)
    deployer = spec.deployer
    if deployer is None:
        if env.private_api:
            yield Problem("deployer", f"{env.environment} clusters have private API endpoints only: "
                          "say where `pulumi up` runs and as whom, e.g. deployer: {network: inside, "
                          f"{EXAMPLE['aws']}}} (a runner inside each region's network or peered to it)")
        return
    for cloud in dict.fromkeys(r.cloud for r in spec.regions):
        if getattr(deployer, cloud) is None:
            yield Problem(f"deployer.{cloud}", f"the stack has {cloud} regions: give the identity "
                          f"`pulumi up` runs as there, e.g. {EXAMPLE[cloud]}")
    yield from _cidrs(deployer)
    if deployer.network == "inside":
        if deployer.cidrs:
            yield Problem("deployer.cidrs", "only with network: public (a runner inside the network "
                          "reaches the API privately); remove the list")
        return
    if env.private_api:
        yield Problem("deployer.network", f"{env.environment} clusters have private API endpoints "
                      "only, which a runner on the internet cannot reach: set network: inside and run "
                      "`pulumi up` inside each region's network or one peered or VPN-connected to it")
        return
    if not deployer.cidrs:
        yield Problem("deployer.cidrs", "network: public needs the runner's public egress ranges "
                      "(each region's api_access_cidrs must admit them); or set network: inside")
    for i, region in enumerate(spec.regions):
        allowed = region.api_access_cidrs
        if not allowed:
            yield Problem(f"regions[{i}].api_access_cidrs", f"the {region.region} cluster's API is "
                          "private (no api_access_cidrs) and the deployer runs outside the network "
                          "(deployer.network: public): list the deployer's cidrs here, or set "
                          "deployer.network: inside")
            continue
        for j, cidr in enumerate(deployer.cidrs):
            if not any(cidr.subnet_of(a) for a in allowed):
                yield Problem(f"deployer.cidrs[{j}]", f"{cidr} is not admitted by regions[{i}]."
                              f"api_access_cidrs ({', '.join(map(str, allowed))}): the {region.region} "
                              "API would refuse the deployer; add it there")


def _cidrs(deployer: DeployerSpec) -> Iterator[Problem]:
    yield from repeats("deployer.cidrs", deployer.cidrs, "{}")
    for j, cidr in enumerate(deployer.cidrs):
        if cidr.prefixlen < MIN_API_PREFIX:
            yield Problem(f"deployer.cidrs[{j}]", f"{cidr} is wider than a /{MIN_API_PREFIX}; list the "
                          "runner's own egress ranges")
        elif any(cidr.overlaps(r) for r in NOT_PUBLIC):
            yield Problem(f"deployer.cidrs[{j}]", f"{cidr} is not a public network; a public API "
                          "endpoint sees the runner's public egress address")


__all__ = ["check_deployer"]
