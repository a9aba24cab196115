"""The AWS cluster path, asserted from the offline record of each stack."""

from __future__ import annotations

import base64
import email
import json
from ipaddress import ip_network

import pytest
import yaml

from components.aws.network import subnet_plan
from serving.hardware import Cloud
from stacks.plan import RegionPlan
from stacks.schema import AwsRegion
from tests.conftest import plan_of, record_of, spec_of

AWS_STACKS = ["dev", "staging", "prod"]


def aws_regions(stack: str) -> list[AwsRegion]:
    return [r for r in spec_of(stack).regions if isinstance(r, AwsRegion)]


def aws_plans(stack: str) -> list[RegionPlan]:
    return list(plan_of(stack).regions_of(Cloud.AWS))


def provider_region(record, res) -> str:
    return record.get(res.provider).inputs["region"]


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_every_aws_region_gets_a_cluster_on_its_own_provider(stack) -> None:
    record = record_of(stack)
    clusters = {r.inputs["region"]: r for r in record.by_type("rtip:aws:Cluster")}
    assert set(clusters) == {r.region for r in aws_regions(stack)}
    for res in record.resources:
        if not res.type.startswith("aws:"):
            continue
        owners = [a for a in record.ancestors(res) if a.type in ("rtip:aws:Cluster", "rtip:aws:Registries")]
        assert owners, res.urn
        if owners[0].type == "rtip:aws:Cluster":
            assert provider_region(record, res) == owners[0].inputs["region"], res.urn
        else:
            assert provider_region(record, res) in owners[0].inputs["regions"], res.urn


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_subnets_in_every_zone_inside_the_region_network(stack) -> None:
    record = record_of(stack)
    for region in aws_regions(stack):
        subnets = [s for s in record.by_type("aws:ec2/subnet:Subnet")
                   if provider_region(record, s) == region.region]
        zones = sorted(s.inputs["availabilityZone"] for s in subnets)
        assert zones == sorted(region.zones * 2)  # one public and one private per zone
        nets = [ip_network(s.inputs["cidrBlock"]) for s in subnets]
        assert all(n.subnet_of(region.network.cidr) for n in nets)
        assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1:])


def test_subnet_plan_rejects_too_many_zones() -> None:
    with pytest.raises(ValueError, match="at most 7 zones"):
        subnet_plan(ip_network("10.0.0.0/16"), [f"z{i}" for i in range(8)])


@pytest.mark.parametrize(("stack", "per_zone"), [("dev", False), ("staging", True), ("prod", True)])
def test_nat_gateways_per_zone_where_the_posture_says(stack, per_zone) -> None:
    record = record_of(stack)
    for region in aws_regions(stack):
        nats = [n for n in record.by_type("aws:ec2/natGateway:NatGateway")
                if provider_region(record, n) == region.region]
        assert len(nats) == (len(region.zones) if per_zone else 1)


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_eks_cluster_security(stack) -> None:
    record = record_of(stack)
    # Read off the stack file: prod's API is private, dev and staging list their CI networks.
    private = spec_of(stack).environment == "prod"
    keyed = spec_of(stack).environment in ("staging", "prod")
    for eks in record.by_type("aws:eks/cluster:Cluster"):
        vpc = eks.inputs["vpcConfig"]
        assert vpc["endpointPrivateAccess"] is True
        assert vpc["endpointPublicAccess"] is (not private)
        if not private:
            assert "0.0.0.0/0" not in vpc["publicAccessCidrs"]
        assert eks.inputs["accessConfig"]["authenticationMode"] == "API"
        keys = [k for k in record.by_type("aws:kms/key:Key") if k.parent == eks.parent]
        if keyed:
            enc = eks.inputs["encryptionConfig"]
            assert enc["resources"] == ["secrets"]
            (key,) = keys
            assert enc["provider"]["keyArn"] == key.outputs["arn"]
            assert key.inputs["enableKeyRotation"] is True
        else:
            assert "encryptionConfig" not in eks.inputs and not keys
        assert eks.inputs["version"] == spec_of(stack).kubernetes_version
        assert eks.inputs.get("deletionProtection", False) is private


def gpu_node_groups(record):
    return [n for n in record.by_type("aws:eks/nodeGroup:NodeGroup")
            if record.get(n.parent).type == "rtip:k8s:GpuPool"]


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_one_gpu_node_group_per_pool_with_taint_labels_and_ami(stack) -> None:
    record = record_of(stack)
    groups = gpu_node_groups(record)
    expected = [(r.name, p) for r in aws_plans(stack) for p in r.pools]
    assert len(groups) == len(expected)
    for region, pool in expected:
        group = next(g for g in groups if g.inputs["labels"]["rtip.dev/pool"] == pool.name
                     and provider_region(record, g) == region)
        assert group.inputs["amiType"] == "AL2023_x86_64_NVIDIA"
        assert group.inputs["instanceTypes"] == [pool.shape.name]
        assert group.inputs["taints"] == [{"key": "nvidia.com/gpu", "value": "true",
                                           "effect": "NO_SCHEDULE"}]
        # The node group is the pool's floor, fixed; Karpenter adds the nodes above it.
        scaling = group.inputs["scalingConfig"]
        assert scaling == {"minSize": pool.min_nodes, "maxSize": pool.min_nodes,
                           "desiredSize": pool.min_nodes}
        assert group.inputs["capacityType"] == ("SPOT" if pool.capacity_type == "spot" else "ON_DEMAND")
        labels = group.inputs["labels"]
        assert labels["rtip.dev/sharing"] == str(pool.sharing.mode)
        if pool.sharing.mode == "mig":
            assert labels["nvidia.com/mig.config"] == (pool.sharing.layout or f"rtip-{pool.name}")  # type: ignore[union-attr]
        if pool.sharing.mode == "time_slice":
            assert labels["nvidia.com/device-plugin.config"] == f"rtip-{pool.name}"
        # Spread over the pool's zones: one private subnet in each.
        subnets = {s.outputs["id"]: s for s in record.by_type("aws:ec2/subnet:Subnet")}
        zones = sorted(subnets[i].inputs["availabilityZone"] for i in group.inputs["subnetIds"])
        assert zones == sorted(pool.zones)
        assert all(subnets[i].inputs["tags"].get("kubernetes.io/role/internal-elb") == "1"
                   for i in group.inputs["subnetIds"])


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_gpu_launch_template_assembles_nvme_raid0(stack) -> None:
    record = record_of(stack)
    for group in gpu_node_groups(record):
        lt = next(t for t in record.by_type("aws:ec2/launchTemplate:LaunchTemplate")
                  if t.outputs["id"] == group.inputs["launchTemplate"]["id"])
        assert lt.parent == group.parent
        message = email.message_from_string(base64.b64decode(lt.inputs["userData"]).decode())
        assert message.is_multipart()
        (part,) = [p for p in message.get_payload() if p.get_content_type() == "application/node.eks.aws"]
        node_config = yaml.safe_load(part.get_payload())
        assert node_config["kind"] == "NodeConfig"
        assert node_config["spec"]["instance"]["localStorage"]["strategy"] == "RAID0"
        assert lt.inputs["metadataOptions"]["httpTokens"] == "required"
        pool = record.get(group.parent)
        assert pool.inputs["nvmePath"] == "/mnt/k8s-disks/0"  # nodeadm's RAID0 mount point


def test_system_node_group_and_addons() -> None:
    record = record_of("prod")
    for cluster in record.by_type("rtip:aws:Cluster"):
        system = [n for n in record.by_type("aws:eks/nodeGroup:NodeGroup")
                  if n.parent == cluster.urn]
        assert len(system) == 1 and system[0].inputs["labels"] == {"rtip.dev/pool": "system"}
        assert system[0].inputs["instanceTypes"] == ["m7i.2xlarge"]
        addons = {a.inputs["addonName"] for a in record.by_type("aws:eks/addon:Addon")
                  if a.parent == cluster.urn}
        assert addons == {"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent",
                          "aws-ebs-csi-driver"}  # block volumes for PersistentVolumeClaims


def test_iam_roles_trust_only_aws_services() -> None:
    record = record_of("prod")
    for att in record.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment"):
        assert att.inputs["policyArn"].startswith("arn:aws:iam::aws:policy/")
    for role in record.by_type("aws:iam/role:Role"):
        doc = json.loads(role.inputs["assumeRolePolicy"])
        principals = {s["Principal"]["Service"] for s in doc["Statement"]}
        assert principals <= {"eks.amazonaws.com", "ec2.amazonaws.com", "pods.eks.amazonaws.com",
                              "s3.amazonaws.com"}


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_kubernetes_provider_comes_from_the_cluster_kubeconfig(stack) -> None:
    record = record_of(stack)
    for provider in record.by_type("pulumi:providers:kubernetes"):
        cluster = record.get(provider.parent)
        assert cluster.type.startswith("rtip:") and cluster.type.endswith(":Cluster")
        if cluster.type != "rtip:aws:Cluster":
            continue  # other clouds' providers are asserted in their own test files
        eks = next(e for e in record.by_type("aws:eks/cluster:Cluster") if e.parent == cluster.urn)
        assert eks.urn in provider.dependencies or any(
            record.get(d).parent == cluster.urn for d in provider.dependencies)
    for ns in record.by_type("kubernetes:core/v1:Namespace"):
        cluster = next(a for a in record.ancestors(ns)
                       if a.type.startswith("rtip:") and a.type.endswith(":Cluster"))
        assert record.get(ns.provider).parent == cluster.urn
