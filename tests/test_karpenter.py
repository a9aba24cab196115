"""EKS node autoscaling: Karpenter above each GPU pool's floor, asserted from the offline record.

Independent sources: the karpenter-crd 1.14.1 CRDs and the karpenter 1.14.1 values.yaml
(../shared/charts/), the Karpenter v1.14 getting-started CloudFormation template (its actions and
EventBridge detail types are written out below as the template states them), the EC2 P5 instance
page (p5.48xlarge: 192 vCPUs, 2,048 GiB, 8 H100), FACTS.md (H100 `all-balanced` layout, the
284 s node provisioning of kaito#2325) and the README's posture table (controller replicas).
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from components.aws.karpenter_iam import controller_policies
from rtip import offline
from rtip.deploycheck import Severity, check_kinds, check_values
from rtip.offline import Record, Resource
from rtip.stackfile import load
from serving import karpenter as kp
from serving.hardware import Cloud
from tests.conftest import SHARED, plan_of, record_of, stack_doc, write_stack
from tests.test_crds import unknown_fields

CRDS = SHARED / "charts" / "karpenter-crd" / "1.14.1" / "crds"
VALUES = SHARED / "charts" / "karpenter" / "1.14.1" / "values.yaml"
AWS_STACKS = ["dev", "staging", "prod"]
KARPENTER_KINDS = ("NodePool", "EC2NodeClass", "NodeOverlay")


@cache
def schema(api_version: str, kind: str) -> dict[str, Any]:
    group, _, version = api_version.rpartition("/")
    for path in CRDS.glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        if crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind:
            (v,) = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
            return v["schema"]["openAPIV3Schema"]
    raise AssertionError(f"karpenter-crd 1.14.1 installs no {api_version} {kind}")


def kind(r: Resource) -> str:
    return r.type.rsplit(":", 1)[-1]


def body(r: Resource) -> dict[str, Any]:
    return {k: r.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}


def cluster_of(record: Record, r: Resource) -> Resource | None:
    return next((a for a in record.ancestors(r) if a.type == "rtip:aws:Cluster"), None)


def karpenter_objects(record: Record, k: str) -> list[Resource]:
    return [r for r in record.resources if r.type.startswith("kubernetes:karpenter") and kind(r) == k]


def pool_object(record: Record, k: str, cluster: Resource, pool: str) -> Resource | None:
    return next((r for r in karpenter_objects(record, k) if cluster_of(record, r) == cluster
                 and r.inputs["metadata"]["name"] == pool), None)


def minutes(duration: str) -> float:
    m = re.fullmatch(r"(\d+)([smh])", duration)
    assert m, duration
    return int(m[1]) * {"s": 1 / 60, "m": 1, "h": 60}[m[2]]


# --- bodies against the CRDs the pinned chart installs -----------------------------------------

@pytest.mark.parametrize("stack", AWS_STACKS)
def test_every_karpenter_object_validates_against_its_crd(stack: str) -> None:
    found = [r for r in record_of(stack).resources if r.type.startswith("kubernetes:karpenter")]
    assert {kind(r) for r in found} >= {"NodePool", "EC2NodeClass"}
    for r in found:
        doc = body(r)
        s = schema(doc["apiVersion"], doc["kind"])
        jsonschema.Draft7Validator(s).validate(doc)
        assert unknown_fields(doc, s) == [], r.urn


def test_consolidation_policy_and_alias_are_values_the_crd_accepts() -> None:
    s = schema(kp.NODEPOOL_API, "NodePool")["properties"]["spec"]["properties"]["disruption"]
    assert "WhenEmpty" in s["properties"]["consolidationPolicy"]["enum"]
    pattern = s["properties"]["consolidateAfter"]["pattern"]
    assert re.fullmatch(pattern, kp.consolidate_after(752.1))


# --- one NodePool per pool, from the same facts as its node group ------------------------------

@pytest.mark.parametrize("stack", AWS_STACKS)
def test_each_pool_grows_from_its_floor_to_its_ceiling(stack: str) -> None:
    record = record_of(stack)
    for region in plan_of(stack).regions_of(Cloud.AWS):
        cluster = next(c for c in record.by_type("rtip:aws:Cluster") if c.name == region.cluster)
        for pool in region.pools:
            groups = [g for g in record.by_type("aws:eks/nodeGroup:NodeGroup")
                      if g.inputs["labels"].get("rtip.dev/pool") == pool.name
                      and cluster_of(record, g) == cluster]
            floor = sum(g.inputs["scalingConfig"]["maxSize"] for g in groups)
            assert floor == pool.min_nodes
            np = pool_object(record, "NodePool", cluster, pool.name)
            if pool.max_nodes == pool.min_nodes:
                assert np is None
                continue
            assert np is not None
            spec = np.inputs["spec"]
            assert floor + int(spec["limits"]["nodes"]) == pool.max_nodes
            template = spec["template"]
            reqs = {r["key"]: r["values"] for r in template["spec"]["requirements"]}
            assert reqs["node.kubernetes.io/instance-type"] == [pool.shape.name]
            assert sorted(reqs["topology.kubernetes.io/zone"]) == sorted(pool.zones)
            assert reqs["karpenter.sh/capacity-type"] == [pool.capacity_type.replace("_", "-")]
            for group in groups:  # what the GPU operator and the workloads select on
                assert template["metadata"]["labels"] == group.inputs["labels"]
                assert [(t["key"], t["value"], t["effect"]) for t in template["spec"]["taints"]] == [
                    (t["key"], t["value"], "NoSchedule") for t in group.inputs["taints"]]
            # WhenEmpty: a node that runs a model pod is never consolidated; and a node stays
            # at least as long as a new one would take to serve again.
            assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
            cold = max((m.cold_start.total_s for m in region.models if m.pool == pool.name), default=0)
            assert minutes(spec["disruption"]["consolidateAfter"]) * 60 >= cold


def test_prod_h100_limits_are_five_p5_nodes() -> None:
    # us-east-1 h100: floor 3, ceiling 8 (rtip plan prod); p5.48xlarge per the EC2 P5 page.
    record = record_of("prod")
    cluster = next(c for c in record.by_type("rtip:aws:Cluster") if c.inputs["region"] == "us-east-1")
    np = pool_object(record, "NodePool", cluster, "h100")
    assert np is not None
    assert np.inputs["spec"]["limits"] == {"nodes": "5", "cpu": str(5 * 192), "memory": f"{5 * 2048}Gi",
                                           "nvidia.com/gpu": str(5 * 8)}


def test_mig_pool_overlay_advertises_the_slices_pods_request() -> None:
    record = record_of("prod")
    plan = plan_of("prod")
    cluster = next(c for c in record.by_type("rtip:aws:Cluster") if c.inputs["region"] == "us-east-1")
    overlay = pool_object(record, "NodeOverlay", cluster, "h100-mig")
    assert overlay is not None
    # FACTS.md: all-balanced on H100-80 = 2x1g.10gb + 1x2g.20gb + 1x3g.40gb per GPU, 8 GPUs a node.
    assert overlay.inputs["spec"]["capacity"] == {"nvidia.com/mig-1g.10gb": "16",
                                                  "nvidia.com/mig-2g.20gb": "8",
                                                  "nvidia.com/mig-3g.40gb": "8"}
    assert overlay.inputs["spec"]["requirements"] == [
        {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["h100-mig"]}]
    for region in plan.regions_of(Cloud.AWS):
        c = next(x for x in record.by_type("rtip:aws:Cluster") if x.name == region.cluster)
        for m in region.models:
            if m.resource.startswith("nvidia.com/mig-"):
                ov = pool_object(record, "NodeOverlay", c, m.pool)
                assert ov is not None and m.resource in ov.inputs["spec"]["capacity"], m.model


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_node_class_launches_where_the_network_says_as_a_node_that_can_join(stack: str) -> None:
    record = record_of(stack)
    for nc in karpenter_objects(record, "EC2NodeClass"):
        cluster = cluster_of(record, nc)
        assert cluster is not None
        spec = nc.inputs["spec"]
        (sub_term,) = spec["subnetSelectorTerms"]
        tagged = [s for s in record.by_type("aws:ec2/subnet:Subnet")
                  if cluster_of(record, s) == cluster
                  and all(s.inputs["tags"].get(k) == v for k, v in sub_term["tags"].items())]
        assert tagged and all(s.inputs["tags"].get("kubernetes.io/role/internal-elb") == "1" for s in tagged)
        (sg_term,) = spec["securityGroupSelectorTerms"]
        eks = next(e for e in record.by_type("aws:eks/cluster:Cluster") if e.parent == cluster.urn)
        sg_id = eks.outputs["vpcConfig"]["clusterSecurityGroupId"]
        assert any(t.inputs["resourceId"] == sg_id and sg_term["tags"] == {t.inputs["key"]: t.inputs["value"]}
                   for t in record.by_type("aws:ec2/tag:Tag"))
        role = next(r for r in record.by_type("aws:iam/role:Role") if r.outputs["name"] == spec["role"])
        entries = [e for e in record.by_type("aws:eks/accessEntry:AccessEntry")
                   if e.inputs["principalArn"] == role.outputs["arn"]]
        assert [e.inputs["type"] for e in entries] == ["EC2_LINUX"]
        assert spec["metadataOptions"]["httpTokens"] == "required"
        assert spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
        (root,) = spec["blockDeviceMappings"]
        assert root["rootVolume"] is True and root["ebs"]["encrypted"] is True
        pool = record.get(nc.parent)
        assert pool.type == "rtip:k8s:GpuPool"
        assert (spec.get("instanceStorePolicy") == "RAID0") is (pool.inputs["nvmePath"] is not None)


# --- controller: chart values, identity, IAM, interruption -------------------------------------

@pytest.mark.parametrize(("stack", "replicas"), [("dev", 1), ("staging", 2), ("prod", 2)])
def test_controller_release_values_and_order(stack: str, replicas: int) -> None:
    record = record_of(stack)
    releases = [r for r in record.by_type("kubernetes:helm.sh/v3:Release") if "karpenter" in r.inputs["name"]]
    assert {r.inputs["name"] for r in releases} == {"karpenter", "karpenter-crd"}
    assert not [f for r in releases for f in check_values(record) if f.urn == r.urn
                and f.severity is not Severity.INFO]
    defaults = yaml.safe_load(VALUES.read_text())
    for rel in (r for r in releases if r.inputs["name"] == "karpenter"):
        crd = next(r for r in releases if r.inputs["name"] == "karpenter-crd" and r.parent == rel.parent)
        assert crd.urn in rel.dependencies
        values = rel.inputs["values"]
        assert values["replicas"] == replicas
        assert set(values["settings"]) <= set(defaults["settings"])
        cluster = cluster_of(record, rel)
        assert cluster is not None
        system = next(n for n in record.by_type("aws:eks/nodeGroup:NodeGroup") if n.parent == cluster.urn)
        assert values["nodeSelector"].items() <= system.inputs["labels"].items()
        assert values["settings"]["clusterName"] == cluster.name
        queue = next(q for q in record.by_type("aws:sqs/queue:Queue") if q.parent == rel.parent)
        assert values["settings"]["interruptionQueue"] == queue.outputs["name"]
        overlays = [o for o in karpenter_objects(record, "NodeOverlay")
                    if cluster_of(record, o) == cluster]
        assert values["settings"]["featureGates"]["nodeOverlay"] is bool(overlays)
        # The chart names its service account after the release (fullname), in its namespace.
        (assoc,) = [a for a in record.by_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                    if a.parent == rel.parent]
        assert (assoc.inputs["namespace"], assoc.inputs["serviceAccount"]) == (
            rel.inputs["namespace"], "karpenter")
        assert assoc.urn in rel.dependencies
    kinds = [f for f in check_kinds(record) if f.severity is Severity.ERROR
             and kind(record.get(f.urn)) in KARPENTER_KINDS]
    assert kinds == []


# The template's actions (website/content/en/v1.14/getting-started/getting-started-with-karpenter/
# cloudformation.yaml), ZonalShift left out because enableZonalShift stays false.
UPSTREAM_ACTIONS = {
    "ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:CreateTags",
    "ec2:TerminateInstances", "ec2:DeleteLaunchTemplate", "iam:PassRole", "iam:CreateInstanceProfile",
    "iam:TagInstanceProfile", "iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile",
    "iam:DeleteInstanceProfile", "eks:DescribeCluster", "sqs:DeleteMessage", "sqs:GetQueueUrl",
    "sqs:ReceiveMessage", "ec2:DescribeCapacityReservations", "ec2:DescribeImages",
    "ec2:DescribeInstances", "ec2:DescribeInstanceStatus", "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplates", "ec2:DescribePlacementGroups",
    "ec2:DescribeSecurityGroups", "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets",
    "ssm:GetParameter", "pricing:GetProducts", "iam:ListInstanceProfiles", "iam:GetInstanceProfile",
}


def _actions(statement: dict[str, Any]) -> list[str]:
    a = statement["Action"]
    return [a] if isinstance(a, str) else list(a)


def test_controller_policy_is_the_templates_scoped_to_one_cluster() -> None:
    record = record_of("prod")
    for comp in record.by_type("rtip:aws:Karpenter"):
        cluster = cluster_of(record, comp)
        assert cluster is not None
        role = next(r for r in record.by_type("aws:iam/role:Role") if r.parent == comp.urn
                    and "pods.eks.amazonaws.com" in r.inputs["assumeRolePolicy"])
        trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
        assert {s["Principal"]["Service"] for s in trust} == {"pods.eks.amazonaws.com"}
        docs = [json.loads(p.inputs["policy"]) for p in record.by_type("aws:iam/rolePolicy:RolePolicy")
                if p.inputs["role"] == role.outputs["id"]]
        statements = [s for d in docs for s in d["Statement"]]
        actions = {a for s in statements for a in _actions(s)}
        assert actions == UPSTREAM_ACTIONS
        assert not any("*" in a for a in actions)
        assert len(json.dumps(docs, separators=(",", ":"))) < 10240  # IAM's inline total per role
        text = json.dumps(statements)
        assert f"kubernetes.io/cluster/{cluster.name}" in text
        region = cluster.inputs["region"]
        eks = next(e for e in record.by_type("aws:eks/cluster:Cluster") if e.parent == cluster.urn)
        eks_account = eks.outputs["arn"].split(":")[4]
        for s in statements:  # every ARN names the cluster's region (IAM is global)
            for arn in [s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"]:
                if arn != "*" and ":iam::" not in arn:
                    assert f":{region}:" in arn, arn
                if arn.startswith("arn:aws:ec2:") and "::" not in arn:  # not an Amazon-owned image
                    assert arn.split(":")[4] == eks_account, arn
        queue = next(q for q in record.by_type("aws:sqs/queue:Queue") if q.parent == comp.urn)
        (sqs,) = [s for s in statements if any(a.startswith("sqs:") for a in _actions(s))]
        assert sqs["Resource"] == queue.outputs["arn"]
        (pass_role,) = [s for s in statements if "iam:PassRole" in _actions(s)]
        node_role = next(r for r in record.by_type("aws:iam/role:Role")
                         if r.parent == comp.urn and r.outputs["arn"] == pass_role["Resource"])
        assert "ec2.amazonaws.com" in node_role.inputs["assumeRolePolicy"]


def test_policy_function_scopes_by_its_arguments() -> None:
    docs = controller_policies("c1", "eu-west-1", "111122223333", "arn:aws:iam::111122223333:role/n",
                               "arn:aws:sqs:eu-west-1:111122223333:q")
    text = json.dumps(docs)
    assert "us-east-1" not in text and "kubernetes.io/cluster/c1" in text
    assert "arn:aws:eks:eu-west-1:111122223333:cluster/c1" in text


# The template's EventBridge detail types, minus capacity-reservation interruptions.
UPSTREAM_EVENTS = {("aws.health", "AWS Health Event"),
                   ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
                   ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
                   ("aws.ec2", "EC2 Instance State-change Notification")}


def test_interruption_queue_takes_only_its_rules_events() -> None:
    record = record_of("prod")
    for comp in record.by_type("rtip:aws:Karpenter"):
        queue = next(q for q in record.by_type("aws:sqs/queue:Queue") if q.parent == comp.urn)
        assert queue.inputs["sqsManagedSseEnabled"] is True
        rules = [r for r in record.by_type("aws:cloudwatch/eventRule:EventRule") if r.parent == comp.urn]
        events = set()
        for rule in rules:
            pattern = json.loads(rule.inputs["eventPattern"])
            events |= {(s, d) for s in pattern["source"] for d in pattern["detail-type"]}
            (target,) = [t for t in record.by_type("aws:cloudwatch/eventTarget:EventTarget")
                         if t.inputs["rule"] == rule.outputs["name"]]
            assert target.inputs["arn"] == queue.outputs["arn"]
        assert events == UPSTREAM_EVENTS
        (policy,) = [p for p in record.by_type("aws:sqs/queuePolicy:QueuePolicy") if p.parent == comp.urn]
        assert policy.inputs["queueUrl"] == queue.outputs["id"]
        doc = json.loads(policy.inputs["policy"])
        allows = [s for s in doc["Statement"] if s["Effect"] == "Allow"]
        assert [s["Principal"] for s in allows] == [{"Service": "events.amazonaws.com"}]
        assert sorted(allows[0]["Condition"]["ArnEquals"]["aws:SourceArn"]) == sorted(
            r.outputs["arn"] for r in rules)


# --- storage ----------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", AWS_STACKS)
def test_ebs_csi_addon_and_one_default_encrypted_gp3_class(stack: str) -> None:
    record = record_of(stack)
    for cluster in record.by_type("rtip:aws:Cluster"):
        (addon,) = [a for a in record.by_type("aws:eks/addon:Addon") if a.parent == cluster.urn
                    and a.inputs["addonName"] == "aws-ebs-csi-driver"]
        (assoc,) = addon.inputs["podIdentityAssociations"]
        assert assoc["serviceAccount"] == "ebs-csi-controller-sa"
        role = next(r for r in record.by_type("aws:iam/role:Role") if r.outputs["arn"] == assoc["roleArn"])
        grants = [g.inputs["policyArn"]
                  for g in record.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                  if g.inputs["role"] == role.outputs["name"]]
        assert grants == ["arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"]
        classes = [s for s in record.by_type("kubernetes:storage.k8s.io/v1:StorageClass")
                   if cluster_of(record, s) == cluster
                   and s.inputs["metadata"].get("annotations", {}).get(
                       "storageclass.kubernetes.io/is-default-class") == "true"]
        (gp3,) = classes
        assert gp3.inputs["metadata"]["name"] == "gp3"
        assert gp3.inputs["provisioner"] == "ebs.csi.aws.com"
        assert gp3.inputs["parameters"]["type"] == "gp3" and gp3.inputs["parameters"]["encrypted"] == "true"
        assert addon.urn in gp3.dependencies
        doc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               **{k: v for k, v in gp3.inputs.items() if k not in ("apiVersion", "kind")}}
        kubernetes_validate.validate(doc, "1.33", strict=True)


# --- the autoscaler each pool names, and the cold start that follows it ------------------------

def test_every_pool_names_the_autoscaler_its_cloud_resources_configure() -> None:
    record = record_of("prod")
    for pool in record.by_type("rtip:k8s:GpuPool"):
        cluster = next(a for a in record.ancestors(pool) if a.type.endswith(":Cluster"))
        name = pool.inputs["autoscaler"]
        if cluster.type == "rtip:aws:Cluster":
            assert name == "karpenter"
            assert pool_object(record, "NodePool", cluster, pool.inputs["pool"]) is not None
        elif cluster.type == "rtip:gcp:Cluster":
            assert name == "gke-cluster-autoscaler"
            (np,) = [r for r in record.children(pool.urn) if r.type == "gcp:container/nodePool:NodePool"]
            scaling = np.inputs["autoscaling"]
            assert (scaling["totalMinNodeCount"], scaling["totalMaxNodeCount"]) == (
                pool.inputs["minNodes"], pool.inputs["maxNodes"])
        else:
            assert name == "aks-cluster-autoscaler"
            (ap,) = [r for r in record.children(pool.urn) if r.type.endswith(":AgentPool")]
            assert ap.inputs["enableAutoScaling"] is True
            assert (ap.inputs["minCount"], ap.inputs["maxCount"]) == (
                pool.inputs["minNodes"], pool.inputs["maxNodes"])


def test_cold_start_node_part_follows_the_pools_autoscaler() -> None:
    record = record_of("prod")
    pools = {(next(a for a in record.ancestors(p) if a.type.endswith(":Cluster")).inputs["region"],
              p.inputs["pool"]): p.inputs["autoscaler"] for p in record.by_type("rtip:k8s:GpuPool")}
    for m in plan_of("prod").models:
        assert m.cold_start.node_autoscaler == pools[(m.region, m.pool)]
        assert m.cold_start.node_provisioning_s == 284  # kaito#2325, the one figure on file


def test_headroom_and_durations_by_hand() -> None:
    pool = kp.KarpenterPool("p", "p5.48xlarge", ("a",), "spot", {}, (), "nvidia.com/gpu", 8, 192, 2048,
                            floor_nodes=2, max_nodes=2, nvme=True)
    assert pool.headroom_nodes == 0 and kp.limits(pool)["nodes"] == "0"
    assert kp.consolidate_after(752.1) == "13m" and kp.consolidate_after(10) == "1m"
    assert kp.node_pool(pool, 60)["spec"]["template"]["spec"]["requirements"][2]["values"] == ["spot"]
    assert kp.node_overlay(pool) is None


def test_the_simulator_keeps_an_empty_node_as_long_as_the_cluster_does() -> None:
    """`rtip simulate` runs node consolidation as emitted: on EKS the NodePool's consolidateAfter
    read back from the record; on GKE and AKS the cluster autoscaler's default unneeded time,
    10 min (the toolkit sets no autoscaler profile)."""
    from stacks.simulation import deployment

    record, plan = record_of("prod"), plan_of("prod")
    clouds = set()
    for mp in plan.models:
        region = plan.region(mp.region)
        ttl = deployment(plan, mp).fleet.node_empty_ttl_s
        clouds.add(region.cloud)
        if region.cloud is not Cloud.AWS:
            assert ttl == 10 * 60, mp
            continue
        cluster = next(c for c in record.by_type("rtip:aws:Cluster") if c.name == region.cluster)
        np = pool_object(record, "NodePool", cluster, mp.pool)
        assert np is not None, (mp.model, mp.region, mp.pool)
        assert ttl == minutes(np.inputs["spec"]["disruption"]["consolidateAfter"]) * 60
    assert clouds == {Cloud.AWS, Cloud.GCP, Cloud.AZURE}


@pytest.fixture(scope="module")
def zone_listed_down(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Record]:
    """staging with `zones_down: [us-east-2a]`: its platform block and its record (built once)."""
    platform = copy.deepcopy(stack_doc("staging")["config"]["rtip:platform"])
    (aws_at,) = [i for i, r in enumerate(platform["regions"]) if r["cloud"] == "aws"]
    platform["regions"][aws_at]["zones_down"] = ["us-east-2a"]
    stack = write_stack(tmp_path_factory.mktemp("zones-down"), platform, "staging")
    return platform, offline.run(load(str(stack)))


def test_a_zone_listed_down_leaves_every_nodepool_and_changes_nothing_else(
        zone_listed_down: tuple[dict[str, Any], Record]) -> None:
    """staging with `zones_down: [us-east-2a]`: its NodePools allow only the other two zones and
    hold drift (the zone's nodes no longer match the requirement: Karpenter would replace them),
    each still valid for the CRD; the cluster and the Karpenter component say so, and every other
    resource of the stack is the same as without it (the plan keeps its replicas and zones)."""
    _, record = zone_listed_down
    before = {(r.type, r.name): r for r in record_of("staging").resources}
    after = {(r.type, r.name): r for r in record.resources}
    assert before.keys() == after.keys()
    changed = {key for key in before if before[key].inputs != after[key].inputs}
    pools = [key for key in after if kind(after[key]) == "NodePool"]
    assert pools
    for key in pools:
        (zone,) = [q for q in body(after[key])["spec"]["template"]["spec"]["requirements"]
                   if q["key"] == "topology.kubernetes.io/zone"]
        assert zone == {"key": "topology.kubernetes.io/zone", "operator": "In",
                        "values": ["us-east-2b", "us-east-2c"]}
        assert body(after[key])["spec"]["disruption"]["budgets"] == [
            {"nodes": "0", "reasons": ["Drifted"]}, {"nodes": "1"}]
        assert body(before[key])["spec"]["disruption"]["budgets"] == [{"nodes": "1"}]
        jsonschema.validate(body(after[key]), schema(kp.NODEPOOL_API, "NodePool"))
    components = {key for key in changed if key[0] in ("rtip:aws:Karpenter", "rtip:aws:Cluster")}
    assert changed == set(pools) | components and len(components) == 2
    assert all(after[key].inputs["zonesDown"] == ["us-east-2a"] for key in components)


def test_rtip_plan_shows_a_zone_listed_down_beside_the_clusters_zones(
        zone_listed_down: tuple[dict[str, Any], Record]) -> None:
    """The same stack: `rtip plan` shows the zone as down and out of the NodePools; the shipped
    staging shows no zone down."""
    import io

    from rich.console import Console

    from rtip import report
    from stacks.plan import load_plan

    platform, record = zone_listed_down
    shown = {}
    for name, rec, plat in (("listed", record, platform), ("shipped", record_of("staging"),
                                                          stack_doc("staging")["config"]["rtip:platform"])):
        out = io.StringIO()
        report.print_tables(report.document(load_plan(plat, load("staging").source), rec),
                            Console(file=out, width=400))
        shown[name] = out.getvalue()
    assert "us-east-2a, us-east-2b, us-east-2c (down: us-east-2a; out of the NodePools)" in shown["listed"]
    assert "(down:" not in shown["shipped"]
