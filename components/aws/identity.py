"""EKS Pod Identity for model pods: read the cluster's own regional weights bucket, nothing else."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pulumi
import pulumi_aws as aws

from components.aws.cluster import AwsCluster
from components.aws.registries import AwsStore
from components.aws.roles import pod_role
from components.identity import MODEL_SERVER, ModelIdentity, Subject
from stacks.naming import MODELS_PREFIX


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


class AwsModelIdentity(ModelIdentity[AwsCluster, AwsStore]):
    TYPE = "rtip:aws:ModelIdentity"

    def bind(self, name: str, cluster: AwsCluster, store: AwsStore,
             trusted: Sequence[Subject]) -> Mapping[str, pulumi.Input[str]] | None:
        # Only the trusted service accounts, on this cluster, can take the role.
        role = pod_role(f"{name}-role", cluster.eks,
                        [(s.namespace, s.service_account) for s in trusted], self.child)
        policy_inputs = [store.bucket_arn, *([store.key_arn] if store.key_arn else [])]
        aws.iam.RolePolicy(f"{name}-weights", aws.iam.RolePolicyArgs(
            role=role.id,
            policy=pulumi.Output.all(*policy_inputs).apply(
                lambda a: read_weights_policy(a[0], a[1] if len(a) > 1 else None)),
        ), opts=self.child)
        # One association per trusted service account, all to the same read-only role.
        for subject in trusted:
            suffix = "" if subject == MODEL_SERVER else f"-{subject.service_account}"
            aws.eks.PodIdentityAssociation(f"{name}-assoc{suffix}", aws.eks.PodIdentityAssociationArgs(
                cluster_name=cluster.facts.native_id, namespace=subject.namespace,
                service_account=subject.service_account, role_arn=role.arn), opts=self.child)
        # EKS Pod Identity needs no annotation: the association names the service account.
        return None


__all__ = ["AwsModelIdentity", "read_weights_policy"]
