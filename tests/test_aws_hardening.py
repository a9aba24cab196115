"""AWS least privilege and node hardening (issue 12 item 4): every EKS node group on an IMDSv2,
one-hop, encrypted launch template; the VPC CNI's permissions on `aws-node` through Pod Identity
instead of the node roles; Pod Identity roles bound to their account, cluster and service
accounts; node roles able to fill the ECR pull-through caches; iam:ListInstanceProfiles the one
action allowed `Resource: "*"` without configuration. Expected values come from AWS's documents
(quoted at each constant), not from the constants under test."""

from __future__ import annotations

import json
from fnmatch import fnmatch
from typing import Any

import pytest

from policies.rules.iam import iam_no_wildcards
from rtip.check import analyze, environment_config
from rtip.offline import Record, Resource
from tests.conftest import record_of, spec_of

AWS_STACKS = ["dev", "staging", "prod"]
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ADDON = "aws:eks/addon:Addon"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"

# EKS API reference, CreateNodegroup `diskSize`: "The default disk size is 20 GiB for Linux".
EKS_DEFAULT_DISK_GIB = 20
# amazon-vpc-cni-k8s docs/iam-policy.md, "IPv4 mode" (the AmazonEKS_CNI_Policy actions plus
# ec2:DescribeSecurityGroups, which the same list names).
CNI_IPV4_ACTIONS = {
    "ec2:AssignPrivateIpAddresses", "ec2:AttachNetworkInterface", "ec2:CreateNetworkInterface",
    "ec2:DeleteNetworkInterface", "ec2:DescribeInstances", "ec2:DescribeTags",
    "ec2:DescribeNetworkInterfaces", "ec2:DescribeInstanceTypes", "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets", "ec2:DetachNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute",
    "ec2:UnassignPrivateIpAddresses", "ec2:CreateTags",
}
# ECR user guide, "IAM permissions required to sync an upstream registry with an Amazon ECR
# private registry": what the pulling principal needs beyond pulling.
PULL_THROUGH_ACTIONS = {"ecr:BatchImportUpstreamImage", "ecr:CreateRepository"}


def _doc(value: Any) -> dict[str, Any]:
    return json.loads(value) if isinstance(value, str) else value


def _list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _cluster_eks(record: Record, resource: Resource) -> Resource:
    """The EKS cluster of the rtip:aws:Cluster a resource lives under."""
    cluster = next(a for a in [resource, *record.ancestors(resource)] if a.type == "rtip:aws:Cluster")
    return next(e for e in record.by_type("aws:eks/cluster:Cluster") if e.parent == cluster.urn)


def _inline(record: Record, role: Resource) -> list[dict[str, Any]]:
    return [s for p in record.by_type(ROLE_POLICY) if p.inputs["role"] == role.outputs["id"]
            for s in _doc(p.inputs["policy"])["Statement"]]


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_every_node_group_runs_from_an_imdsv2_one_hop_encrypted_template(stack: str) -> None:
    record = record_of(stack)
    templates = {t.outputs["id"]: t for t in record.by_type("aws:ec2/launchTemplate:LaunchTemplate")}
    groups = record.by_type(NODE_GROUP)
    assert any(g.inputs["labels"] == {"rtip.dev/pool": "system"} for g in groups)
    for group in groups:
        template = templates[group.inputs["launchTemplate"]["id"]]
        meta = template.inputs["metadataOptions"]
        assert (meta["httpTokens"], meta["httpPutResponseHopLimit"]) == ("required", 1), group.name
        (root,) = template.inputs["blockDeviceMappings"]
        ebs = root["ebs"]
        assert root["deviceName"] == "/dev/xvda"  # the AL2023 EKS AMIs' root device
        assert (ebs["volumeType"], ebs["encrypted"]) == ("gp3", "true"), group.name
        if group.inputs["labels"] == {"rtip.dev/pool": "system"}:
            assert ebs["volumeSize"] == EKS_DEFAULT_DISK_GIB  # what the group had without a template
            assert "userData" not in template.inputs or not template.inputs["userData"]


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_the_cni_policy_is_on_aws_node_through_pod_identity_not_on_nodes(stack: str) -> None:
    record = record_of(stack)
    assert not [a for a in record.by_type(ATTACHMENT)
                if a.inputs["policyArn"].endswith(":policy/AmazonEKS_CNI_Policy")]
    cnis = [a for a in record.by_type(ADDON) if a.inputs["addonName"] == "vpc-cni"]
    assert cnis
    for cni in cnis:
        eks = _cluster_eks(record, cni)
        region, account = eks.outputs["arn"].split(":")[3:5]
        (assoc,) = cni.inputs["podIdentityAssociations"]
        assert assoc["serviceAccount"] == "aws-node"
        role = next(r for r in record.by_type(ROLE) if r.outputs["arn"] == assoc["roleArn"])
        statements = _inline(record, role)
        assert {a for s in statements for a in _list(s["Action"])} == CNI_IPV4_ACTIONS
        for s in statements:
            for arn in _list(s["Resource"]):
                if arn == "*":
                    assert all(a.startswith("ec2:Describe") for a in _list(s["Action"]))
                else:
                    assert arn.startswith(f"arn:aws:ec2:{region}:{account}:"), arn
        # The network policy agent runs: the add-on's documented key, a string.
        assert json.loads(cni.inputs["configurationValues"]) == {"enableNetworkPolicy": "true"}
        # The Pod Identity agent is there before the CNI asks it for credentials, and both before
        # the first node, whose aws-node has nowhere else to get them.
        agent = next(a for a in record.by_type(ADDON) if a.inputs["addonName"] == "eks-pod-identity-agent"
                     and a.parent == cni.parent)
        assert agent.urn in cni.dependencies
        system = next(g for g in record.by_type(NODE_GROUP) if g.parent == cni.parent)
        assert {agent.urn, cni.urn} <= set(system.dependencies)


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_pod_identity_roles_trust_their_account_cluster_and_service_accounts_only(stack: str) -> None:
    record = record_of(stack)
    # Who uses each role: stand-alone associations and the add-ons' own (in kube-system, where
    # EKS installs the add-ons).
    users: dict[str, set[tuple[str, str]]] = {}
    for a in record.by_type(ASSOCIATION):
        users.setdefault(a.inputs["roleArn"], set()).add((a.inputs["namespace"], a.inputs["serviceAccount"]))
    for addon in record.by_type(ADDON):
        for a in addon.inputs.get("podIdentityAssociations") or []:
            users.setdefault(a["roleArn"], set()).add(("kube-system", a["serviceAccount"]))
    roles = [r for r in record.by_type(ROLE) if "pods.eks.amazonaws.com" in r.inputs["assumeRolePolicy"]]
    assert {r.outputs["arn"] for r in roles} == set(users)
    for role in roles:
        eks = _cluster_eks(record, role)
        account = eks.outputs["arn"].split(":")[4]
        subjects = set()
        for s in _doc(role.inputs["assumeRolePolicy"])["Statement"]:
            assert s["Principal"] == {"Service": "pods.eks.amazonaws.com"}
            # EKS user guide, "Create IAM role with trust policy required by EKS Pod Identity".
            assert sorted(s["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
            cond = s["Condition"]["StringEquals"]
            assert cond["aws:SourceAccount"] == account
            assert cond["aws:RequestTag/eks-cluster-arn"] == eks.outputs["arn"]
            subjects.add((cond["aws:RequestTag/kubernetes-namespace"],
                          cond["aws:RequestTag/kubernetes-service-account"]))
        assert subjects == users[role.outputs["arn"]], role.name


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_every_node_role_can_fill_the_pull_through_caches_and_nothing_else(stack: str) -> None:
    record = record_of(stack)
    prefix = spec_of(stack).registries.name_prefix
    node_roles = [r for r in record.by_type(ROLE) if "ec2.amazonaws.com" in r.inputs["assumeRolePolicy"]]
    # The system and GPU groups' role, and Karpenter's node role, in every cluster.
    assert len(node_roles) == 2 * len(record.by_type("rtip:aws:Cluster"))
    rules = record.by_type("aws:ecr/pullThroughCacheRule:PullThroughCacheRule")
    for role in node_roles:
        eks = _cluster_eks(record, role)
        region, account = eks.outputs["arn"].split(":")[3:5]
        (grant,) = [s for s in _inline(record, role) if set(_list(s["Action"])) & PULL_THROUGH_ACTIONS]
        assert set(_list(grant["Action"])) == PULL_THROUGH_ACTIONS
        (resource,) = _list(grant["Resource"])
        assert resource == f"arn:aws:ecr:{region}:{account}:repository/{prefix}/*"
        # Every cache the region's rules fill is covered.
        for rule in rules:
            repo = f"{rule.inputs['ecrRepositoryPrefix']}/some/image"
            assert fnmatch(f"arn:aws:ecr:{region}:{account}:repository/{repo}", resource)


def _statement(action: str) -> dict[str, Any]:
    return {"policy": json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "S", "Effect": "Allow", "Action": action, "Resource": "*"}]})}


def test_only_actions_without_a_resource_type_pass_unscoped_without_configuration() -> None:
    # Service Authorization Reference (IAM): ListInstanceProfiles lists no resource type;
    # ListRoles and GetInstanceProfile take role and instance-profile ARNs.
    assert list(iam_no_wildcards(ROLE_POLICY, _statement("iam:ListInstanceProfiles"), {})) == []
    for action in ("iam:ListRoles", "iam:GetInstanceProfile", "iam:List*"):
        assert list(iam_no_wildcards(ROLE_POLICY, _statement(action), {})), action


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_no_imds_or_iam_findings_in_the_clusters(stack: str) -> None:
    record = record_of(stack)
    policies = {"eks-imdsv2-one-hop", "iam-no-broad-managed-policies", "iam-trust-scoped",
                "iam-no-wildcards"}
    found = [v for v in analyze(record, environment_config(stack)) if v.policy in policies]
    # Only the registries' own roles (components/aws/registries.py) may remain here.
    assert all("rtip:aws:Registries$" in v.urn for v in found), [(v.policy, v.urn) for v in found]
