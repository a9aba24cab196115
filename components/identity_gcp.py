"""GKE Workload Identity for model pods: one Google service account per cluster that may read the
weights bucket and nothing else (images are pulled by the node service account)."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from components.contract import ClusterFacts, RegionStore
from components.namespaces import MODEL_SERVICE_ACCOUNT, MODELS_NAMESPACE, model_service_account


def account_id(cluster: str) -> str:
    """Service account IDs: 6-30 characters, lowercase letters, digits, hyphens."""
    short = cluster.removeprefix("rtip-").replace("_", "-")
    return f"m-{short}"[:30].rstrip("-")


class GcpModelIdentity(pulumi.ComponentResource):
    def __init__(self, name: str, cluster: ClusterFacts, store: RegionStore,
                 provider: pulumi.ProviderResource, after: list[pulumi.Resource],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("rtip:gcp:ModelIdentity", name, {
            "cluster": cluster.name, "region": store.region,
            "serviceAccount": f"{MODELS_NAMESPACE}/{MODEL_SERVICE_ACCOUNT}"}, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        if cluster.workload_pool is None:
            raise ValueError(f"{cluster.name}: a GKE cluster must report its workload pool")
        project = cluster.workload_pool.removesuffix(".svc.id.goog")
        account = gcp.serviceaccount.Account(f"{name}-gsa", gcp.serviceaccount.AccountArgs(
            account_id=account_id(cluster.name), project=project,
            display_name=f"model servers of {cluster.name}"), opts=child)
        member = account.email.apply(lambda e: f"serviceAccount:{e}")
        gcp.storage.BucketIAMMember(f"{name}-weights", gcp.storage.BucketIAMMemberArgs(
            bucket=store.weights_scope, role="roles/storage.objectViewer", member=member), opts=child)
        # The Kubernetes service account may act as the Google one, and only that one.
        gcp.serviceaccount.IAMMember(f"{name}-wi", gcp.serviceaccount.IAMMemberArgs(
            service_account_id=account.name, role="roles/iam.workloadIdentityUser",
            member=f"serviceAccount:{cluster.workload_pool}[{MODELS_NAMESPACE}/{MODEL_SERVICE_ACCOUNT}]",
        ), opts=child)
        model_service_account(f"{name}-sa", cluster, after, self,
                              annotations={"iam.gke.io/gcp-service-account": account.email})
        self.register_outputs({"email": account.email})


__all__ = ["GcpModelIdentity", "account_id"]
