"""AKS workload identity for model pods: read the cluster's own regional weights container, nothing
else; and the cluster's kubelet may pull from the stack's registry.

The model pods run as the Kubernetes service account `rtip-models/model-server`, which a
federated credential maps to one user-assigned managed identity per cluster. Entra ID trusts the
cluster's own OIDC issuer for that one subject only, so no other cluster or service account can
exchange its token for this identity.

Reading the store also takes a network path: the registry and the weights accounts answer on no
public network, so the binding makes the cluster's private endpoints to both
(components/azure/endpoints.py), and the model service accounts, whose annotation carries the
identity, wait for the endpoints' DNS records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
from pulumi_azure_native import managedidentity

from components.azure.cluster import AzureCluster
from components.azure.endpoints import PrivateStoreAccess
from components.azure.keys import grant
from components.azure.registries import ACR_PULL, STORAGE_BLOB_DATA_READER, AzureStore
from components.identity import MODEL_SERVER, ModelIdentity, Subject
from components.namespaces import MODEL_SERVICE_ACCOUNT

TOKEN_AUDIENCE = "api://AzureADTokenExchange"  # the audience Entra ID accepts for token exchange
CLIENT_ID_ANNOTATION = "azure.workload.identity/client-id"
# The workload identity webhook injects the token into pods carrying this label; it is a pod
# label, not a service account one, so the model deployments set it on their pods.
USE_LABEL = "azure.workload.identity/use"


class AzureModelIdentity(ModelIdentity[AzureCluster, AzureStore]):
    TYPE = "rtip:azure:ModelIdentity"

    def bind(self, name: str, cluster: AzureCluster, store: AzureStore,
             trusted: Sequence[Subject]) -> Mapping[str, pulumi.Input[str]] | None:
        group = cluster.group.name
        # Keyword arguments: both Args classes name their parent identity `resource_name`, which
        # collides with the resource's own first parameter in the 3.29 SDK (components/azure/cluster.py).
        identity = managedidentity.UserAssignedIdentity(
            f"{name}-identity", resource_group_name=group,
            resource_name_=f"{cluster.cluster_name}-{MODEL_SERVICE_ACCOUNT}", location=cluster.region.name,
            tags=cluster.tags, opts=self.child)
        # One federated credential per trusted service account, each for that one subject.
        for subject in trusted:
            suffix = "" if subject == MODEL_SERVER else f"-{subject.service_account}"
            managedidentity.FederatedIdentityCredential(
                f"{name}-federation{suffix}", resource_group_name=group,
                resource_name_=identity.name,
                federated_identity_credential_resource_name=subject.service_account,
                issuer=cluster.oidc_issuer, subject=subject.oidc_subject,
                audiences=[TOKEN_AUDIENCE], opts=self.child)
        # The one container of the cluster's own region, never the account or anything above it.
        grant(f"{name}-weights", STORAGE_BLOB_DATA_READER, store.weights_container, identity.principal_id,
              self.child)
        # The cluster's kubelets pull the stack's images as their own identity.
        grant(f"{name}-acr-pull", ACR_PULL, store.registry_id, cluster.kubelet_object_id, self.child)
        access = PrivateStoreAccess(f"{name}-private", cluster, store, pulumi.ResourceOptions(parent=self))
        client_id = pulumi.Output.all(identity.client_id, *(r.urn for r in access.ready)).apply(
            lambda values: str(values[0]))
        return {CLIENT_ID_ANNOTATION: client_id}


__all__ = ["CLIENT_ID_ANNOTATION", "TOKEN_AUDIENCE", "USE_LABEL", "AzureModelIdentity"]
