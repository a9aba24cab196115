"""The cluster skeleton every cloud follows, written once.

A cloud's cluster class fills in five steps; `KubernetesCluster.__init__` runs them in the one
order every cloud needs: the region's network, the control plane (with its keys and roles), the
system pool, one node pool per GPU pool (each under a `GpuPool` component that registers the
pool's facts), the deployer's grant on the cluster's API (the stack's `deployer`: who runs
`pulumi up`), then a Kubernetes provider from an exec kubeconfig that holds no credential and
waits for that grant, and the `ClusterFacts` everything above the cluster uses.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import pulumi
import pulumi_kubernetes as k8s

from components.contract import ClusterFacts, PoolFacts, cluster_props
from components.gpu_pools import GpuPool, pool_facts
from serving.hardware import DEFAULT_SYSTEM_MACHINE
from serving.posture import Posture
from stacks.plan import Plan, RegionPlan


@dataclass(frozen=True)
class ExecUser:
    """The kubeconfig user: a client-go exec plugin that fetches a short-lived token."""

    command: str
    args: tuple[str, ...] = ()
    install_hint: str | None = None
    provide_cluster_info: bool = False
    interactive_mode: str | None = None

    def to_json(self) -> dict[str, object]:
        doc: dict[str, object] = {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                  "command": self.command}
        if self.args:
            doc["args"] = list(self.args)
        if self.install_hint:
            doc["installHint"] = self.install_hint
        if self.provide_cluster_info:
            doc["provideClusterInfo"] = True
        if self.interactive_mode:
            doc["interactiveMode"] = self.interactive_mode
        return doc


def exec_kubeconfig(name: str, server: pulumi.Input[str], ca_data: pulumi.Input[str] | None,
                    user: ExecUser) -> pulumi.Output[str]:
    """A kubeconfig whose user is an exec plugin: it holds no credential itself.

    `ca_data` is the cluster CA (base64 PEM); every managed control plane here signs its API
    server certificate with its own CA, which is not among the system roots."""
    def build(args: list[str | None]) -> str:
        url, ca = args
        cluster: dict[str, str] = {"server": url or ""}
        if ca:
            cluster["certificate-authority-data"] = ca
        return json.dumps({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": cluster}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
            "users": [{"name": name, "user": {"exec": user.to_json()}}],
        })
    return pulumi.Output.all(server, ca_data).apply(build)


@dataclass(frozen=True)
class ControlPlane:
    """What a cloud's control plane step hands back to the skeleton."""

    endpoint: pulumi.Output[str]  # https URL of the API server
    native_id: pulumi.Output[str]  # the cloud's name or ID for the cluster
    kubeconfig: pulumi.Output[str]
    # What the Kubernetes provider must wait for before its first call (the system nodes, which
    # run CoreDNS and the webhooks every add-on needs).
    ready: Sequence[pulumi.Resource]


class KubernetesCluster(pulumi.ComponentResource, ABC):
    """One region's managed Kubernetes cluster; subclasses are the clouds (components/<cloud>/)."""

    TYPE: ClassVar[str]
    facts: ClusterFacts

    def __init__(self, name: str, region: RegionPlan, plan: Plan, provider: pulumi.ProviderResource,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        pools = tuple(pool_facts(region.cloud, p) for p in region.pools)
        super().__init__(self.TYPE, name, cluster_props(
            region.cloud, region.name, list(region.region.zones), plan.spec.kubernetes_version,
            getattr(region.region, "zones_down", None)), opts)
        self.cluster_name = name
        self.region = region
        self.stack = plan.spec
        self.kubernetes_version = plan.spec.kubernetes_version
        self.posture: Posture = plan.posture
        # The system pool's machine: the stack's, else the cloud's default (serving.hardware).
        self.system_machine_type = (region.region.system_pool.machine_type
                                    or DEFAULT_SYSTEM_MACHINE[region.cloud])
        self.cloud_provider = provider
        self.child = pulumi.ResourceOptions(parent=self, provider=provider)
        self.build_network()
        self.build_control_plane()
        system = self.build_system_pool()
        for pool in pools:
            group = GpuPool(f"{name}-{pool.name}", pool, opts=pulumi.ResourceOptions(parent=self))
            self.build_gpu_pool(pool, group, system)
        access = self.access(system)
        # The provider's first call must be authorized: it waits for the deployer's grant.
        self.deployer_grants = list(self.grant_deployer())
        k8s_provider = k8s.Provider(
            f"{name}-k8s",
            k8s.ProviderArgs(kubeconfig=pulumi.Output.secret(access.kubeconfig),
                             enable_server_side_apply=True),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*access.ready,
                                                                 *self.deployer_grants]),
        )
        self.facts = ClusterFacts(
            name=name, cloud=region.cloud, region=region.name, zones=tuple(region.region.zones),
            kubernetes_version=self.kubernetes_version, provider=k8s_provider, pools=pools,
            endpoint=access.endpoint, native_id=access.native_id,
        )
        self.register_outputs({"endpoint": access.endpoint, "id": access.native_id})

    @abstractmethod
    def build_network(self) -> None:
        """The region's network: subnets per zone, egress, private endpoints."""

    @abstractmethod
    def build_control_plane(self) -> None:
        """Keys, roles and the managed control plane."""

    @abstractmethod
    def build_system_pool(self) -> pulumi.Resource:
        """The CPU nodes the platform services run on; returned so GPU pools can follow it."""

    @abstractmethod
    def build_gpu_pool(self, pool: PoolFacts, parent: GpuPool, system: pulumi.Resource) -> None:
        """One GPU pool's nodes, under its `GpuPool` component."""

    @abstractmethod
    def grant_deployer(self) -> Sequence[pulumi.Resource]:
        """What lets the stack's deployer (`deployer.<cloud>`) call the cluster's API as cluster
        admin (components/<cloud>/access.py); empty when the stack names no deployer."""

    @abstractmethod
    def access(self, system: pulumi.Resource) -> ControlPlane:
        """The API endpoint, the cluster's ID, and an exec kubeconfig for the provider."""


__all__ = ["ControlPlane", "ExecUser", "KubernetesCluster", "exec_kubeconfig"]
