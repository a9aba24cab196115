"""Azure registries, model-pod identity and the AKS provider's credentials, from the offline record.

The prod stack has one Azure region; a two-region copy of its Azure part (written to a temp stack
file) covers the registry replicas and weights object replication.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from typing import ClassVar

import pytest
import yaml
from pulumi.runtime import rpc

from components.azure.identity import CLIENT_ID_ANNOTATION, TOKEN_AUDIENCE
from components.azure.keys import (
    KEY_VAULT_CONTRIBUTOR,
    KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER,
    KEY_VAULT_CRYPTO_USER,
)
from components.azure.registries import ACR_PULL, STORAGE_BLOB_DATA_READER
from rtip import offline, synth
from rtip.offline import Record
from rtip.stackfile import load
from rtip.synth import AZURE_SUBSCRIPTION, fake_ca
from stacks.loader import load_spec
from stacks.naming import storage_account
from stacks.schema import AzureRegion, StackSpec
from tests.conftest import add_region, only_regions, record_of, spec_of, stack_doc, write_stack

REGISTRY = "azure-native:containerregistry:Registry"
REPLICATION = "azure-native:containerregistry:Replication"
ACCOUNT = "azure-native:storage:StorageAccount"
BLOB_SERVICE = "azure-native:storage:BlobServiceProperties"
CONTAINER = "azure-native:storage:BlobContainer"
OBJECT_REPLICATION = "azure-native:storage:ObjectReplicationPolicy"
VAULT = "azure-native:keyvault:Vault"
KEY = "azure-native:keyvault:Key"
IDENTITY = "azure-native:managedidentity:UserAssignedIdentity"
FEDERATION = "azure-native:managedidentity:FederatedIdentityCredential"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
MANAGED_CLUSTER = "azure-native:containerservice:ManagedCluster"
CREDENTIALS = "azure-native:containerservice:listManagedClusterUserCredentials"

SUBSCRIPTION = f"/subscriptions/{AZURE_SUBSCRIPTION}"
CONTAINER_ID = re.compile(rf"^{SUBSCRIPTION}/resourceGroups/[^/]+/providers/Microsoft\.Storage/"
                          r"storageAccounts/[a-z0-9]+/blobServices/default/containers/[a-z0-9-]+$")
REGISTRY_ID = re.compile(rf"^{SUBSCRIPTION}/resourceGroups/[^/]+/providers/Microsoft\.ContainerRegistry/"
                         r"registries/[a-z0-9]+$")
KEY_ID = re.compile(rf"^{SUBSCRIPTION}/resourceGroups/[^/]+/providers/Microsoft\.KeyVault/"
                    r"vaults/[a-z0-9-]+/keys/[a-z0-9-]+$")
VAULT_ID = re.compile(rf"^{SUBSCRIPTION}/resourceGroups/[^/]+/providers/Microsoft\.KeyVault/"
                      r"vaults/[a-z0-9-]+$")
# Which scope each role may have: the one resource it is for, never anything wider.
SUBNET_ID = re.compile(rf"^{SUBSCRIPTION}/resourceGroups/[^/]+/providers/Microsoft\.Network/"
                       r"virtualNetworks/[^/]+/subnets/[^/]+$")
# Network Contributor (AKS docs, "Use a managed identity"): the control plane joins its subnet.
NETWORK_CONTRIBUTOR = "4d97b98b-1d4f-4787-a291-c67834d212e7"
ROLE_SCOPE = {STORAGE_BLOB_DATA_READER: CONTAINER_ID, ACR_PULL: REGISTRY_ID,
              KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER: KEY_ID, KEY_VAULT_CRYPTO_USER: KEY_ID,
              NETWORK_CONTRIBUTOR: SUBNET_ID, KEY_VAULT_CONTRIBUTOR: VAULT_ID}

SECOND = {"cloud": "azure", "region": "westus3", "zones": ["1", "2", "3"],
          "network": {"cidr": "10.41.0.0/16"}}


def azure_platform(environment: str = "prod") -> dict:
    """The prod stack's Azure region alone, with one model, in `environment`."""
    doc = copy.deepcopy(stack_doc("prod")["config"]["rtip:platform"])
    doc["environment"] = environment
    only_regions(doc, [r for r in doc["regions"] if r["cloud"] == "azure"])
    doc["models"] = [m for m in doc["models"] if m["name"] == "llama-70b"]
    doc["tenants"] = []
    return doc


@pytest.fixture(scope="module")
def two_regions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Record, StackSpec]:
    doc = azure_platform()
    add_region(doc, {**SECOND, "gpu_pools": copy.deepcopy(doc["regions"][0]["gpu_pools"])})
    path = write_stack(tmp_path_factory.mktemp("azure2"), doc)
    config = load(str(path))
    return offline.run(config), load_spec(config.platform, config.source)


def location_of(record: Record, res) -> str:
    return record.get(res.provider).inputs["location"]


def azure_regions(spec: StackSpec) -> list[AzureRegion]:
    return [r for r in spec.regions if isinstance(r, AzureRegion)]


def by_output_id(record: Record, type_: str) -> dict[str, object]:
    return {r.outputs["id"]: r for r in record.by_type(type_)}


def test_a_premium_registry_in_the_first_azure_region() -> None:
    record = record_of("prod")
    (acr,) = record.by_type(REGISTRY)
    assert location_of(record, acr) == acr.inputs["location"] == azure_regions(spec_of("prod"))[0].region
    i = acr.inputs
    assert i["sku"] == {"name": "Premium"}
    assert (i["adminUserEnabled"], i["anonymousPullEnabled"]) == (False, False)
    assert i["zoneRedundancy"] == "Enabled"
    assert record.get(acr.parent).type == "rtip:azure:Registries"
    assert not record.by_type(REPLICATION)  # prod has one Azure region


def test_the_registry_replicates_into_every_other_azure_region(two_regions) -> None:
    record, spec = two_regions
    (acr,) = record.by_type(REGISTRY)
    regions = [r.region for r in azure_regions(spec)]
    assert acr.inputs["location"] == regions[0]
    replicas = record.by_type(REPLICATION)
    assert sorted(r.inputs["location"] for r in replicas) == regions[1:]
    for replica in replicas:
        assert replica.inputs["registryName"] == acr.outputs["name"]
        assert replica.inputs["zoneRedundancy"] == "Enabled"
        assert location_of(record, replica) == replica.inputs["location"]


@pytest.mark.parametrize("which", ["prod", "two"])
def test_a_versioned_private_weights_account_per_region(which, two_regions) -> None:
    record, spec = (record_of("prod"), spec_of("prod")) if which == "prod" else two_regions
    accounts = {location_of(record, a): a for a in record.by_type(ACCOUNT)}
    assert {r.region: storage_account(spec, r) for r in azure_regions(spec)} == \
        {k: a.inputs["accountName"] for k, a in accounts.items()}
    for region, account in accounts.items():
        i = account.inputs
        assert i["location"] == region
        assert i["kind"] == "StorageV2"
        assert i["sku"]["name"] == ("Standard_GZRS" if spec.is_prod else "Standard_ZRS")
        assert (i["enableHttpsTrafficOnly"], i["minimumTlsVersion"]) == (True, "TLS1_2")
        assert (i["allowBlobPublicAccess"], i["allowSharedKeyAccess"]) == (False, False)
        name = account.outputs["name"]
        (service,) = [s for s in record.by_type(BLOB_SERVICE) if s.inputs["accountName"] == name]
        assert service.inputs["isVersioningEnabled"] is True
        assert service.inputs["changeFeed"]["enabled"] is True
        (container,) = [c for c in record.by_type(CONTAINER) if c.inputs["accountName"] == name]
        assert (container.inputs["containerName"], container.inputs["publicAccess"]) == ("weights", "None")
        assert container.outputs["id"] == f"{account.outputs['id']}/blobServices/default/containers/weights"


def test_weights_replicate_from_the_first_region_into_the_others(two_regions) -> None:
    record, spec = two_regions
    source, target = (storage_account(spec, r) for r in azure_regions(spec))
    accounts = {a.outputs["name"]: a.outputs["id"] for a in record.by_type(ACCOUNT)}
    policies = {p.inputs["accountName"]: p for p in record.by_type(OBJECT_REPLICATION)}
    assert set(policies) == {source, target}
    inbound, outbound = policies[target], policies[source]
    # The destination's policy comes first and names the IDs the source's copy repeats.
    assert inbound.inputs["objectReplicationPolicyId"] == "default"
    assert outbound.inputs["objectReplicationPolicyId"] == inbound.outputs["policyId"]
    assert inbound.urn in outbound.dependencies
    for policy in (inbound, outbound):
        assert (policy.inputs["sourceAccount"], policy.inputs["destinationAccount"]) == \
            (accounts[source], accounts[target])
        (rule,) = policy.inputs["rules"]
        assert (rule["sourceContainer"], rule["destinationContainer"]) == ("weights", "weights")
        assert rule["filters"] == {"prefixMatch": ["models/"]}
        # Versioning and change feed are on before either side of the policy exists.
        services = {s.urn for s in record.by_type(BLOB_SERVICE)}
        assert services <= set(policy.dependencies)
    assert outbound.inputs["rules"][0]["ruleId"] == inbound.outputs["rules"][0]["ruleId"]
    assert not record_of("prod").by_type(OBJECT_REPLICATION)


def test_prod_encrypts_with_a_customer_key(two_regions) -> None:
    record, _ = two_regions
    # The registries' vault (each AKS cluster has its own for KMS: tests/test_azure.py).
    (vault,) = [v for v in record.by_type(VAULT) if record.get(v.parent).type == "rtip:azure:Registries"]
    props = vault.inputs["properties"]
    assert (props["enablePurgeProtection"], props["enableRbacAuthorization"]) == (True, True)
    (key,) = [k for k in record.by_type(KEY) if k.parent == vault.parent]
    assert key.inputs["vaultName"] == vault.outputs["name"]
    cmk = next(i for i in record.by_type(IDENTITY) if i.parent == key.parent)
    (grant,) = [g for g in record.by_type(ROLE_ASSIGNMENT)
                if g.inputs["principalId"] == cmk.outputs["principalId"]]
    assert grant.inputs["scope"] == key.outputs["id"]
    assert grant.inputs["roleDefinitionId"].rsplit("/", 1)[-1] == KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER
    accounts = record.by_type(ACCOUNT)
    assert len(accounts) == 2
    for account in accounts:
        enc = account.inputs["encryption"]
        assert enc["keySource"] == "Microsoft.Keyvault"
        assert enc["keyVaultProperties"] == {"keyName": key.outputs["name"],
                                             "keyVaultUri": vault.outputs["properties"]["vaultUri"]}
        assert enc["encryptionIdentity"]["encryptionUserAssignedIdentity"] == cmk.outputs["id"]
        assert account.inputs["identity"]["userAssignedIdentities"] == [cmk.outputs["id"]]
        assert grant.urn in account.dependencies  # the identity may use the key before it must
    (acr,) = record.by_type(REGISTRY)
    assert acr.inputs["encryption"]["status"] == "enabled"
    assert acr.inputs["encryption"]["keyVaultProperties"] == {
        "keyIdentifier": key.outputs["keyUri"], "identity": cmk.outputs["clientId"]}
    assert list(acr.inputs["identity"]["userAssignedIdentities"]) == [cmk.outputs["id"]]
    assert grant.urn in acr.dependencies


def test_non_prod_uses_platform_keys(tmp_path) -> None:
    doc = azure_platform("staging")
    doc["regions"][0]["api_access_cidrs"] = ["203.0.113.0/24"]
    record = offline.run(load(str(write_stack(tmp_path, doc))))
    # staging's posture: customer keys for Kubernetes secrets (the cluster's KMS vault), none
    # for registries and weights.
    assert all(record.get(v.parent).type == "rtip:azure:Cluster" for v in record.by_type(VAULT))
    (account,) = record.by_type(ACCOUNT)
    assert account.inputs["sku"]["name"] == "Standard_ZRS"
    assert "encryption" not in account.inputs
    (acr,) = record.by_type(REGISTRY)
    assert "encryption" not in acr.inputs
    assert_grants_are_narrow(record)


def assert_grants_are_narrow(record: Record) -> None:
    # The deployer's grant on each cluster is tests/test_deployer.py's; these are the stores'.
    grants = [g for g in record.by_type(ROLE_ASSIGNMENT) if not g.name.endswith("-deployer")]
    assert grants
    targets = {**by_output_id(record, CONTAINER), **by_output_id(record, REGISTRY),
               **by_output_id(record, KEY), **by_output_id(record, "azure-native:network:Subnet"),
               **by_output_id(record, VAULT)}
    for grant in grants:
        scope, role = grant.inputs["scope"], grant.inputs["roleDefinitionId"]
        guid = role.rsplit("/", 1)[-1]
        assert role == f"{SUBSCRIPTION}/providers/Microsoft.Authorization/roleDefinitions/{guid}", grant.urn
        assert ROLE_SCOPE[guid].match(scope), (grant.urn, scope)
        assert scope in targets, (grant.urn, scope)  # a resource the program made, not a guess
        assert grant.inputs["principalType"] == "ServicePrincipal"


@pytest.mark.parametrize("which", ["prod", "two"])
def test_every_grant_names_one_container_registry_or_key(which, two_regions) -> None:
    assert_grants_are_narrow(record_of("prod") if which == "prod" else two_regions[0])


def cluster_of(record: Record, res):
    return next(a for a in record.ancestors(res) if a.type == "rtip:azure:Cluster")


def only(record: Record, type_: str, parent: str):
    (res,) = [r for r in record.by_type(type_) if r.parent == parent]
    return res


def grant_of(record: Record, parent: str, role: str):
    (res,) = [g for g in record.by_type(ROLE_ASSIGNMENT)
              if g.parent == parent and g.inputs["roleDefinitionId"].endswith(role)]
    return res


@pytest.mark.parametrize("which", ["prod", "two"])
def test_model_pods_federate_with_their_own_cluster_and_read_its_container(which, two_regions) -> None:
    record, spec = (record_of("prod"), spec_of("prod")) if which == "prod" else two_regions
    identities = record.by_type("rtip:azure:ModelIdentity")
    assert sorted(i.inputs["region"] for i in identities) == sorted(r.region for r in azure_regions(spec))
    containers = {location_of(record, c): c.outputs["id"] for c in record.by_type(CONTAINER)}
    (acr,) = record.by_type(REGISTRY)
    issuers = set()
    for component in identities:
        cluster = cluster_of(record, component)
        aks = only(record, MANAGED_CLUSTER, cluster.urn)
        identity = only(record, IDENTITY, component.urn)
        assert identity.inputs["resourceGroupName"] == aks.inputs["resourceGroupName"]
        fics = [f for f in record.by_type(FEDERATION) if f.parent == component.urn]
        # The model servers, and the cache's download Jobs where the cluster has a cache: one
        # credential per service account, all on the one identity and the cluster's own issuer.
        assert sorted(f.inputs["subject"] for f in fics) == sorted(
            "system:serviceaccount:" + ref.replace("/", ":") for ref in component.inputs["serviceAccounts"])
        assert "system:serviceaccount:rtip-models:model-server" in {f.inputs["subject"] for f in fics}
        for fic in fics:
            assert fic.inputs["issuer"] == aks.outputs["oidcIssuerProfile"]["issuerURL"]
            issuers.add(fic.inputs["issuer"])
            assert fic.inputs["audiences"] == [TOKEN_AUDIENCE]
            assert fic.inputs["resourceName"] == identity.outputs["name"]
        reader = grant_of(record, component.urn, STORAGE_BLOB_DATA_READER)
        assert reader.inputs["principalId"] == identity.outputs["principalId"]
        assert reader.inputs["scope"] == containers[component.inputs["region"]]
        pull = grant_of(record, component.urn, ACR_PULL)
        assert pull.inputs["principalId"] == aks.outputs["identityProfile"]["kubeletidentity"]["objectId"]
        assert pull.inputs["scope"] == acr.outputs["id"]
        (sa,) = [s for s in record.by_type("kubernetes:core/v1:ServiceAccount") if s.parent == component.urn
                 and s.inputs["metadata"]["name"] == "model-server"]
        meta = sa.inputs["metadata"]
        assert (meta["namespace"], meta["name"]) == ("rtip-models", "model-server")
        assert sa.inputs["metadata"]["annotations"] == {CLIENT_ID_ANNOTATION: identity.outputs["clientId"]}
        assert record.get(sa.provider).parent == cluster.urn
        (namespace,) = [n for n in record.by_type("kubernetes:core/v1:Namespace")
                        if n.inputs["metadata"]["name"] == "rtip-models" and n.provider == sa.provider]
        assert namespace.urn in sa.dependencies
    assert len(issuers) == len(identities)  # no cluster trusts another's issuer


class _ProviderMonitor(offline.RecordingMonitor):
    """Also keeps the kubeconfig the AKS provider was given, before the record redacts it."""

    kubeconfigs: ClassVar[dict[str, str]] = {}

    def RegisterResource(self, request):
        if request.type == "pulumi:providers:kubernetes":
            raw = rpc.deserialize_properties(request.object, keep_unknowns=True)
            value = raw.get("kubeconfig")
            if isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig:
                value = value["value"]
            type(self).kubeconfigs[request.name] = value
        return super().RegisterResource(request)


def test_the_aks_provider_gets_the_clusters_ca_from_its_credentials(monkeypatch) -> None:
    calls: list[tuple[dict, dict]] = []
    answer = synth.INVOKES[CREDENTIALS]

    def spy(args: dict) -> dict:
        result = answer(args)
        calls.append((args, result))
        return result

    monkeypatch.setitem(synth.INVOKES, CREDENTIALS, spy)
    monkeypatch.setattr(offline, "RecordingMonitor", _ProviderMonitor)
    _ProviderMonitor.kubeconfigs = {}
    record = offline.run(load("prod"))
    (aks,) = record.by_type(MANAGED_CLUSTER)
    (args, result) = calls[0]
    assert len(calls) == 1
    assert (args["resourceGroupName"], args["resourceName"], args["format"]) == \
        (aks.inputs["resourceGroupName"], aks.outputs["name"], "exec")
    (answered,) = result["kubeconfigs"]
    api = yaml.safe_load(base64.b64decode(answered["value"]))
    assert api["users"][0]["user"]["exec"]["args"][-2:] == ["--login", "devicecode"]

    provider = next(p for p in record.by_type("pulumi:providers:kubernetes") if p.parent == aks.parent)
    assert "kubeconfig" in provider.secret_paths
    assert aks.urn in provider.dependencies
    doc = json.loads(_ProviderMonitor.kubeconfigs[provider.name])
    (cluster,) = doc["clusters"]
    assert cluster["cluster"] == {"server": f"https://{aks.outputs['privateFQDN']}:443",
                                  "certificate-authority-data": fake_ca(aks.urn)}
    assert cluster["cluster"] == api["clusters"][0]["cluster"]
    # AKS's own user would ask for a device code; the provider's logs in unattended.
    (user,) = doc["users"]
    exec_ = user["user"]["exec"]
    assert exec_["command"] == "kubelogin" and exec_["interactiveMode"] == "Never"
    assert exec_["args"][exec_["args"].index("--login") + 1] == "azurecli"


def test_credentials_of_a_cluster_never_created_are_not_found() -> None:
    with pytest.raises(LookupError, match="ResourceNotFound"):
        synth.INVOKES[CREDENTIALS]({"resourceGroupName": "nope", "resourceName": "nope", "format": "exec"})


def test_weights_uri_is_the_regions_container() -> None:
    from rtip.report import document
    spec = spec_of("prod")
    doc = document(record_of("prod").plan, record_of("prod"))
    azure = {r.region: r for r in azure_regions(spec)}
    served = [m for m in doc["models"] if m["region"] in azure]
    assert served
    for m in served:
        account = storage_account(spec, azure[m["region"]])
        assert m["source_uri"] == f"https://{account}.blob.core.windows.net/weights/models/{m['name']}"


TAGGED = {"azure-native:resources:ResourceGroup", REGISTRY, REPLICATION, ACCOUNT, VAULT, KEY, IDENTITY}


@pytest.mark.parametrize("which", ["prod", "two"])
def test_registries_go_through_their_regions_provider_with_stack_tags(which, two_regions) -> None:
    record = record_of("prod") if which == "prod" else two_regions[0]
    (component,) = record.by_type("rtip:azure:Registries")
    (platform,) = record.by_type("rtip:platform:Platform")
    environment = platform.inputs["environment"]
    children = record.children(component.urn)
    assert {r.type for r in children} >= {REGISTRY, ACCOUNT, BLOB_SERVICE, CONTAINER}
    for res in children:
        provider = record.get(res.provider)
        assert provider.type == "pulumi:providers:azure-native", res.urn
        if "location" in res.inputs:
            assert provider.inputs["location"] == res.inputs["location"], res.urn
        if res.type in TAGGED:
            # The registries serve every cluster of the stack, so they name none of them.
            assert res.inputs["tags"]["rtip-environment"] == environment, res.urn
            assert "rtip-cluster" not in res.inputs["tags"], res.urn


def test_a_cache_rule_per_toolkit_image_maps_the_pulled_path_onto_docker_hub() -> None:
    record = record_of("prod")
    rules = {r.inputs["targetRepository"]: r.inputs["sourceRepository"]
             for r in record.by_type("azure-native:containerregistry:CacheRule")}
    # Written out: target repository in the registry => source repository upstream.
    assert rules["docker-hub/vllm/vllm-openai"] == "docker.io/vllm/vllm-openai"
    assert rules["docker-hub/rocm/vllm"] == "docker.io/rocm/vllm"
    assert rules["docker-hub/library/ubuntu"] == "docker.io/library/ubuntu"


def test_one_cache_rule_per_target_repository() -> None:
    """The AMD device plugin and node labeller are two tags of docker.io/rocm/k8s-device-plugin
    (serving/charts.py); ACR refuses a second rule for a target repository that a rule already
    holds (Azure docs, "Artifact cache in Azure Container Registry"), so there is one."""
    targets = [r.inputs["targetRepository"]
               for r in record_of("prod").by_type("azure-native:containerregistry:CacheRule")]
    assert len(targets) == len(set(targets))
    assert targets.count("docker-hub/rocm/k8s-device-plugin") == 1
