"""GKE Workload Identity for model pods: one Google service account per cluster that may read the
weights bucket and nothing else (images are pulled by the node service account)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_gcp as gcp

from components.gcp.cluster import GcpCluster
from components.gcp.registries import GcpStore
from components.identity import MODEL_SERVER, ModelIdentity, Subject
from stacks.naming import gcp_account_id


class GcpModelIdentity(ModelIdentity[GcpCluster, GcpStore]):
    TYPE = "rtip:gcp:ModelIdentity"

    def bind(self, name: str, cluster: GcpCluster, store: GcpStore,
             trusted: Sequence[Subject]) -> Mapping[str, pulumi.Input[str]] | None:
        project = cluster.spec.project
        account = gcp.serviceaccount.Account(f"{name}-gsa", gcp.serviceaccount.AccountArgs(
            account_id=gcp_account_id(cluster.cluster_name, "models"), project=project,
            display_name=f"model servers of {cluster.cluster_name}"), opts=self.child)
        member = account.email.apply(lambda e: f"serviceAccount:{e}")
        gcp.storage.BucketIAMMember(f"{name}-weights", gcp.storage.BucketIAMMemberArgs(
            bucket=store.bucket, role="roles/storage.objectViewer", member=member), opts=self.child)
        # The trusted Kubernetes service accounts may act as the Google one, and only they.
        for subject in trusted:
            suffix = "" if subject == MODEL_SERVER else f"-{subject.service_account}"
            gcp.serviceaccount.IAMMember(f"{name}-wi{suffix}", gcp.serviceaccount.IAMMemberArgs(
                service_account_id=account.name, role="roles/iam.workloadIdentityUser",
                member=f"serviceAccount:{cluster.workload_pool}[{subject.ref}]",
            ), opts=self.child)
        return {"iam.gke.io/gcp-service-account": account.email}


__all__ = ["GcpModelIdentity"]
