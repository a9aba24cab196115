"""Platform: every region's cluster on its own cloud, and what runs on each cluster, from the plan."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from components.addons import ClusterAddons
from components.addons_helm import network_policies, ready, use_network
from components.aws.cluster import AwsCluster, aws_provider
from components.aws.identity import AwsModelIdentity
from components.aws.registries import AwsRegistries
from components.azure.cluster import AzureCluster, azure_provider
from components.azure.identity import AzureModelIdentity
from components.azure.network import address_plan as azure_address_plan
from components.azure.registries import AzureRegistries
from components.cluster import KubernetesCluster
from components.contract import ClusterFacts, RegionStore
from components.gateway import Gateway
from components.gcp.cluster import GcpCluster, gcp_provider
from components.gcp.identity import GcpModelIdentity
from components.gcp.registries import GcpRegistries
from components.kit import CloudKit
from components.logs import RequestLogs
from components.models import ModelDeployment, models_watch
from components.namespaces import MODELS_NAMESPACE, SYSTEM_NAMESPACE, ClusterNamespaces
from serving.alert_routes import cluster_webhooks
from serving.hardware import Cloud
from serving.netpol import ClusterNetwork
from stacks.plan import Plan, RegionPlan

# One kit per cloud: a table, so a fourth cloud is one more row and no branch.
KITS: dict[Cloud, CloudKit[Any, Any]] = {kit.cloud: kit for kit in (
    CloudKit(Cloud.AWS, aws_provider, AwsCluster, AwsRegistries, AwsModelIdentity),
    CloudKit(Cloud.GCP, gcp_provider, GcpCluster, GcpRegistries, GcpModelIdentity),
    CloudKit(Cloud.AZURE, azure_provider, AzureCluster, AzureRegistries, AzureModelIdentity),
)}


def stack_labels(plan: Plan, cluster: str) -> dict[str, str]:
    """Tags/labels every cloud resource carries (keys valid on all three clouds)."""
    return {"rtip-environment": plan.spec.environment, "rtip-cluster": cluster,
            "managed-by": "pulumi-rtip"}


def cluster_network(region: RegionPlan, alert_webhooks: bool = False) -> ClusterNetwork:
    """The region's network as the NetworkPolicies see it; the API is private exactly when the
    stack opens it to no outside network (components.contract.public_api_cidrs)."""
    spec = region.region
    # AKS reaches its stores through private endpoints in the VNet (components/azure/endpoints.py).
    endpoints = azure_address_plan(spec.network.cidr).endpoints if region.cloud == Cloud.AZURE else None
    return ClusterNetwork(region.cloud, spec.network.cidr, private_api=not spec.api_access_cidrs,
                          store_endpoints=endpoints, alert_webhooks=alert_webhooks)


class Platform(pulumi.ComponentResource):
    clusters: list[ClusterFacts]
    stores: dict[str, RegionStore]

    def __init__(self, name: str, plan: Plan, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("rtip:platform:Platform", name, {
            "environment": plan.spec.environment,
            "regions": [f"{r.cloud}/{r.name}" for r in plan.regions],
        }, opts)
        self.clusters = []
        self.stores = {}
        # Each tenant's API key: the secret config value its `api_key_secret` names (`pulumi config
        # set --secret`); read once, only ever carried as a secret Output.
        config = pulumi.Config()
        self.tenant_keys = {t.name: config.require_secret(t.api_key_secret) for t in plan.spec.tenants}
        # The SLO alerts' webhook URLs, likewise (serving/alert_routes.py).
        self.alert_webhooks = {s: config.require_secret(key) for s, key in plan.spec.alert_webhooks.items()}
        # Each region's heartbeat URL, for its cluster alone (serving/alert_routes.py).
        self.heartbeats = {r: config.require_secret(key) for r, key in plan.spec.heartbeat_webhooks.items()}
        for cloud in dict.fromkeys(r.cloud for r in plan.regions):
            self._cloud(name, plan, KITS[cloud], plan.regions_of(cloud))
        self.clusters.sort(key=lambda c: [r.name for r in plan.regions].index(c.region))
        self.register_outputs({})

    def _cloud(self, name: str, plan: Plan, kit: CloudKit[Any, Any],
               regions: tuple[RegionPlan, ...]) -> None:
        child = pulumi.ResourceOptions(parent=self)
        providers = {r.name: kit.provider(f"{r.cloud}-{r.name}", r.region, stack_labels(plan, r.cluster),
                                          child, plan.spec)
                     for r in regions}
        # Registries first: every cluster pulls images and weights from its own region's copy.
        stores: Mapping[str, RegionStore] = kit.registries(f"{name}-{kit.cloud}", plan, regions, providers,
                                                           child).stores
        self.stores.update(stores)
        for region in regions:
            cluster: KubernetesCluster = kit.cluster(region.cluster, region, plan,
                                                     providers[region.name], child)
            on_cluster = pulumi.ResourceOptions(parent=cluster)
            # Every namespace made on this cluster gets NetworkPolicies naming its network.
            webhooks = cluster_webhooks(self.alert_webhooks, self.heartbeats, region.name)
            use_network(cluster.facts.provider, cluster_network(region, bool(webhooks)))
            namespaces = ClusterNamespaces(f"{region.cluster}-ns", cluster.facts, opts=on_cluster)
            for ns, made in namespaces.namespaces.items():
                network_policies(f"{region.cluster}-ns-{ns}-netpol", made, ns, namespaces,
                                 cluster.facts.provider)
            # Model pods start once their namespace's policies are in place.
            models_ns = ready([namespaces.namespaces[MODELS_NAMESPACE]])
            addons = ClusterAddons(f"{region.cluster}-addons", cluster.facts, plan.posture, opts=on_cluster,
                                   store=stores[region.name], digests=plan.spec.registries.digests,
                                   alert_webhooks=webhooks)
            kit.identity(f"{region.cluster}-models", cluster, stores[region.name], models_ns, on_cluster)
            # The redacting log collector before the model servers: where the posture logs prompts,
            # they wait for it (and only it turns their logging on).
            logs = RequestLogs(f"{region.cluster}-logs", cluster, plan.posture, opts=on_cluster,
                               store=stores[region.name], digests=plan.spec.registries.digests)
            deployed = [ModelDeployment(f"{region.cluster}-model-{model.model}", model, cluster.facts,
                                        addons.releases, models_ns, opts=on_cluster,
                                        store=stores[region.name], digests=plan.spec.registries.digests,
                                        log_requests_to=logs.release if plan.posture.request_logs else None)
                        for model in region.models]
            # The watch pages on the namespace's pod series being absent, with no history
            # condition, so it comes after the models whose floors (at least 1 each) keep a pod
            # there: KServe creates their predictors' pods within seconds of them, while a first
            # `pulumi up` stopped before them would otherwise leave it paging an empty namespace.
            if deployed:
                models_watch(f"{region.cluster}-models-watch", cluster.facts, addons.releases,
                             [*models_ns, *deployed], opts=on_cluster)
            # The front door last: its pools select the model servers deployed above.
            Gateway(f"{region.cluster}-gateway", cluster.facts, plan.posture, plan.spec.tenants,
                    self.tenant_keys, [m.model for m in region.models], addons.releases,
                    [namespaces.namespaces[SYSTEM_NAMESPACE]], models_ns, opts=on_cluster,
                    store=stores[region.name], digests=plan.spec.registries.digests,
                    availability={m.model: m.tier_spec.availability for m in region.models})
            self.clusters.append(cluster.facts)


__all__ = ["KITS", "Platform", "cluster_network", "stack_labels"]
