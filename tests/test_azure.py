"""The AKS cluster path, asserted from the offline record of the prod stack (its Azure region)."""

from __future__ import annotations

import copy
import json
from ipaddress import ip_network

import pytest
from pulumi.runtime.sync_await import _sync_await

from components.azure.cluster import AKS_AAD_SERVER_ID, AKS_USER
from components.azure.network import DNS_SERVICE_IP, POD_CIDR, SERVICE_CIDR, address_plan
from components.azure.nodes import EPHEMERAL_OS_CAPACITY_GIB, GPU_INSTANCE_PROFILE, os_disk_gib
from components.cluster import exec_kubeconfig
from rtip import offline
from rtip.cli import main
from rtip.stackfile import load
from rtip.synth import AZURE_SUBSCRIPTION
from serving.hardware import GPUS, MACHINES, Cloud
from stacks.naming import AKS_POOL_NAME, aks_pool_name
from stacks.schema import AzureRegion
from tests.conftest import only_regions, plan_of, record_of, spec_of, stack_doc, write_stack

CLUSTER = "rtip:azure:Cluster"
MANAGED_CLUSTER = "azure-native:containerservice:ManagedCluster"
AGENT_POOL = "azure-native:containerservice:AgentPool"


def azure_regions(stack: str = "prod") -> list[AzureRegion]:
    return [r for r in spec_of(stack).regions if isinstance(r, AzureRegion)]


def cluster_of(record, res):
    return next(a for a in record.ancestors(res) if a.type == CLUSTER)


def node_subnets(record) -> list:
    return [s for s in record.by_type("azure-native:network:Subnet") if s.inputs["subnetName"] == "nodes"]


def test_prod_azure_region_is_built() -> None:
    record = record_of("prod")
    clusters = {c.inputs["region"]: c for c in record.by_type(CLUSTER)}
    assert set(clusters) == {r.region for r in azure_regions()}
    (region,) = azure_regions()
    assert clusters["eastus"].inputs == {"cloud": "azure", "region": "eastus", "zones": region.zones,
                                         "kubernetesVersion": spec_of("prod").kubernetes_version}


def test_every_azure_resource_goes_through_its_region_provider() -> None:
    record = record_of("prod")
    # Resources under a cluster; the registries serve every cluster (tests/test_registries_azure.py).
    azure = [r for r in record.resources if r.type.startswith("azure-native:")
             and any(a.type == CLUSTER for a in record.ancestors(r))]
    assert azure
    untagged = {"azure-native:network:Subnet", "azure-native:managedidentity:FederatedIdentityCredential",
                "azure-native:authorization:RoleAssignment",
                "azure-native:network:PrivateDnsZoneGroup"}  # these ARM types take no tags
    for res in azure:
        provider = record.get(res.provider)
        assert provider.type == "pulumi:providers:azure-native", res.urn
        assert provider.inputs["location"] == cluster_of(record, res).inputs["region"], res.urn
        if res.type not in untagged:
            assert res.inputs["tags"]["rtip-cluster"] == cluster_of(record, res).name, res.urn


def test_resource_group_and_vnet_inside_the_region_network() -> None:
    record = record_of("prod")
    (region,) = azure_regions()
    (group,) = [g for g in record.by_type("azure-native:resources:ResourceGroup")
                if record.get(g.parent).type == CLUSTER]
    assert group.inputs["location"] == region.region
    assert group.outputs["id"] == f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/rtip-prod-eastus"
    (vnet,) = record.by_type("azure-native:network:VirtualNetwork")
    assert vnet.inputs["addressSpace"]["addressPrefixes"] == [str(region.network.cidr)]
    assert vnet.inputs["resourceGroupName"] == group.outputs["name"]
    (subnet,) = node_subnets(record)
    nodes = ip_network(subnet.inputs["addressPrefix"])
    assert nodes.subnet_of(region.network.cidr)
    assert subnet.inputs["virtualNetworkName"] == vnet.outputs["name"]
    # Overlay ranges are outside the VNet (and out of every region's 10/8 network).
    for cidr in (POD_CIDR, SERVICE_CIDR):
        assert not ip_network(cidr).overlaps(region.network.cidr)
        assert not ip_network(cidr).overlaps(ip_network("10.0.0.0/8"))
    assert ip_network(f"{DNS_SERVICE_IP}/32").subnet_of(ip_network(SERVICE_CIDR))


def test_address_plan_gives_private_endpoints_the_second_block() -> None:
    plan = address_plan(ip_network("10.40.0.0/20"))
    assert str(plan.nodes) == "10.40.0.0/22"
    assert str(plan.endpoints) == "10.40.4.0/22"
    assert [str(r) for r in plan.reserved] == ["10.40.8.0/22", "10.40.12.0/22"]


def test_managed_cluster_security_and_identity() -> None:
    record = record_of("prod")
    (aks,) = record.by_type(MANAGED_CLUSTER)
    i = aks.inputs
    assert i["oidcIssuerProfile"] == {"enabled": True}
    assert i["securityProfile"]["workloadIdentity"] == {"enabled": True}
    # prod's posture encrypts secrets with a customer key: AKS's KMS plugin then needs a
    # user-assigned control-plane identity, granted Key Vault Crypto User on that one key.
    (kms_identity,) = [u for u in record.by_type("azure-native:managedidentity:UserAssignedIdentity")
                       if u.inputs["resourceName"] == "rtip-prod-eastus-control-plane"]
    assert i["identity"] == {"type": "UserAssigned",
                             "userAssignedIdentities": {kms_identity.outputs["id"]: {}}}
    kms = i["securityProfile"]["azureKeyVaultKms"]
    (key,) = [k for k in record.by_type("azure-native:keyvault:Key") if k.inputs["keyName"] == "kms"]
    (vault,) = [v for v in record.by_type("azure-native:keyvault:Vault")
                if v.outputs["id"] == kms.get("keyVaultResourceId")]
    # The vault answers on no public network: KMS in private mode (AKS docs, "Add Key Management
    # Service etcd encryption": a firewalled or private vault only with `Private` and the
    # vault's resource ID).
    assert kms == {"enabled": True, "keyVaultNetworkAccess": "Private",
                   "keyVaultResourceId": vault.outputs["id"], "keyId": key.outputs["keyUriWithVersion"]}
    assert vault.inputs["properties"]["publicNetworkAccess"] == "Disabled"
    assert vault.inputs["properties"]["networkAcls"] == {"defaultAction": "Deny", "bypass": "None"}
    assert set(key.inputs["properties"]["keyOps"]) == {"encrypt", "decrypt"}
    (grant,) = [g for g in record.by_type("azure-native:authorization:RoleAssignment")
                if g.inputs["scope"] == key.outputs["id"]]
    # Key Vault Crypto User (learn.microsoft.com built-in roles).
    assert grant.inputs["roleDefinitionId"].endswith("/12338af0-0e69-4776-bea7-57ae8d297424")
    assert grant.inputs["principalId"] == kms_identity.outputs["principalId"]
    assert grant.urn in aks.dependencies
    assert i["kubernetesVersion"] == spec_of("prod").kubernetes_version
    assert i["disableLocalAccounts"] is True
    assert i["aadProfile"] == {"managed": True, "enableAzureRBAC": True}
    # prod: private API server and no public DNS name for it; in the VNet's delegated
    # `apiserver` subnet (API Server VNet Integration, which KMS with a private vault requires).
    (apiserver,) = [s for s in record.by_type("azure-native:network:Subnet")
                    if s.inputs["subnetName"] == "apiserver"]
    assert i["apiServerAccessProfile"] == {"enablePrivateCluster": True,
                                           "enablePrivateClusterPublicFQDN": False,
                                           "enableVnetIntegration": True, "subnetId": apiserver.outputs["id"]}
    # AKS docs "API Server VNet Integration": delegated to managedClusters, at least a /28; here the
    # first /28 of the third quarter of prod's 10.40.0.0/16.
    assert apiserver.inputs["addressPrefix"] == "10.40.128.0/28"
    assert [d["serviceName"] for d in apiserver.inputs["delegations"]] == \
        ["Microsoft.ContainerService/managedClusters"]
    # The control plane's identity: Network Contributor on that subnet, Key Vault Contributor on
    # the vault (to make the private link it reaches the vault through), both before the cluster.
    roles = {(g.inputs["scope"], g.inputs["roleDefinitionId"].rsplit("/", 1)[-1]): g
             for g in record.by_type("azure-native:authorization:RoleAssignment")}
    for scope, role in ((apiserver.outputs["id"], "4d97b98b-1d4f-4787-a291-c67834d212e7"),
                        (vault.outputs["id"], "f25e0fa2-a7c8-4377-a976-54943a77a395")):
        assert roles[(scope, role)].inputs["principalId"] == kms_identity.outputs["principalId"]
        assert roles[(scope, role)].urn in aks.dependencies
    assert i["sku"]["tier"] == "Standard"
    net = i["networkProfile"]
    assert (net["networkPlugin"], net["networkPluginMode"]) == ("azure", "overlay")
    assert (net["networkDataplane"], net["networkPolicy"]) == ("cilium", "cilium")
    assert i["autoUpgradeProfile"]["upgradeChannel"] == "patch"
    (system,) = i["agentPoolProfiles"]
    assert system["mode"] == "System" and system["name"] == "system"
    assert system["availabilityZones"] == azure_regions()[0].zones
    (subnet,) = node_subnets(record)
    assert system["vnetSubnetID"] == subnet.outputs["id"]
    o = aks.outputs
    assert o["id"] == (f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/rtip-prod-eastus/providers/"
                       "Microsoft.ContainerService/managedClusters/rtip-prod-eastus")
    assert o["oidcIssuerProfile"]["issuerURL"].startswith("https://eastus.oic.prod-aks.azure.com/")
    assert o["identity"]["principalId"]
    assert "fqdn" not in o and o["privateFQDN"].endswith(".privatelink.eastus.azmk8s.io")
    assert record.outputs["clusters"]["rtip-prod-eastus"]["endpoint"] == f"https://{o['privateFQDN']}"


def gpu_agent_pools(record):
    return [p for p in record.by_type(AGENT_POOL) if record.get(p.parent).type == "rtip:k8s:GpuPool"]


def test_one_agent_pool_per_gpu_pool() -> None:
    record = record_of("prod")
    (region,) = plan_of("prod").regions_of(Cloud.AZURE)
    pools = {p.inputs["agentPoolName"]: p for p in gpu_agent_pools(record)}
    assert set(pools) == {aks_pool_name(p.name) for p in region.pools}
    (subnet,) = node_subnets(record)
    (aks,) = record.by_type(MANAGED_CLUSTER)
    for spec in region.pools:
        pool = pools[aks_pool_name(spec.name)]
        i = pool.inputs
        assert record.get(pool.parent).inputs["pool"] == spec.name
        # AKS mounts the VM's temporary disk at /mnt (Azure docs, "Temporary disk").
        # The NVMe RAID0 array node prep assembles, not the temp disk at /mnt.
        assert record.get(pool.parent).inputs["nvmePath"] == "/mnt/rtip-nvme"
        assert i["resourceName"] == aks.outputs["name"]
        assert i["vmSize"] == spec.shape.name
        assert i["mode"] == "User"
        assert i["availabilityZones"] == list(spec.zones)
        assert (i["enableAutoScaling"], i["minCount"], i["maxCount"]) == \
            (True, spec.min_nodes, spec.max_nodes)
        assert i["osDiskType"] == "Ephemeral"
        assert i["osDiskSizeGB"] <= EPHEMERAL_OS_CAPACITY_GIB[spec.shape.name]
        assert i["vnetSubnetID"] == subnet.outputs["id"]
        assert i["nodeLabels"]["rtip.dev/pool"] == spec.name
        assert i["nodeLabels"]["rtip.dev/sharing"] == str(spec.sharing.mode)
        assert i["scaleSetPriority"] == ("Spot" if spec.capacity_type == "spot" else "Regular")
        assert pool.outputs["id"] == f"{aks.outputs['id']}/agentPools/{i['agentPoolName']}"


def test_mig_pool_taints_profile_and_driver() -> None:
    record = record_of("prod")
    pools = {p.inputs["agentPoolName"]: p.inputs for p in gpu_agent_pools(record)}
    mig = pools["h100mig"]
    assert mig["nodeTaints"] == ["nvidia.com/gpu=true:NoSchedule"]
    assert mig["gpuInstanceProfile"] == "MIG2g"  # all-2g.24gb
    assert mig["nodeLabels"]["nvidia.com/mig.config"] == "all-2g.24gb"
    assert mig["gpuProfile"] == {"driver": "Install"}
    amd = pools["mi300x"]
    assert amd["nodeTaints"] == ["amd.com/gpu=true:NoSchedule"]
    assert "gpuInstanceProfile" not in amd
    assert amd["gpuProfile"] == {"driver": "None"}  # the AMD GPU operator installs it


def test_mig_profile_change_is_a_replacement() -> None:
    pools = record_of("prod").by_type(AGENT_POOL)
    assert len(pools) == 2
    for pool in pools:
        assert pool.options["replaceOnChanges"] == ["gpuInstanceProfile"]
        assert pool.options["ignoreChanges"] == ["count"]


def test_kubernetes_provider_is_the_clusters() -> None:
    record = record_of("prod")
    (aks,) = record.by_type(MANAGED_CLUSTER)
    providers = [p for p in record.by_type("pulumi:providers:kubernetes")
                 if record.get(p.parent).type == CLUSTER]
    assert [p.parent for p in providers] == [aks.parent]
    (provider,) = providers
    assert aks.urn in provider.dependencies
    assert "kubeconfig" in provider.secret_paths
    for ns in record.by_type("kubernetes:core/v1:Namespace"):
        if any(a.type == CLUSTER for a in record.ancestors(ns)):
            assert ns.provider == provider.urn


def test_kubeconfig_execs_kubelogin_and_holds_no_credential() -> None:
    doc = json.loads(_sync_await(exec_kubeconfig("c", "https://c.hcp.eastus.azmk8s.io:443", None,
                                                 AKS_USER).future()))
    (cluster,) = doc["clusters"]
    assert cluster["cluster"] == {"server": "https://c.hcp.eastus.azmk8s.io:443"}
    (user,) = doc["users"]
    assert set(user["user"]) == {"exec"}
    exec_ = user["user"]["exec"]
    assert exec_["command"] == "kubelogin"
    assert exec_["args"][exec_["args"].index("--server-id") + 1] == AKS_AAD_SERVER_ID


def test_every_azure_shape_fits_an_ephemeral_os_disk() -> None:
    # Every GPU shape of the catalog gets an OS disk; the NC24ads A100 v4's temporary disk is
    # 64 GiB (Azure NC A100 v4 size page), smaller than the 128 GiB the image wants, so the OS disk
    # is cut to what fits there, and a larger temp disk keeps the full 128 GiB.
    assert {name for name in MACHINES[Cloud.AZURE] if os_disk_gib(name) >= 64} == set(MACHINES[Cloud.AZURE])
    assert os_disk_gib("Standard_NC24ads_A100_v4") == 64
    assert os_disk_gib("Standard_ND96isr_H100_v5") == 128
    with pytest.raises(ValueError, match="ephemeral OS disk"):
        os_disk_gib("Standard_B1s")


def test_every_mig_compute_size_has_an_aks_profile() -> None:
    for gpu in GPUS.values():
        assert {p.compute_slices for p in gpu.mig_profiles} <= set(GPU_INSTANCE_PROFILE)


@pytest.mark.parametrize(("pool", "name"), [("h100-mig", "h100mig"), ("mi300x", "mi300x"),
                                            ("a-b-c", "abc")])
def test_agent_pool_names_drop_hyphens(pool, name) -> None:
    assert aks_pool_name(pool) == name
    assert AKS_POOL_NAME.match(name)


def prod_platform() -> dict:
    return copy.deepcopy(stack_doc("prod")["config"]["rtip:platform"])


AZURE = 3  # the Azure region's index in the prod stack


def azure_pools_fail(capsys, tmp_path, pools: list[dict]) -> str:
    doc = prod_platform()
    doc["regions"][AZURE]["gpu_pools"] = pools
    doc["models"] = [m for m in doc["models"] if m["name"] == "llama-70b"]
    doc["tenants"] = []
    code = main(["plan", str(write_stack(tmp_path, doc))])
    out = capsys.readouterr()
    assert code == 2, out
    assert "Traceback" not in out.err
    return out.err


MI300X = {"name": "mi300x", "machine_type": "Standard_ND96isr_MI300X_v5", "min_nodes": 1, "max_nodes": 4}


def test_agent_pool_name_too_long(capsys, tmp_path) -> None:
    err = azure_pools_fail(capsys, tmp_path, [{**MI300X, "name": "mi300x-whole-gpus"}])
    assert (f"rtip:platform.regions[{AZURE}].gpu_pools[0].name: pool 'mi300x-whole-gpus' becomes "
            "AKS agent pool 'mi300xwholegpus'") in err


def test_agent_pool_names_collide(capsys, tmp_path) -> None:
    err = azure_pools_fail(capsys, tmp_path, [MI300X, {**MI300X, "name": "mi-300x"}])
    for j in (0, 1):
        assert f"rtip:platform.regions[{AZURE}].gpu_pools[{j}].name: pools 'mi300x', 'mi-300x'" in err
    assert "all become AKS agent pool 'mi300x'" in err


def test_agent_pool_named_like_the_system_pool(capsys, tmp_path) -> None:
    err = azure_pools_fail(capsys, tmp_path, [MI300X, {**MI300X, "name": "system"}])
    assert f"rtip:platform.regions[{AZURE}].gpu_pools[1].name: pool 'system'" in err


def test_aks_cannot_select_a_double_memory_1g_profile(capsys, tmp_path) -> None:
    pool = {"name": "h100-mig", "machine_type": "Standard_NC40ads_H100_v5", "max_nodes": 4,
            "sharing": {"mode": "mig", "layout": "all-1g.24gb"}}
    err = azure_pools_fail(capsys, tmp_path, [pool, MI300X])
    assert f"rtip:platform.regions[{AZURE}].gpu_pools[0].sharing: AKS gpu_instance_profile" in err


def test_a_twelve_character_agent_pool_name_is_accepted(capsys, tmp_path) -> None:
    doc = prod_platform()
    doc["regions"][AZURE]["gpu_pools"][1]["name"] = "mi300x-whole"  # -> mi300xwhole (11)
    doc["regions"][AZURE]["gpu_pools"].append({**MI300X, "name": "mi300x-spot12", "capacity_type": "spot"})
    assert main(["plan", str(write_stack(tmp_path, doc)), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    names = {r["inputs"]["agentPoolName"]: r["inputs"] for r in plan["resources"]
             if r["type"] == AGENT_POOL}
    assert set(names) == {"h100mig", "mi300xwhole", "mi300xspot12"}
    spot = names["mi300xspot12"]
    assert (spot["scaleSetPriority"], spot["scaleSetEvictionPolicy"], spot["spotMaxPrice"]) == \
        ("Spot", "Delete", -1)


@pytest.mark.parametrize(("environment", "tier", "kms"),
                         [("dev", "Free", False), ("staging", "Standard", True)])
def test_non_prod_api_is_public_only_to_listed_cidrs(tmp_path, environment, tier, kms) -> None:
    doc = prod_platform()
    doc["environment"] = environment
    only_regions(doc, [doc["regions"][AZURE]])
    doc["regions"][0]["api_access_cidrs"] = ["203.0.113.0/24"]
    doc["models"] = [m for m in doc["models"] if m["name"] == "llama-70b"]
    doc["tenants"] = []
    record = offline.run(load(str(write_stack(tmp_path, doc))))
    (aks,) = record.by_type(MANAGED_CLUSTER)
    profile = dict(aks.inputs["apiServerAccessProfile"])
    # A KMS key lives in a private vault, which takes API Server VNet Integration.
    assert (profile.pop("enableVnetIntegration", False), "subnetId" in profile) == (kms, kms)
    profile.pop("subnetId", None)
    assert profile == {"authorizedIPRanges": ["203.0.113.0/24"]}
    # The posture table: dev has no control-plane SLA and no KMS key; staging has both.
    assert aks.inputs["sku"]["tier"] == tier
    assert ("azureKeyVaultKms" in aks.inputs["securityProfile"]) is kms
    assert aks.inputs["identity"]["type"] == ("UserAssigned" if kms else "SystemAssigned")
    assert record.outputs["clusters"][f"rtip-{environment}-eastus"]["endpoint"] == \
        f"https://{aks.outputs['fqdn']}"


def test_a_user_assigned_control_plane_may_join_its_subnet() -> None:
    # AKS docs ("Use a managed identity"): with its own identity on a subnet it did not create,
    # the control plane needs Network Contributor there, granted before the cluster is created.
    record = record_of("prod")
    (aks,) = record.by_type(MANAGED_CLUSTER)
    (subnet,) = node_subnets(record)
    (identity,) = [u for u in record.by_type("azure-native:managedidentity:UserAssignedIdentity")
                   if u.inputs["resourceName"] == "rtip-prod-eastus-control-plane"]
    (grant,) = [g for g in record.by_type("azure-native:authorization:RoleAssignment")
                if g.inputs["scope"] == subnet.outputs["id"]]
    assert grant.inputs["roleDefinitionId"].endswith("/4d97b98b-1d4f-4787-a291-c67834d212e7")
    assert grant.inputs["principalId"] == identity.outputs["principalId"]
    assert grant.urn in aks.dependencies
