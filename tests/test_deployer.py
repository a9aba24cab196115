"""The deployer: the stack says where `pulumi up` runs and as whom; every cluster grants it.

Expected values come from the clouds' documents, written out here: the EKS access policy ARN
(EKS user guide, "access policies"), the AKS RBAC Cluster Admin role ID (FACTS.md section 9), the
GKE role (IAM roles for Kubernetes Engine).
"""

from __future__ import annotations

import copy

from rtip.cli import main
from rtip.deploycheck.graph import waits_for
from tests.conftest import record_of, stack_doc, write_stack

EKS_ADMIN = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
AKS_RBAC_CLUSTER_ADMIN = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
ROLE = "arn:aws:iam::123456789012:role/rtip-deployer"


def _platform(stack: str) -> dict:
    return copy.deepcopy(stack_doc(stack)["config"]["rtip:platform"])


def _errors(tmp_path, capsys, platform: dict) -> str:
    assert main(["plan", str(write_stack(tmp_path, platform)), "--json"]) == 2
    return capsys.readouterr().err


def test_prod_without_a_deployer_is_refused(tmp_path, capsys) -> None:
    platform = _platform("prod")
    del platform["deployer"]
    err = _errors(tmp_path, capsys, platform)
    assert "rtip:platform.deployer: prod clusters have private API endpoints only" in err


def test_private_api_with_a_runner_outside_names_the_key_and_the_fix(tmp_path, capsys) -> None:
    platform = _platform("prod")
    platform["deployer"]["network"] = "public"
    err = _errors(tmp_path, capsys, platform)
    assert "rtip:platform.deployer.network:" in err and "set network: inside" in err


def test_a_cloud_without_its_identity_is_refused(tmp_path, capsys) -> None:
    platform = _platform("prod")
    del platform["deployer"]["gcp"]
    assert "rtip:platform.deployer.gcp: the stack has gcp regions" in _errors(tmp_path, capsys, platform)


def test_public_runner_must_be_admitted_by_every_api(tmp_path, capsys) -> None:
    platform = _platform("dev")
    platform["deployer"]["cidrs"] = ["198.51.100.0/28"]  # dev admits 203.0.113.0/24 only
    err = _errors(tmp_path, capsys, platform)
    assert "rtip:platform.deployer.cidrs[0]: 198.51.100.0/28 is not admitted by regions[0]" in err


def test_bad_identities_are_plain_words(tmp_path, capsys) -> None:
    platform = _platform("prod")
    platform["deployer"]["aws"]["role_arn"] = "arn:aws:iam::12:user/me"
    platform["deployer"]["azure"]["object_id"] = "not-a-guid"
    err = _errors(tmp_path, capsys, platform)
    assert "deployer.aws.role_arn: an IAM role ARN" in err
    assert "deployer.azure.object_id: a GUID" in err


def test_eks_grants_the_declared_role_cluster_admin_and_no_creator() -> None:
    record = record_of("prod")
    clusters = record.by_type("aws:eks/cluster:Cluster")
    assert clusters
    for eks in clusters:
        assert eks.inputs["accessConfig"]["bootstrapClusterCreatorAdminPermissions"] is False
        name = eks.outputs["name"]
        entries = [r for r in record.by_type("aws:eks/accessEntry:AccessEntry")
                   if r.inputs["clusterName"] == name and r.inputs["principalArn"] == ROLE]
        admin = [r for r in record.by_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
                 if r.inputs["clusterName"] == name and r.inputs["principalArn"] == ROLE]
        assert len(entries) == 1 and len(admin) == 1
        assert admin[0].inputs["policyArn"] == EKS_ADMIN
        assert admin[0].inputs["accessScope"] == {"type": "cluster"}


def test_aks_grants_rbac_cluster_admin_at_the_cluster() -> None:
    record = record_of("prod")
    (aks,) = record.by_type("azure-native:containerservice:ManagedCluster")
    object_id = stack_doc("prod")["config"]["rtip:platform"]["deployer"]["azure"]["object_id"]
    found = [r for r in record.by_type("azure-native:authorization:RoleAssignment")
             if r.inputs["principalId"] == object_id]
    assert len(found) == 1
    assert found[0].inputs["scope"] == aks.outputs["id"]
    subscription = aks.outputs["id"].split("/")[2]
    assert found[0].inputs["roleDefinitionId"] == (
        f"/subscriptions/{subscription}/providers/Microsoft.Authorization/roleDefinitions/"
        f"{AKS_RBAC_CLUSTER_ADMIN}")


def test_gke_grants_kubernetes_engine_admin_on_the_one_cluster() -> None:
    record = record_of("prod")
    (gke,) = record.by_type("gcp:container/cluster:Cluster")
    member = "serviceAccount:rtip-deployer@rtip-prod-serving.iam.gserviceaccount.com"
    found = [r for r in record.by_type("gcp:projects/iAMMember:IAMMember") if r.inputs["member"] == member]
    assert len(found) == 1
    assert found[0].inputs["role"] == "roles/container.admin"
    assert found[0].inputs["project"] == gke.inputs["project"]
    # The condition names the cluster as GKE's resource name (projects/P/locations/L/clusters/C).
    assert (f'"projects/{gke.inputs["project"]}/locations/{gke.inputs["location"]}/clusters/'
            f'{gke.inputs["name"]}"') in found[0].inputs["condition"]["expression"]


def test_every_kubernetes_provider_waits_for_its_grant() -> None:
    record = record_of("prod")
    grant_types = {"aws:eks/accessPolicyAssociation:AccessPolicyAssociation",
                   "azure-native:authorization:RoleAssignment", "gcp:projects/iAMMember:IAMMember"}
    providers = record.by_type("pulumi:providers:kubernetes")
    assert len(providers) == 4
    for provider in providers:
        waited = {record.get(u).type for u in waits_for(record, provider)
                  if u in {r.urn for r in record.resources} and record.get(u).name.endswith("-deployer")}
        assert waited & grant_types, provider.name


def test_without_a_deployer_eks_keeps_its_creator_as_admin(tmp_path) -> None:
    from rtip import offline
    from rtip.stackfile import load

    platform = _platform("dev")
    del platform["deployer"]
    record = offline.run(load(str(write_stack(tmp_path, platform, "nodeployer"))))
    (eks,) = record.by_type("aws:eks/cluster:Cluster")
    assert eks.inputs["accessConfig"]["bootstrapClusterCreatorAdminPermissions"] is True
    assert not [r for r in record.by_type("aws:eks/accessEntry:AccessEntry") if r.name.endswith("-deployer")]
