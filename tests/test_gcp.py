"""The GKE cluster path, asserted from the offline record of prod and of small GCP-only stacks."""

from __future__ import annotations

import json
from ipaddress import ip_network

import pytest

from components.gcp.network import address_plan
from components.gcp.nodes import NODE_ROLES
from rtip import offline
from rtip.cli import main
from rtip.offline import SECRET_MARK, Record
from rtip.stackfile import load
from serving.hardware import Cloud, machine
from stacks.naming import gcp_account_id
from stacks.plan import PlannedPool
from stacks.schema import GcpRegion
from tests.conftest import plan_of, record_of, spec_of, write_stack

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
GKE_GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}

# A non-prod GCP-only stack: a time-sliced L4 pool on spot in one zone of two, and an API open
# to one office network.
DEV_GCP = {
    "environment": "dev",
    "regions": [{
        "cloud": "gcp",
        "region": "us-central1",
        "project": "rtip-dev-serving",
        "zones": ["us-central1-a", "us-central1-b"],
        "network": {"cidr": "10.50.0.0/18"},
        "api_access_cidrs": ["198.51.100.0/24"],
        "gpu_pools": [{
            "name": "l4-shared",
            "machine_type": "g2-standard-24",
            "min_nodes": 0,
            "max_nodes": 4,
            "capacity_type": "spot",
            "zones": ["us-central1-a"],
            "sharing": {"mode": "time_slice", "replicas": 4},
        }],
    }],
}


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Record:
    path = write_stack(tmp_path_factory.mktemp("gcpdev"), DEV_GCP, name="gcpdev")
    return offline.run(load(str(path)))


def gcp_regions(stack: str) -> list[GcpRegion]:
    return [r for r in spec_of(stack).regions if isinstance(r, GcpRegion)]


def gcp_regions_of(platform: dict) -> list[GcpRegion]:
    return [GcpRegion.model_validate(r) for r in platform["regions"]]


def cluster_component(record: Record, region: str):
    (component,) = [c for c in record.by_type("rtip:gcp:Cluster") if c.inputs["region"] == region]
    return component


def gke(record: Record, region: str):
    component = cluster_component(record, region)
    (cluster,) = [c for c in record.by_type(CLUSTER) if c.parent == component.urn]
    return cluster


def gpu_node_pools(record: Record) -> list:
    return [n for n in record.by_type(NODE_POOL) if record.get(n.parent).type == "rtip:k8s:GpuPool"]


def test_prod_builds_its_gcp_region() -> None:
    record = record_of("prod")
    regions = {r.region for r in gcp_regions("prod")}
    assert regions and {c.inputs["region"] for c in record.by_type("rtip:gcp:Cluster")} == regions


def test_one_regional_private_cluster_per_gcp_region() -> None:
    record = record_of("prod")
    spec = spec_of("prod")
    for region in gcp_regions("prod"):
        component = cluster_component(record, region.region)
        assert component.inputs == {"cloud": "gcp", "region": region.region,
                                    "zones": region.zones,
                                    "kubernetesVersion": spec.kubernetes_version}
        cluster = gke(record, region.region)
        i = cluster.inputs
        assert i["location"] == region.region  # a region makes the control plane regional
        assert i["nodeLocations"] == region.zones
        assert i["workloadIdentityConfig"] == {"workloadPool": f"{region.project}.svc.id.goog"}
        assert i["removeDefaultNodePool"] is True and i["initialNodeCount"] == 1
        assert i["deletionProtection"] is True
        assert i["privateClusterConfig"]["enablePrivateNodes"] is True
        assert i["privateClusterConfig"]["enablePrivateEndpoint"] is True
        assert i["masterAuthorizedNetworksConfig"]["cidrBlocks"] == []
        assert i["releaseChannel"] == {"channel": "STABLE"}
        assert i["minMasterVersion"] == spec.kubernetes_version
        assert i["datapathProvider"] == "ADVANCED_DATAPATH"
        assert cluster.outputs["id"] == (f"projects/{region.project}/locations/{region.region}/"
                                         f"clusters/{i['name']}")


def test_non_prod_cluster_opens_only_its_listed_networks(dev) -> None:
    cluster = gke(dev, "us-central1")
    i = cluster.inputs
    assert i["deletionProtection"] is False
    assert i["releaseChannel"] == {"channel": "REGULAR"}
    assert i["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": False}
    blocks = i["masterAuthorizedNetworksConfig"]["cidrBlocks"]
    assert [b["cidrBlock"] for b in blocks] == ["198.51.100.0/24"]
    assert i["masterAuthorizedNetworksConfig"]["gcpPublicCidrsAccessEnabled"] is False


def test_subnetwork_carries_the_address_plan() -> None:
    record = record_of("prod")
    for region in gcp_regions("prod"):
        component = cluster_component(record, region.region)
        (net,) = [n for n in record.by_type("rtip:gcp:Network") if n.parent == component.urn]
        (vpc,) = [v for v in record.by_type("gcp:compute/network:Network") if v.parent == net.urn]
        assert vpc.inputs["autoCreateSubnetworks"] is False
        (subnet,) = [s for s in record.by_type("gcp:compute/subnetwork:Subnetwork")
                     if s.parent == net.urn]
        assert subnet.inputs["network"] == vpc.outputs["id"]
        assert subnet.inputs["privateIpGoogleAccess"] is True
        ranges = {r["rangeName"]: ip_network(r["ipCidrRange"]) for r in subnet.inputs["secondaryIpRanges"]}
        nets = [ip_network(subnet.inputs["ipCidrRange"]), *ranges.values()]
        assert all(n.subnet_of(region.network.cidr) for n in nets)
        assert not any(a.overlaps(b) for k, a in enumerate(nets) for b in nets[k + 1:])
        policy = gke(record, region.region).inputs["ipAllocationPolicy"]
        assert {policy["clusterSecondaryRangeName"], policy["servicesSecondaryRangeName"]} == set(ranges)
        assert ranges[policy["clusterSecondaryRangeName"]].num_addresses > \
            ranges[policy["servicesSecondaryRangeName"]].num_addresses
        assert gke(record, region.region).inputs["subnetwork"] == subnet.outputs["id"]
        # Private nodes egress through a NAT on this subnetwork.
        (router,) = [r for r in record.by_type("gcp:compute/router:Router") if r.parent == net.urn]
        (nat,) = [n for n in record.by_type("gcp:compute/routerNat:RouterNat") if n.parent == net.urn]
        assert nat.inputs["router"] == router.outputs["name"]
        assert [s["name"] for s in nat.inputs["subnetworks"]] == [subnet.outputs["id"]]


@pytest.mark.parametrize(("cidr", "nodes"), [("10.30.0.0/16", 128), ("10.30.0.0/20", 8)])
def test_address_plan_sizes(cidr, nodes) -> None:
    plan = address_plan(ip_network(cidr))
    assert plan.max_nodes == nodes
    assert plan.pods.prefixlen == plan.nodes.prefixlen - 1 == plan.services.prefixlen - 3


def test_a_network_too_small_for_its_pools_fails_before_provisioning(tmp_path, capsys) -> None:
    doc = json.loads(json.dumps(DEV_GCP))
    doc["regions"][0]["network"]["cidr"] = "10.50.0.0/20"
    doc["regions"][0]["gpu_pools"][0]["max_nodes"] = 8
    assert main(["plan", str(write_stack(tmp_path, doc, name="small"))]) == 2
    err = capsys.readouterr().err
    assert "rtip:platform.regions[0].network.cidr: 10.50.0.0/20 leaves pod addresses for 8 GKE nodes" in err
    assert "may grow to 15" in err


def test_gpu_pools_may_not_take_the_system_pools_name(tmp_path, capsys) -> None:
    doc = json.loads(json.dumps(DEV_GCP))
    doc["regions"][0]["gpu_pools"][0]["name"] = "system"
    doc["models"] = []
    assert main(["plan", str(write_stack(tmp_path, doc, name="sys"))]) == 2
    assert "rtip:platform.regions[0].gpu_pools[0].name: 'system' names the system" in capsys.readouterr().err


def _expect_pool(record: Record, region: GcpRegion, pool: PlannedPool) -> None:
    shape = machine(Cloud.GCP, pool.shape.name)
    assert shape is not None
    (np,) = [n for n in gpu_node_pools(record) if n.inputs["name"] == pool.name
             and n.inputs["location"] == region.region]
    group = record.get(np.parent)
    assert group.parent == cluster_component(record, region.region).urn
    zones = list(pool.zones)
    assert np.inputs["nodeLocations"] == zones
    assert np.inputs["cluster"] == gke(record, region.region).inputs["name"]
    config = np.inputs["nodeConfig"]
    assert config["machineType"] == pool.shape.name
    (acc,) = config["guestAccelerators"]
    assert (acc["type"], acc["count"]) == (shape.accelerator, shape.gpu_count)
    assert acc["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "LATEST"}
    if pool.sharing.mode == "mig":
        (profile,) = [p for p, n in shape.gpu_spec.mig_layouts[pool.sharing.layout].items() if n]  # type: ignore[union-attr]
        assert acc["gpuPartitionSize"] == profile
    else:
        assert "gpuPartitionSize" not in acc
    if pool.sharing.mode == "time_slice":
        assert acc["gpuSharingConfig"] == {"gpuSharingStrategy": "TIME_SHARING",
                                           "maxSharedClientsPerGpu": pool.sharing.replicas}  # type: ignore[union-attr]
    else:
        assert "gpuSharingConfig" not in acc
    assert config["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": shape.local_nvme_gb // 375}
    # GKE backs ephemeral storage with the local SSDs there (GKE docs, "local SSD").
    assert group.inputs["nvmePath"] == "/mnt/stateful_partition/kube-ephemeral-ssd"
    # The declared taint is the one GKE itself puts on GPU nodes, and the plan records the same.
    assert config["taints"] == [GKE_GPU_TAINT]
    assert group.inputs["taints"] == ["nvidia.com/gpu=present:NoSchedule"]
    assert config["labels"] == group.inputs["labels"]
    assert config["labels"]["rtip.dev/pool"] == pool.name
    spot = pool.capacity_type == "spot"
    assert config["spot"] is spot
    assert config["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert config["shieldedInstanceConfig"] == {"enableSecureBoot": True,
                                                "enableIntegrityMonitoring": True}
    assert np.inputs["autoscaling"] == {
        "totalMinNodeCount": pool.min_nodes, "totalMaxNodeCount": pool.max_nodes,
        "locationPolicy": "ANY" if spot else "BALANCED",
    }
    assert np.inputs["management"] == {"autoRepair": True, "autoUpgrade": True}
    assert "initialNodeCount" in np.inputs and np.inputs["initialNodeCount"] * len(zones) >= pool.min_nodes


def test_every_prod_gpu_pool_becomes_a_gke_node_pool() -> None:
    record = record_of("prod")
    expected = [(r.region, p) for r in plan_of("prod").regions_of(Cloud.GCP) for p in r.pools]
    assert len(gpu_node_pools(record)) == len(expected)
    for region, pool in expected:
        _expect_pool(record, region, pool)
    modes = {p.sharing.mode for _, p in expected}
    assert {"mig", "whole"} <= modes  # prod covers the MIG and the whole-GPU path


def test_time_sliced_l4_pool_on_spot_in_a_subset_of_zones(dev) -> None:
    (region,) = gcp_regions_of(DEV_GCP)
    (pool,) = dev.plan.regions[0].pools
    _expect_pool(dev, region, pool)
    (np,) = gpu_node_pools(dev)
    assert np.inputs["nodeLocations"] == ["us-central1-a"]
    assert np.inputs["nodeConfig"]["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 2}


def test_system_pool_and_least_privilege_node_account() -> None:
    record = record_of("prod")
    for region in gcp_regions("prod"):
        component = cluster_component(record, region.region)
        (account,) = [a for a in record.by_type("gcp:serviceaccount/account:Account")
                      if a.parent == component.urn]
        assert account.inputs["accountId"] == f"{component.name}-nodes"  # fits 30 characters
        email = account.outputs["email"]
        assert email.endswith(f"@{region.project}.iam.gserviceaccount.com")
        grants = [g for g in record.by_type("gcp:projects/iAMMember:IAMMember")
                  if g.parent == component.urn and not g.name.endswith("-deployer")]
        assert sorted(g.inputs["role"] for g in grants) == sorted(NODE_ROLES)
        assert {(g.inputs["member"], g.inputs["project"]) for g in grants} == \
            {(f"serviceAccount:{email}", region.project)}
        (system,) = [n for n in record.by_type(NODE_POOL) if n.parent == component.urn]
        assert system.inputs["nodeConfig"]["labels"] == {"rtip.dev/pool": "system"}
        assert "taints" not in system.inputs["nodeConfig"]
        assert system.inputs["autoscaling"]["totalMinNodeCount"] == region.system_pool.min_nodes
        pools = [system, *(n for n in gpu_node_pools(record)
                           if record.get(n.parent).parent == component.urn)]
        for np in pools:
            assert np.inputs["nodeConfig"]["serviceAccount"] == email
        # The default pool, while it lives, runs as the same account.
        assert gke(record, region.region).inputs["nodeConfig"]["serviceAccount"] == email
        # GPU pools come after the system pool, so GKE sees a CPU pool when it taints them.
        for np in pools[1:]:
            assert system.urn in np.dependencies


def test_every_gcp_resource_goes_through_its_regions_provider() -> None:
    record = record_of("prod")
    projects = {r.region: r.project for r in gcp_regions("prod")}
    seen = 0
    for res in record.resources:
        if not res.type.startswith("gcp:"):
            continue
        seen += 1
        provider = record.get(res.provider)
        assert provider.type == "pulumi:providers:gcp", res.urn
        region = provider.inputs["region"]
        assert provider.inputs["project"] == projects[region], res.urn
        assert res.inputs.get("project", projects[region]) == projects[region], res.urn
        # A cluster's resources use its own region's provider; registries sit above clusters.
        cluster = next((a for a in record.ancestors(res) if a.type == "rtip:gcp:Cluster"), None)
        if cluster is not None:
            assert region == cluster.inputs["region"], res.urn
    assert seen


def test_kubernetes_provider_is_the_clusters_and_holds_no_credential() -> None:
    record = record_of("prod")
    for region in gcp_regions("prod"):
        component = cluster_component(record, region.region)
        cluster = gke(record, region.region)
        (provider,) = [p for p in record.by_type("pulumi:providers:kubernetes")
                       if p.parent == component.urn]
        assert provider.inputs["kubeconfig"] == SECRET_MARK
        config = json.loads(provider.outputs["kubeconfig"])
        (entry,) = config["clusters"]
        assert entry["cluster"]["server"] == f"https://{cluster.outputs['endpoint']}"
        assert entry["cluster"]["certificate-authority-data"] == \
            cluster.outputs["masterAuth"]["clusterCaCertificate"]
        (user,) = config["users"]
        assert set(user["user"]) == {"exec"}  # no token, key or password in the file
        assert user["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
        for ns in record.by_type("kubernetes:core/v1:Namespace"):
            if component in record.ancestors(ns):
                assert ns.provider == provider.urn
        exported = record.outputs["clusters"][component.name]
        assert exported == {"cloud": "gcp", "region": region.region,
                            "endpoint": f"https://{cluster.outputs['endpoint']}"}


def test_account_ids_fit_gcp_limits() -> None:
    for cluster in ("rtip-prod-us-central1", "rtip-staging-northamerica-northeast1"):
        for purpose in ("nodes", "models"):
            short = gcp_account_id(cluster, purpose)
            assert 6 <= len(short) <= 30 and short[0].isalpha() and not short.endswith("-")
    # Two regions that share the first 30 characters still get two accounts.
    assert gcp_account_id("rtip-staging-northamerica-northeast1", "models") != \
        gcp_account_id("rtip-staging-northamerica-northeast2", "models")


def test_prod_gke_encrypts_secrets_with_a_customer_key() -> None:
    record = record_of("prod")
    spec = spec_of("prod")
    region = next(r for r in spec.regions if isinstance(r, GcpRegion))
    cluster = gke(record, region.region)
    (key,) = [k for k in record.by_type("gcp:kms/cryptoKey:CryptoKey")
              if record.get(k.parent).type == "rtip:gcp:Cluster"]
    assert cluster.inputs["databaseEncryption"] == {"state": "ENCRYPTED", "keyName": key.outputs["id"]}
    (grant,) = [g for g in record.by_type("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
                if g.parent == key.parent]
    assert grant.inputs["member"] == (f"serviceAccount:service-{region.project_number}"
                                      "@container-engine-robot.iam.gserviceaccount.com")
    assert grant.urn in cluster.dependencies
