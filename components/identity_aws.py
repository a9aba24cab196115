"""EKS Pod Identity for model pods: read the cluster's own regional weights bucket, nothing else."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.contract import ClusterFacts, RegionStore
from components.namespaces import MODELS_NAMESPACE
from stacks.naming import MODELS_PREFIX

MODEL_SERVICE_ACCOUNT = "model-server"


def read_weights_policy(bucket_arn: str, key_arn: str | None) -> str:
    """List the models prefix and read its objects in one bucket; decrypt with its one key."""
    statements = [
        {"Sid": "ListModels", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn],
         "Condition": {"StringLike": {"s3:prefix": [f"{MODELS_PREFIX}/*"]}}},
        {"Sid": "ReadModels", "Effect": "Allow", "Action": ["s3:GetObject", "s3:GetObjectVersion"],
         "Resource": [f"{bucket_arn}/{MODELS_PREFIX}/*"]},
    ]
    if key_arn:
        statements.append({"Sid": "DecryptModels", "Effect": "Allow", "Action": ["kms:Decrypt"],
                           "Resource": [key_arn]})
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


class AwsModelIdentity(pulumi.ComponentResource):
    def __init__(self, name: str, cluster: ClusterFacts, store: RegionStore,
                 provider: pulumi.ProviderResource, after: list[pulumi.Resource],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("rtip:aws:ModelIdentity", name, {
            "cluster": cluster.name, "region": store.region,
            "serviceAccount": f"{MODELS_NAMESPACE}/{MODEL_SERVICE_ACCOUNT}"}, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        role = aws.iam.Role(f"{name}-role", aws.iam.RoleArgs(assume_role_policy=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
                           "Action": ["sts:AssumeRole", "sts:TagSession"]}],
        })), opts=child)
        policy_inputs = [store.weights_scope, *([store.weights_key] if store.weights_key else [])]
        aws.iam.RolePolicy(f"{name}-weights", aws.iam.RolePolicyArgs(
            role=role.id,
            policy=pulumi.Output.all(*policy_inputs).apply(
                lambda a: read_weights_policy(a[0], a[1] if len(a) > 1 else None)),
        ), opts=child)
        k8s.core.v1.ServiceAccount(f"{name}-sa", metadata=k8s.meta.v1.ObjectMetaArgs(
            name=MODEL_SERVICE_ACCOUNT, namespace=MODELS_NAMESPACE,
            labels={"app.kubernetes.io/managed-by": "rtip"}),
            automount_service_account_token=False,
            opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=after))
        aws.eks.PodIdentityAssociation(f"{name}-assoc", aws.eks.PodIdentityAssociationArgs(
            cluster_name=cluster.native_id, namespace=MODELS_NAMESPACE,
            service_account=MODEL_SERVICE_ACCOUNT, role_arn=role.arn), opts=child)
        self.register_outputs({"roleArn": role.arn})


__all__ = ["MODEL_SERVICE_ACCOUNT", "AwsModelIdentity", "read_weights_policy"]
