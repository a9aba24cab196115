"""Globally unique cloud names: owned by the account, project or subscription they live in, within
each cloud's naming rules, and free again after a destroy; providers pinned to that owner.

Expected names are written out by hand from the rule in stacks/naming.py; the limits are the
clouds' own: S3 general purpose bucket naming rules, Cloud Storage bucket naming requirements,
and Azure's "Naming rules and restrictions for Azure resources" (Microsoft.ContainerRegistry
registries 5-50 alphanumerics; Microsoft.Storage storageAccounts 3-24 lowercase letters and
numbers; Microsoft.KeyVault vaults 3-24 alphanumerics and hyphens, starting with a letter, ending
with a letter or digit, no consecutive hyphens).
"""

from __future__ import annotations

import json
import re

import pytest

from rtip.cli import main
from stacks import naming
from stacks.schema import StackSpec
from tests.conftest import record_of, spec_of, stack_doc

S3_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
S3_RESERVED_HEADS = ("xn--", "sthree-", "amzn-s3-demo-")
S3_RESERVED_TAILS = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
GCS_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]$")
ACR_NAME = re.compile(r"^[a-zA-Z0-9]{5,50}$")
STORAGE_ACCOUNT = re.compile(r"^[a-z0-9]{3,24}$")
KEY_VAULT = re.compile(r"^(?!.*--)[a-zA-Z][a-zA-Z0-9-]{1,22}[a-zA-Z0-9]$")

OTHER_ACCOUNT = "210987654321"
OTHER_SUBSCRIPTION = "11111111-2222-4333-8444-555555555555"
OTHER_PROJECT = "another-org-serving"


def _other_org(spec: StackSpec) -> StackSpec:
    """The same stack file deployed by another organisation: its own account, subscription, project."""
    assert spec.deployer and spec.deployer.aws and spec.deployer.azure
    deployer = spec.deployer.model_copy(update={
        "aws": spec.deployer.aws.model_copy(update={
            "role_arn": f"arn:aws:iam::{OTHER_ACCOUNT}:role/rtip-deployer"}),
        "azure": spec.deployer.azure.model_copy(update={"subscription_id": OTHER_SUBSCRIPTION})})
    regions = [r.model_copy(update={"project": OTHER_PROJECT}) if r.cloud == "gcp" else r
               for r in spec.regions]
    return spec.model_copy(update={"deployer": deployer, "regions": regions})


def _names(spec: StackSpec) -> set[str]:
    return ({naming.weights_root(spec, r) for r in spec.regions}
            | {naming.registry_name(spec)})


def test_two_organisations_with_the_same_stack_get_different_names() -> None:
    ours, theirs = spec_of("prod"), _other_org(spec_of("prod"))
    assert ours.registries.name_prefix == theirs.registries.name_prefix == "rtip"
    assert not _names(ours) & _names(theirs)


def test_s3_buckets_end_in_the_deployer_account() -> None:
    spec = spec_of("prod")
    aws = {r.region: naming.weights_bucket(spec, r) for r in spec.regions if r.cloud == "aws"}
    # prod's deployer role is arn:aws:iam::123456789012:role/rtip-deployer.
    assert aws == {"us-east-1": "rtip-prod-weights-us-east-1-123456789012",
                   "us-west-2": "rtip-prod-weights-us-west-2-123456789012"}


def test_gcs_bucket_carries_a_hash_of_the_project_not_the_project() -> None:
    spec = spec_of("prod")
    (gcp,) = [r for r in spec.regions if r.cloud == "gcp"]
    bucket = naming.weights_bucket(spec, gcp)
    assert bucket.startswith("rtip-prod-weights-us-central1-") and "rtip-prod-serving" not in bucket
    assert bucket != naming.weights_bucket(_other_org(spec), gcp)


def test_azure_names_differ_by_subscription_alone() -> None:
    spec = spec_of("prod")
    only_sub = spec.model_copy(update={"deployer": spec.deployer.model_copy(update={  # type: ignore[union-attr]
        "azure": spec.deployer.azure.model_copy(  # type: ignore[union-attr]
            update={"subscription_id": OTHER_SUBSCRIPTION})})})
    (azure,) = [r for r in spec.regions if r.cloud == "azure"]
    assert naming.registry_name(spec) != naming.registry_name(only_sub)
    assert naming.storage_account(spec, azure) != naming.storage_account(only_sub, azure)
    # The readable head stays: prefix, environment, purpose.
    assert naming.registry_name(spec).startswith("rtipprodimages")
    assert naming.storage_account(spec, azure).startswith("rtipprodweastus")


def test_without_a_deployer_names_are_the_prefix_alone() -> None:
    # The documented rule for a stack with no deployer block (a public runner in dev): nothing
    # names the account, so `name_prefix` must be the organisation's own.
    spec = spec_of("dev").model_copy(update={"deployer": None})
    (region,) = spec.regions
    assert naming.weights_bucket(spec, region) == "rtip-dev-weights-us-east-1"


# The longest names the schema admits: a 12-character prefix, `staging`, and long real regions.
LONG_PREFIX = "abcdefghijkl"
LONG_REGIONS = {"aws": ["ap-southeast-1", "us-gov-west-1", "ap-northeast-3"],
                "gcp": ["northamerica-northeast1", "northamerica-northeast2", "europe-southwest1"],
                "azure": ["germanywestcentral", "australiasoutheast", "southafricanorth"]}


@pytest.mark.parametrize("cloud", sorted(LONG_REGIONS))
def test_names_fit_the_cloud_rules_at_their_longest(cloud: str) -> None:
    spec = spec_of("prod")
    spec = spec.model_copy(update={
        "environment": "staging",
        "registries": spec.registries.model_copy(update={"name_prefix": LONG_PREFIX})})
    (template,) = [r for r in spec.regions if r.cloud == cloud][:1]
    names = []
    for region_name in LONG_REGIONS[cloud]:
        region = template.model_copy(update={"region": region_name})
        one = spec.model_copy(update={"regions": [region]})
        if cloud == "aws":
            name = naming.weights_bucket(one, region)
            assert S3_NAME.match(name) and name.endswith("-123456789012"), name
            assert not name.startswith(S3_RESERVED_HEADS) and not name.endswith(S3_RESERVED_TAILS)
        elif cloud == "gcp":
            name = naming.weights_bucket(one, region)
            assert GCS_NAME.match(name) and not name.startswith("goog") and "google" not in name, name
        else:
            name = naming.storage_account(one, region)
            assert STORAGE_ACCOUNT.match(name), name
            vault = naming.vault_stem(one, region_name, "kms") + "0" * naming.AZURE_AUTONAME_HEX
            assert KEY_VAULT.match(vault), vault
            assert ACR_NAME.match(naming.registry_name(one))
        names.append(name)
    # Shortened names never meet: each keeps a hash of its whole.
    assert len(set(names)) == len(names)


def test_key_vaults_are_auto_named_so_a_recreated_stack_asks_for_new_ones() -> None:
    record = record_of("prod")
    vaults = record.by_type("azure-native:keyvault:Vault")
    assert len(vaults) == 2  # the registries' key and the AKS KMS key
    for vault in vaults:
        # No fixed name: azure-native appends 8 random hex digits to the logical name.
        assert "vaultName" not in vault.inputs
        name = vault.outputs["name"]
        assert re.fullmatch(re.escape(vault.name) + r"[0-9a-f]{8}", name) and KEY_VAULT.match(name), name
    # Keys, and the services using them, name the vault the engine created.
    names = {v.outputs["name"] for v in vaults}
    keys = record.by_type("azure-native:keyvault:Key")
    assert keys and {k.inputs["vaultName"] for k in keys} == names
    uris = {a.inputs["encryption"]["keyVaultProperties"]["keyVaultUri"]
            for a in record.by_type("azure-native:storage:StorageAccount") if a.inputs.get("encryption")}
    assert uris and all(re.fullmatch(r"https://([a-z0-9-]+)\.vault\.azure\.net/", u)[1] in names  # type: ignore[index]
                        for u in uris)


def test_providers_are_pinned_to_the_deployer_account_and_subscription() -> None:
    record = record_of("prod")
    deployer = stack_doc("prod")["config"]["rtip:platform"]["deployer"]
    account = deployer["aws"]["role_arn"].split(":")[4]
    for provider in record.by_type("pulumi:providers:aws"):
        assert json.loads(provider.inputs["allowedAccountIds"]) == [account]
    (azure,) = record.by_type("pulumi:providers:azure-native")
    assert azure.inputs["subscriptionId"] == deployer["azure"]["subscription_id"]
    gcp_projects = {r["project"] for r in stack_doc("prod")["config"]["rtip:platform"]["regions"]
                    if r["cloud"] == "gcp"}
    assert {p.inputs["project"] for p in record.by_type("pulumi:providers:gcp")} == gcp_projects


def test_rtip_check_prod_finds_no_unpinned_provider_and_no_bucket_without_tls(capsys) -> None:
    main(["check", "prod", "--json"])
    report = json.loads(capsys.readouterr().out)
    found = {v["policy"] for v in report["violations"]}
    assert not found & {"providers-pinned", "s3-buckets-hardened"}, report["violations"]


def test_every_s3_bucket_refuses_requests_without_tls() -> None:
    record = record_of("prod")
    buckets = record.by_type("aws:s3/bucket:Bucket")
    policies = {p.inputs["bucket"]: json.loads(p.inputs["policy"])
                for p in record.by_type("aws:s3/bucketPolicy:BucketPolicy")}
    assert buckets and len(policies) == len(buckets)
    for bucket in buckets:
        arn = bucket.outputs["arn"]
        (statement,) = policies[bucket.outputs["id"]]["Statement"]
        assert statement["Effect"] == "Deny" and statement["Action"] == "s3:*"
        assert statement["Principal"] == "*" and sorted(statement["Resource"]) == [arn, f"{arn}/*"]
        assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
