"""Block storage on EKS: the aws-ebs-csi-driver add-on and the default `gp3` StorageClass.

EKS ships no CSI driver for EBS, and since Kubernetes 1.30 it marks no StorageClass as the default
on new clusters (EKS user guide, "Store Kubernetes volumes with Amazon EBS" / "Default StorageClass
updates"), so a PersistentVolumeClaim without a class (Prometheus' included) would stay Pending.
The driver's controller runs under its own role through EKS Pod Identity: the add-on's
`podIdentityAssociations` bind it to the `ebs-csi-controller-sa` service account the add-on
creates, with the AWS-managed AmazonEBSCSIDriverPolicy (AWS managed policy reference:
`arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy`, the driver's volume, snapshot and
attach calls, its tag writes conditioned on the create action).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws.roles import pod_role

ADDON = "aws-ebs-csi-driver"
ADDON_NAMESPACE = "kube-system"  # where EKS installs the add-on's controller
CONTROLLER_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
DRIVER_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
PROVISIONER = "ebs.csi.aws.com"
STORAGE_CLASS = "gp3"  # the name other components ask for on EKS (Prometheus' volume claim)
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


def gp3_parameters() -> dict[str, str]:
    """The driver's StorageClass parameters: gp3, encrypted with the account's EBS key (a
    customer key would need `kmsKeyId` and a grant to the driver's role)."""
    return {"type": "gp3", "encrypted": "true", "csi.storage.k8s.io/fstype": "ext4"}


def ebs_storage(name: str, cluster: aws.eks.Cluster, k8s_provider: k8s.Provider,
                after: Sequence[pulumi.Resource],
                opts: pulumi.ResourceOptions) -> k8s.storage.v1.StorageClass:
    """The add-on with its Pod Identity role, then the default `gp3` class (returned)."""
    role = pod_role(f"{name}-ebs-csi", cluster, [(ADDON_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT)], opts)
    grant = aws.iam.RolePolicyAttachment(f"{name}-ebs-csi", aws.iam.RolePolicyAttachmentArgs(
        role=role.name, policy_arn=DRIVER_POLICY), opts=opts)
    addon = aws.eks.Addon(f"{name}-{ADDON}", aws.eks.AddonArgs(
        cluster_name=cluster.name, addon_name=ADDON, resolve_conflicts_on_update="OVERWRITE",
        pod_identity_associations=[aws.eks.AddonPodIdentityAssociationArgs(
            role_arn=role.arn, service_account=CONTROLLER_SERVICE_ACCOUNT)],
    ), opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[grant, *after])))
    return k8s.storage.v1.StorageClass(
        f"{name}-{STORAGE_CLASS}",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=STORAGE_CLASS, annotations={DEFAULT_CLASS_ANNOTATION: "true"},
            labels={"app.kubernetes.io/managed-by": "rtip"}),
        provisioner=PROVISIONER, parameters=gp3_parameters(),
        # Bind where the pod lands: an EBS volume lives in one zone.
        volume_binding_mode="WaitForFirstConsumer", allow_volume_expansion=True, reclaim_policy="Delete",
        opts=pulumi.ResourceOptions(parent=opts.parent, provider=k8s_provider, depends_on=[addon]),
    )


__all__ = ["ADDON", "CONTROLLER_SERVICE_ACCOUNT", "DRIVER_POLICY", "PROVISIONER", "STORAGE_CLASS",
           "ebs_storage", "gp3_parameters"]
