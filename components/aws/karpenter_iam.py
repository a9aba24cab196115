"""The Karpenter controller's IAM policy and the interruption queue's policy, as plain documents.

Source: the CloudFormation template the Karpenter project documents for v1.14
(aws/karpenter-provider-aws, website/content/en/v1.14/getting-started/getting-started-with-karpenter/
cloudformation.yaml, identical to the `docs` copy at tag v1.14.1). Its policies are kept statement
for statement (NodeLifecycle, IAMIntegration, EKSIntegration, Interruption, ResourceDiscovery),
scoped to one cluster, one region and one account as the template scopes them, except:
- EC2 ARNs name the cluster's account where the template writes `*` (the VPC, its subnets and
  security groups are the stack's own, never shared from another account);
- the ZonalShift policy is left out: the chart's `settings.enableZonalShift` stays false, so the
  controller never calls `arc-zonal-shift:GetManagedResource`;
- the interruption queue's policy lets only EventBridge send, and only from this cluster's rules
  (`aws:SourceArn`); the template also admits `sqs.amazonaws.com` and any rule.
Every action is named (no `ec2:*`); `Resource: "*"` remains only where the template has it, for
the Describe calls and `pricing:GetProducts`/`iam:ListInstanceProfiles`, which take no resource
ARN, and those are held to the region by `aws:RequestedRegion` where the template does so.
"""

from __future__ import annotations

import json
from typing import Any


def _ec2(partition: str, region: str, account: str, kind: str) -> str:
    return f"arn:{partition}:ec2:{region}:{account}:{kind}/*"


def controller_policies(cluster: str, region: str, account: str, node_role_arn: str,
                        queue_arn: str, partition: str = "aws") -> dict[str, dict[str, Any]]:
    """The controller's policies by name, each a policy document."""
    owned = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster}": "owned"}
    request_owned = {f"aws:RequestTag/kubernetes.io/cluster/{cluster}": "owned",
                     "aws:RequestTag/eks:eks-cluster-name": cluster}
    launched = [_ec2(partition, region, account, k) for k in (
        "fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request")]
    profile = f"arn:{partition}:iam::{account}:instance-profile/*"
    region_tag = "topology.kubernetes.io/region"
    lifecycle = [
        {"Sid": "AllowScopedEC2InstanceAccessActions", "Effect": "Allow",
         "Resource": [f"arn:{partition}:ec2:{region}::image/*", f"arn:{partition}:ec2:{region}::snapshot/*",
                      *(_ec2(partition, region, account, k) for k in (
                          "security-group", "subnet", "capacity-reservation", "placement-group"))],
         "Action": ["ec2:RunInstances", "ec2:CreateFleet"]},
        {"Sid": "AllowScopedEC2LaunchTemplateAccessActions", "Effect": "Allow",
         "Resource": _ec2(partition, region, account, "launch-template"),
         "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
         "Condition": {"StringEquals": owned,
                       "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}}},
        {"Sid": "AllowScopedEC2InstanceActionsWithTags", "Effect": "Allow", "Resource": launched,
         "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
         "Condition": {"StringEquals": request_owned,
                       "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}}},
        {"Sid": "AllowScopedResourceCreationTagging", "Effect": "Allow", "Resource": launched,
         "Action": "ec2:CreateTags",
         "Condition": {"StringEquals": {**request_owned, "ec2:CreateAction": [
             "RunInstances", "CreateFleet", "CreateLaunchTemplate"]},
             "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}}},
        {"Sid": "AllowScopedResourceTagging", "Effect": "Allow",
         "Resource": _ec2(partition, region, account, "instance"), "Action": "ec2:CreateTags",
         "Condition": {"StringEquals": owned,
                       "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                       "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster},
                       "ForAllValues:StringEquals": {"aws:TagKeys": [
                           "eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]}}},
        {"Sid": "AllowScopedDeletion", "Effect": "Allow",
         "Resource": [_ec2(partition, region, account, "instance"),
                      _ec2(partition, region, account, "launch-template")],
         "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
         "Condition": {"StringEquals": owned,
                       "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}}},
    ]
    iam = [
        {"Sid": "AllowPassingInstanceRole", "Effect": "Allow", "Resource": node_role_arn,
         "Action": "iam:PassRole",
         "Condition": {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com"]}}},
        {"Sid": "AllowScopedInstanceProfileCreationActions", "Effect": "Allow", "Resource": profile,
         "Action": ["iam:CreateInstanceProfile"],
         "Condition": {"StringEquals": {**request_owned, f"aws:RequestTag/{region_tag}": region},
                       "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"}}},
        {"Sid": "AllowScopedInstanceProfileTagActions", "Effect": "Allow", "Resource": profile,
         "Action": ["iam:TagInstanceProfile"],
         "Condition": {"StringEquals": {**owned, f"aws:ResourceTag/{region_tag}": region, **request_owned,
                                        f"aws:RequestTag/{region_tag}": region},
                       "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                                      "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"}}},
        {"Sid": "AllowScopedInstanceProfileActions", "Effect": "Allow", "Resource": profile,
         "Action": ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile",
                    "iam:DeleteInstanceProfile"],
         "Condition": {"StringEquals": {**owned, f"aws:ResourceTag/{region_tag}": region},
                       "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"}}},
    ]
    eks = [{"Sid": "AllowAPIServerEndpointDiscovery", "Effect": "Allow",
            "Resource": f"arn:{partition}:eks:{region}:{account}:cluster/{cluster}",
            "Action": "eks:DescribeCluster"}]
    interruption = [{"Sid": "AllowInterruptionQueueActions", "Effect": "Allow", "Resource": queue_arn,
                     "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"]}]
    discovery = [
        {"Sid": "AllowRegionalReadActions", "Effect": "Allow", "Resource": "*",
         "Action": ["ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstances",
                    "ec2:DescribeInstanceStatus", "ec2:DescribeInstanceTypeOfferings",
                    "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplates",
                    "ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets"],
         "Condition": {"StringEquals": {"aws:RequestedRegion": region}}},
        {"Sid": "AllowSSMReadActions", "Effect": "Allow",
         "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*", "Action": "ssm:GetParameter"},
        {"Sid": "AllowPricingReadActions", "Effect": "Allow", "Resource": "*",
         "Action": "pricing:GetProducts"},
        # The Service Authorization Reference lists no resource type for this action: "*" is its
        # only form (policies/rules/iam.py allows exactly this action unscoped).
        {"Sid": "AllowUnscopedInstanceProfileListAction", "Effect": "Allow", "Resource": "*",
         "Action": "iam:ListInstanceProfiles"},
        {"Sid": "AllowInstanceProfileReadActions", "Effect": "Allow", "Resource": profile,
         "Action": "iam:GetInstanceProfile"},
    ]
    groups = {"node-lifecycle": lifecycle, "iam-integration": iam, "eks-integration": eks,
              "interruption": interruption, "resource-discovery": discovery}
    return {name: {"Version": "2012-10-17", "Statement": s} for name, s in groups.items()}


def queue_policy(queue_arn: str, rule_arns: list[str]) -> str:
    """Only this cluster's EventBridge rules may send; nothing reaches the queue without TLS."""
    return json.dumps({"Version": "2012-10-17", "Id": "EC2InterruptionPolicy", "Statement": [
        {"Sid": "EventBridgeRulesSend", "Effect": "Allow",
         "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage",
         "Resource": queue_arn, "Condition": {"ArnEquals": {"aws:SourceArn": sorted(rule_arns)}}},
        {"Sid": "DenyHTTP", "Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": queue_arn,
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
    ]})


# EventBridge rules whose events the controller acts on (the same template; the controller's
# interruption handling: spot interruption warnings and rebalance recommendations cordon and
# drain ahead of the reclaim, state changes notice stopped or terminated instances, AWS Health
# scheduled changes replace instances due for maintenance). The template's fifth rule, capacity
# reservation interruptions, is left out: no EC2NodeClass here selects a capacity reservation.
INTERRUPTION_RULES: dict[str, dict[str, list[str]]] = {
    "scheduled-change": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "instance-state-change": {"source": ["aws.ec2"],
                              "detail-type": ["EC2 Instance State-change Notification"]},
}
# The template keeps interruption messages 300 s: older ones are past acting on.
QUEUE_RETENTION_S = 300


__all__ = ["INTERRUPTION_RULES", "QUEUE_RETENTION_S", "controller_policies", "queue_policy"]
