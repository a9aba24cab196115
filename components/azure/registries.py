"""Azure registries: one geo-replicated ACR and one weights storage account per Azure region.

Images: a Premium registry in the first Azure region of the stack with a replica in every other
one; a single login server routes each pull to the nearest replica. Weights: a storage account per
region holding a private `weights` container, versioned with change feed on, which object
replication needs on the source (versioning alone on the destination), replicating `models/`
from the first region's account into every other one. Prod encrypts the registry and every
account with one customer-managed key, reached through a user-assigned identity that may wrap and
unwrap with that key and nothing else.

Network: neither the registry nor any weights account answers on a public network
(`publicNetworkAccess: Disabled`, and a deny-all rule set behind it). Each cluster reaches them
through private endpoints in its own VNet (components/azure/endpoints.py). ACR has no service
endpoints any more: its network rule set takes IP rules only (azure-native 3.29
containerregistry NetworkRuleSetArgs: default_action, ip_rules), so a private endpoint is the one
way in from a VNet; and a Premium registry, which this is, is the tier that has private
endpoints. Everything `pulumi up` does to them goes through Azure Resource Manager (the
registry, its cache rules and replicas, the accounts, their containers and replication
policies), which these settings do not block; nothing in the program writes blobs or pushes
images over the data plane.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import (
    containerregistry,
    resources,
    storage,
)

from components.azure.cluster import AzureProvider
from components.azure.keys import WRAP, CustomerKey
from components.contract import RegionStore
from serving.charts import IMAGES
from serving.hardware import Cloud
from serving.images import cache_path
from stacks.naming import (
    MODELS_PREFIX,
    WEIGHTS_CONTAINER,
    registry_name,
    storage_account,
    vault_stem,
    weights_root,
)
from stacks.plan import Plan, RegionPlan

# Built-in role definition IDs are the same GUIDs in every tenant. Checked against the role
# definitions as Azure returns them, mirrored at azure-rbac-catalog.org/roles/<guid>
# (Storage Blob Data Reader: read containers and blobs; AcrPull: registries/pull/read; Key Vault
# Crypto Service Encryption User: keys/read, wrap, unwrap, and only on RBAC-authorized vaults).
STORAGE_BLOB_DATA_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
ACR_PULL = "7f951dda-4ed3-4680-a7ca-43fe172d538d"
CHANGE_FEED_DAYS = 7
DELETED_BLOB_DAYS = 7


@dataclass(frozen=True)
class AzureStore(RegionStore):
    registry_id: pulumi.Output[str]  # the ACR every cluster's kubelet pulls from
    account_id: pulumi.Output[str]  # resource ID of the region's weights storage account
    weights_container: pulumi.Output[str]  # resource ID of the region's `weights` container


class AzureRegistries(pulumi.ComponentResource):
    stores: dict[str, AzureStore]

    def __init__(self, name: str, plan: Plan, region_plans: Sequence[RegionPlan],
                 providers: Mapping[str, AzureProvider],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        regions = [r.region for r in region_plans]
        super().__init__("rtip:azure:Registries", name, {
            "regions": [r.region for r in regions], "source": regions[0].region}, opts)
        spec, env = plan.spec, plan.posture
        first = regions[0].region
        popts = pulumi.ResourceOptions(parent=self, provider=providers[first])
        prefix = spec.registries.name_prefix
        # The region providers carry the cluster tag of their region's cluster; the registries
        # serve every cluster of the stack, so they carry only the stack-wide tags.
        tags = {k: v for k, v in providers[first].tags.items() if k != "rtip-cluster"}

        group = resources.ResourceGroup(f"{name}-rg", resources.ResourceGroupArgs(
            resource_group_name=f"{prefix}-{spec.environment}-registries", location=first, tags=tags),
            opts=popts)
        # This vault stays reachable from public networks (Entra ID RBAC still guards every key
        # operation): ACR reads a customer key from a firewalled vault only as its system-assigned
        # identity, which exists only after the registry, whereas the key must be given at
        # creation with a user-assigned one (MicrosoftDocs/azure-docs#61064: a customer key from a
        # firewalled vault fails at the registry's creation). The AKS KMS vaults are private.
        cmk = CustomerKey(f"{name}-cmk", vault_stem(spec, first, "cmk"),
                          f"{spec.registries.name_prefix}-{spec.environment}-cmk", WRAP, first,
                          group.name, tags, popts) if env.stores_customer_key else None
        after_key = pulumi.ResourceOptions(depends_on=[cmk.grant] if cmk else [])

        acr = containerregistry.Registry(f"{name}-acr", containerregistry.RegistryArgs(
            resource_group_name=group.name, registry_name=registry_name(spec), location=first, tags=tags,
            # Premium is the only tier with geo-replication, zone redundancy and customer keys.
            sku=containerregistry.SkuArgs(name=containerregistry.SkuName.PREMIUM),
            # Pulls and pushes authenticate with Entra ID only: no shared admin password, no
            # anonymous reads.
            admin_user_enabled=False, anonymous_pull_enabled=False,
            zone_redundancy=containerregistry.ZoneRedundancy.ENABLED,
            # Private endpoints only (see the module docstring); no trusted-service bypass either:
            # the artifact cache's pulls from upstream leave the registry, they do not enter it.
            public_network_access=containerregistry.PublicNetworkAccess.DISABLED,
            network_rule_set=containerregistry.NetworkRuleSetArgs(
                default_action=containerregistry.DefaultAction.DENY),
            network_rule_bypass_options=containerregistry.NetworkRuleBypassOptions.NONE,
            # A registry takes its customer key at creation only, so prod sets it from the start.
            # The identity map is keyed by the identity's resource ID, which only exists once created.
            identity=cmk.identity.id.apply(lambda uid: containerregistry.IdentityPropertiesArgs(
                type=containerregistry.ResourceIdentityType.USER_ASSIGNED,
                user_assigned_identities={uid: containerregistry.UserIdentityPropertiesArgs()},
            )) if cmk else None,
            encryption=containerregistry.EncryptionPropertyArgs(
                status=containerregistry.EncryptionStatus.ENABLED,
                key_vault_properties=containerregistry.KeyVaultPropertiesArgs(
                    # Versionless, so the registry follows the key's rotation by itself.
                    key_identifier=cmk.key.key_uri, identity=cmk.identity.client_id),
            ) if cmk else None,
        ), opts=pulumi.ResourceOptions.merge(popts, after_key))
        for region in regions[1:]:
            containerregistry.Replication(f"{name}-acr-{region.region}", containerregistry.ReplicationArgs(
                resource_group_name=group.name, registry_name=acr.name, replication_name=region.region,
                location=region.region, zone_redundancy=containerregistry.ZoneRedundancy.ENABLED,
                region_endpoint_enabled=True, tags=tags,
            ), opts=pulumi.ResourceOptions(parent=self, provider=providers[region.region]))

        # Artifact cache: a static rule per toolkit image maps `<namespace>/<upstream path>` in
        # the registry onto `<host>/<upstream path>` upstream (the target repository must not
        # exist yet; Docker Hub official images under `library/`). ACR pulls Docker Hub, GHCR,
        # Quay and registry.k8s.io with or without a credential set and ECR Public without
        # (Azure docs, "Artifact cache in Azure Container Registry"); these rules pull
        # anonymously. A rule lives on the registry, so every geo-replica serves its cache.
        # One rule per target repository: two image keys can be tags of one upstream repository
        # (the AMD device plugin and node labeller), and a second rule for the same target fails
        # ("the target repository can't already exist").
        rules = []
        targets: set[tuple[str, str]] = set()
        for key in IMAGES:
            upstream, path = cache_path(key)
            if (upstream.host, path) in targets:
                continue
            targets.add((upstream.host, path))
            rules.append(containerregistry.CacheRule(f"{name}-cache-{key}", containerregistry.CacheRuleArgs(
                resource_group_name=group.name, registry_name=acr.name,
                cache_rule_name=f"{upstream.namespace}-{key}",
                source_repository=f"{upstream.host}/{path}",
                target_repository=f"{upstream.namespace}/{path}"), opts=popts))
        image_root = pulumi.Output.all(acr.login_server, *(r.id for r in rules)).apply(lambda a: a[0])

        self.stores = {}
        accounts: dict[str, storage.StorageAccount] = {}
        ready: dict[str, list[pulumi.Resource]] = {}
        for region in regions:
            ropts = pulumi.ResourceOptions(parent=self, provider=providers[region.region])
            rname = f"{name}-{region.region}"
            account = storage.StorageAccount(f"{rname}-weights", storage.StorageAccountArgs(
                resource_group_name=group.name, account_name=storage_account(spec, region),
                location=region.region, tags=tags,
                kind=storage.Kind.STORAGE_V2, access_tier=storage.AccessTier.HOT,
                # Zone-redundant in every stack; prod also keeps a geo copy in the paired region.
                sku=storage.SkuArgs(name=storage.SkuName.STANDARD_GZRS if env.replication_sla
                                    else storage.SkuName.STANDARD_ZRS),
                enable_https_traffic_only=True, minimum_tls_version=storage.MinimumTlsVersion.TLS1_2,
                allow_blob_public_access=False,
                # Entra ID only: no account keys or SAS tokens that bypass RBAC.
                allow_shared_key_access=False, default_to_o_auth_authentication=True,
                allow_cross_tenant_replication=False,
                # Private endpoints only (see the module docstring).
                public_network_access=storage.PublicNetworkAccess.DISABLED,
                network_rule_set=storage.NetworkRuleSetArgs(
                    default_action=storage.DefaultAction.DENY, bypass=storage.Bypass.NONE),
                identity=storage.IdentityArgs(type=storage.IdentityType.USER_ASSIGNED,
                                              user_assigned_identities=[cmk.identity.id]) if cmk else None,
                encryption=storage.EncryptionArgs(
                    key_source=storage.KeySource.MICROSOFT_KEYVAULT,
                    key_vault_properties=storage.KeyVaultPropertiesArgs(
                        key_name=cmk.key.name, key_vault_uri=cmk.vault_uri),
                    encryption_identity=storage.EncryptionIdentityArgs(
                        encryption_user_assigned_identity=cmk.identity.id),
                    services=storage.EncryptionServicesArgs(blob=storage.EncryptionServiceArgs(
                        enabled=True, key_type=storage.KeyType.ACCOUNT)),
                ) if cmk else None,
            ), opts=pulumi.ResourceOptions.merge(ropts, after_key))
            blob_service = storage.BlobServiceProperties(
                f"{rname}-weights", storage.BlobServicePropertiesArgs(
                    resource_group_name=group.name, account_name=account.name, blob_services_name="default",
                    # Object replication copies versions and reads the source's change feed.
                    is_versioning_enabled=True,
                    change_feed=storage.ChangeFeedArgs(enabled=True, retention_in_days=CHANGE_FEED_DAYS),
                    delete_retention_policy=storage.DeleteRetentionPolicyArgs(
                        enabled=True, days=DELETED_BLOB_DAYS),
                    container_delete_retention_policy=storage.DeleteRetentionPolicyArgs(
                        enabled=True, days=DELETED_BLOB_DAYS),
                ), opts=ropts)
            container = storage.BlobContainer(f"{rname}-weights", storage.BlobContainerArgs(
                resource_group_name=group.name, account_name=account.name, container_name=WEIGHTS_CONTAINER,
                public_access=storage.PublicAccess.NONE,
            ), opts=ropts)
            accounts[region.region] = account
            ready[region.region] = [blob_service, container]
            self.stores[region.region] = AzureStore(
                cloud=Cloud.AZURE, region=region.region,
                image_registry=image_root,
                weights_uri=weights_root(spec, region),
                registry_id=acr.id, account_id=account.id, weights_container=container.id,
            )
        for region in regions[1:]:
            self._replicate(f"{name}-{region.region}", group.name, accounts[first], accounts[region.region],
                            [*ready[first], *ready[region.region]],
                            pulumi.ResourceOptions(parent=self, provider=providers[region.region]), popts)
        self.registry = acr
        self.register_outputs({"loginServer": acr.login_server})

    def _replicate(self, name: str, group: pulumi.Input[str], source: storage.StorageAccount,
                   target: storage.StorageAccount, ready: list[pulumi.Resource],
                   target_opts: pulumi.ResourceOptions, source_opts: pulumi.ResourceOptions) -> None:
        """Object replication of `models/` from `source` into `target`.

        Azure takes the policy on the destination account first, with the ID `default`, and
        answers with the policy and rule IDs the source account's copy of it must repeat.
        """
        def rule(rule_id: pulumi.Input[str] | None = None) -> storage.ObjectReplicationPolicyRuleArgs:
            return storage.ObjectReplicationPolicyRuleArgs(
                rule_id=rule_id, source_container=WEIGHTS_CONTAINER, destination_container=WEIGHTS_CONTAINER,
                filters=storage.ObjectReplicationPolicyFilterArgs(prefix_match=[f"{MODELS_PREFIX}/"]))

        # Accounts are named by resource ID: cross-tenant replication is off on both.
        inbound = storage.ObjectReplicationPolicy(
            f"{name}-replication-in", storage.ObjectReplicationPolicyArgs(
            resource_group_name=group, account_name=target.name, object_replication_policy_id="default",
            source_account=source.id, destination_account=target.id, rules=[rule()],
            metrics=storage.ObjectReplicationPolicyPropertiesMetricsArgs(enabled=True),
        ), opts=pulumi.ResourceOptions.merge(target_opts, pulumi.ResourceOptions(depends_on=ready)))
        storage.ObjectReplicationPolicy(f"{name}-replication-out", storage.ObjectReplicationPolicyArgs(
            resource_group_name=group, account_name=source.name,
            object_replication_policy_id=inbound.policy_id,
            source_account=source.id, destination_account=target.id,
            rules=[rule(inbound.rules.apply(lambda rules: rules[0].rule_id))],
            metrics=storage.ObjectReplicationPolicyPropertiesMetricsArgs(enabled=True),
        ), opts=pulumi.ResourceOptions.merge(source_opts, pulumi.ResourceOptions(
            depends_on=[inbound, *ready])))


__all__ = ["ACR_PULL", "STORAGE_BLOB_DATA_READER", "AzureRegistries", "AzureStore"]
