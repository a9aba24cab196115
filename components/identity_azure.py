"""AKS workload identity for model pods: read the cluster's own regional weights container, nothing
else; and the cluster's kubelet may pull from the stack's registry.

The model pods run as the Kubernetes service account `rtip-models/model-server`, which a
federated credential maps to one user-assigned managed identity per cluster. Entra ID trusts the
cluster's own OIDC issuer for that one subject only, so no other cluster or service account can
exchange its token for this identity.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import containerservice, managedidentity

from components.azure import AzureProvider
from components.contract import ClusterFacts, RegionStore
from components.namespaces import MODEL_SERVICE_ACCOUNT, MODELS_NAMESPACE, model_service_account
from components.registries_azure import ACR_PULL, STORAGE_BLOB_DATA_READER, grant, registry_id

TOKEN_AUDIENCE = "api://AzureADTokenExchange"  # the audience Entra ID accepts for token exchange
CLIENT_ID_ANNOTATION = "azure.workload.identity/client-id"
# The workload identity webhook injects the token into pods carrying this label; it is a pod
# label, not a service account one, so the model deployments set it on their pods.
USE_LABEL = "azure.workload.identity/use"


def _kubelet_object_id(cluster: object) -> str:
    profile = getattr(cluster, "identity_profile", None) or {}
    kubelet = profile.get("kubeletidentity")
    if kubelet is None or not kubelet.object_id:
        raise ValueError("the AKS cluster reports no kubelet identity")
    return kubelet.object_id


class AzureModelIdentity(pulumi.ComponentResource):
    def __init__(self, name: str, cluster: ClusterFacts, store: RegionStore,
                 provider: AzureProvider, after: list[pulumi.Resource],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("rtip:azure:ModelIdentity", name, {
            "cluster": cluster.name, "region": store.region,
            "serviceAccount": f"{MODELS_NAMESPACE}/{MODEL_SERVICE_ACCOUNT}"}, opts)
        if cluster.resource_group is None or cluster.oidc_issuer is None:
            raise ValueError(f"{cluster.name}: an AKS cluster must report its resource group and OIDC issuer")
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        # Keyword arguments: both Args classes name their parent identity `resource_name`, which
        # collides with the resource's own first parameter in the 3.29 SDK (see components/azure.py).
        identity = managedidentity.UserAssignedIdentity(
            f"{name}-identity", resource_group_name=cluster.resource_group,
            resource_name_=f"{cluster.name}-{MODEL_SERVICE_ACCOUNT}", location=cluster.region,
            tags=provider.tags, opts=child)
        managedidentity.FederatedIdentityCredential(
            f"{name}-federation", resource_group_name=cluster.resource_group,
            resource_name_=identity.name, federated_identity_credential_resource_name=MODEL_SERVICE_ACCOUNT,
            issuer=cluster.oidc_issuer,
            subject=f"system:serviceaccount:{MODELS_NAMESPACE}:{MODEL_SERVICE_ACCOUNT}",
            audiences=[TOKEN_AUDIENCE], opts=child)
        # The one container of the cluster's own region, never the account or anything above it.
        grant(f"{name}-weights", STORAGE_BLOB_DATA_READER, store.weights_scope, identity.principal_id, child)

        # The kubelet identity is an output of the cluster the facts do not carry, so read it back.
        # The name comes from the cluster's ID so that the read waits until the cluster exists.
        aks = containerservice.get_managed_cluster_output(
            resource_group_name=cluster.resource_group,
            resource_name=cluster.native_id.apply(lambda rid: rid.rsplit("/", 1)[-1]),
            opts=pulumi.InvokeOutputOptions(parent=self, provider=provider))
        grant(f"{name}-acr-pull", ACR_PULL, registry_id(store), aks.apply(_kubelet_object_id), child)

        model_service_account(f"{name}-sa", cluster, after, self,
                              annotations={CLIENT_ID_ANNOTATION: identity.client_id})
        self.register_outputs({"clientId": identity.client_id, "principalId": identity.principal_id})


__all__ = ["CLIENT_ID_ANNOTATION", "TOKEN_AUDIENCE", "USE_LABEL", "AzureModelIdentity"]
