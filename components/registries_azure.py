"""Azure registries: one geo-replicated ACR and one weights storage account per Azure region.

Images: a Premium registry in the first Azure region of the stack with a replica in every other
one; a single login server routes each pull to the nearest replica. Weights: a storage account per
region holding a private `weights` container, versioned with change feed on, which object
replication needs on the source (versioning alone on the destination), replicating `models/`
from the first region's account into every other one. Prod encrypts the registry and every
account with one customer-managed key, reached through a user-assigned identity that may wrap and
unwrap with that key and nothing else.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import (
    authorization,
    containerregistry,
    keyvault,
    managedidentity,
    resources,
    storage,
)

from components.azure import AzureProvider
from components.contract import RegionStore
from serving.hardware import Cloud
from stacks.naming import MODELS_PREFIX, WEIGHTS_CONTAINER, storage_account, weights_root
from stacks.schema import AzureRegion, StackSpec

# Built-in role definition IDs are the same GUIDs in every tenant. Checked against the role
# definitions as Azure returns them, mirrored at azure-rbac-catalog.org/roles/<guid>
# (Storage Blob Data Reader: read containers and blobs; AcrPull: registries/pull/read; Key Vault
# Crypto Service Encryption User: keys/read, wrap, unwrap, and only on RBAC-authorized vaults).
STORAGE_BLOB_DATA_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
ACR_PULL = "7f951dda-4ed3-4680-a7ca-43fe172d538d"
KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER = "e147488a-f6f5-4113-8e2d-b22465e65bf6"

KEY_NAME = "registries"
KEY_ROTATION = "P90D"  # a new key version every 90 days; the versionless URI follows it
KEY_EXPIRY = "P1Y"  # each version expires a year after creation, long after its successor exists
SOFT_DELETE_DAYS = 90  # the maximum: a deleted vault or key stays recoverable for a quarter
CHANGE_FEED_DAYS = 7
DELETED_BLOB_DAYS = 7


def role_definition(scope: pulumi.Input[str], role: str) -> pulumi.Output[str]:
    """The subscription-qualified ID of a built-in role, in the subscription `scope` lives in.

    Reading the subscription off the scope's ARM ID keeps the plan free of a client-config lookup.
    """
    return pulumi.Output.from_input(scope).apply(
        lambda s: f"/{'/'.join(s.strip('/').split('/')[:2])}/providers/Microsoft.Authorization/"
                  f"roleDefinitions/{role}")


def grant(name: str, role: str, scope: pulumi.Input[str], principal_id: pulumi.Input[str],
          opts: pulumi.ResourceOptions) -> authorization.RoleAssignment:
    """One built-in role for one managed identity on exactly `scope`."""
    return authorization.RoleAssignment(name, authorization.RoleAssignmentArgs(
        scope=scope, role_definition_id=role_definition(scope, role), principal_id=principal_id,
        # Without the type, ARM looks the principal up in Entra ID and can fail while a freshly
        # created identity is still replicating there.
        principal_type=authorization.PrincipalType.SERVICE_PRINCIPAL,
    ), opts=opts)


def registry_name(spec: StackSpec) -> str:
    """ACR names: 5-50 letters and digits, globally unique; the login server is `<name>.azurecr.io`."""
    raw = f"{spec.registries.name_prefix}{spec.environment}images"
    return "".join(c for c in raw.lower() if c.isalnum())[:50]


def vault_name(spec: StackSpec, region: str) -> str:
    """Key Vault names: 3-24 letters, digits and single hyphens, globally unique."""
    return f"{spec.registries.name_prefix}-{spec.environment}-{region}-cmk"[:24].rstrip("-")


def registry_id(store: RegionStore) -> pulumi.Output[str]:
    """The ARM ID of the registry a store's images come from.

    The registry shares its resource group and subscription with the weights accounts (this
    module creates both there), and its name is the first label of its login server.
    """
    def build(args: list[str]) -> str:
        account_id, login_server = args
        group = account_id.split("/providers/", 1)[0]
        return f"{group}/providers/Microsoft.ContainerRegistry/registries/{login_server.split('.')[0]}"
    return pulumi.Output.all(store.weights_bucket, store.image_registry).apply(build)


class _CustomerKey:
    """Prod's encryption key and the identity the registry and storage accounts use it as."""

    def __init__(self, name: str, spec: StackSpec, region: str, group: pulumi.Input[str],
                 tags: dict[str, str], opts: pulumi.ResourceOptions) -> None:
        prefix = spec.registries.name_prefix
        # Keyword arguments: the Args class names the identity `resource_name`, which collides
        # with the resource's own first parameter in the 3.29 SDK (see components/azure.py).
        self.identity = managedidentity.UserAssignedIdentity(
            f"{name}-cmk", resource_group_name=group, resource_name_=f"{prefix}-{spec.environment}-cmk",
            location=region, tags=tags, opts=opts)
        self.vault = keyvault.Vault(f"{name}-cmk", keyvault.VaultArgs(
            resource_group_name=group, vault_name=vault_name(spec, region), location=region, tags=tags,
            properties=keyvault.VaultPropertiesArgs(
                # The identity lives in the subscription's own tenant, so its tenant is the vault's.
                tenant_id=self.identity.tenant_id,
                sku=keyvault.SkuArgs(family=keyvault.SkuFamily.A, name=keyvault.SkuName.STANDARD),
                # Storage and ACR refuse a customer key from a vault that could be purged.
                enable_soft_delete=True, soft_delete_retention_in_days=SOFT_DELETE_DAYS,
                enable_purge_protection=True,
                # Access by Azure RBAC, so a grant can name one key instead of the whole vault.
                enable_rbac_authorization=True,
            )), opts=opts)
        self.key = keyvault.Key(f"{name}-cmk", keyvault.KeyArgs(
            resource_group_name=group, vault_name=self.vault.name, key_name=KEY_NAME, tags=tags,
            properties=keyvault.KeyPropertiesArgs(
                # RSA 2048: the size the Storage and ACR customer-key guides use (recalled, not
                # rechecked here).
                kty=keyvault.JsonWebKeyType.RSA, key_size=2048,
                key_ops=[keyvault.JsonWebKeyOperation.WRAP_KEY, keyvault.JsonWebKeyOperation.UNWRAP_KEY],
                rotation_policy=keyvault.RotationPolicyArgs(
                    attributes=keyvault.KeyRotationPolicyAttributesArgs(expiry_time=KEY_EXPIRY),
                    lifetime_actions=[keyvault.LifetimeActionArgs(
                        action=keyvault.ActionArgs(type=keyvault.KeyRotationPolicyActionType.ROTATE),
                        trigger=keyvault.TriggerArgs(time_after_create=KEY_ROTATION))]),
            )), opts=opts)
        # Scoped to the key itself: the narrowest scope Key Vault RBAC has.
        self.grant = grant(f"{name}-cmk-user", KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER, self.key.id,
                           self.identity.principal_id, opts)
        self.vault_uri = self.vault.properties.apply(lambda p: p.vault_uri)


class AzureRegistries(pulumi.ComponentResource):
    stores: dict[str, RegionStore]

    def __init__(self, name: str, spec: StackSpec, regions: list[AzureRegion],
                 providers: dict[str, AzureProvider],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("rtip:azure:Registries", name, {
            "regions": [r.region for r in regions], "source": regions[0].region}, opts)
        prod = spec.is_prod
        first = regions[0].region
        popts = pulumi.ResourceOptions(parent=self, provider=providers[first])
        prefix = spec.registries.name_prefix
        # The region providers carry the cluster tag of their region's cluster; the registries
        # serve every cluster of the stack, so they carry only the stack-wide tags.
        tags = {k: v for k, v in providers[first].tags.items() if k != "rtip-cluster"}

        group = resources.ResourceGroup(f"{name}-rg", resources.ResourceGroupArgs(
            resource_group_name=f"{prefix}-{spec.environment}-registries", location=first, tags=tags),
            opts=popts)
        cmk = _CustomerKey(name, spec, first, group.name, tags, popts) if prod else None
        after_key = pulumi.ResourceOptions(depends_on=[cmk.grant] if cmk else [])

        acr = containerregistry.Registry(f"{name}-acr", containerregistry.RegistryArgs(
            resource_group_name=group.name, registry_name=registry_name(spec), location=first, tags=tags,
            # Premium is the only tier with geo-replication, zone redundancy and customer keys.
            sku=containerregistry.SkuArgs(name=containerregistry.SkuName.PREMIUM),
            # Pulls and pushes authenticate with Entra ID only: no shared admin password, no
            # anonymous reads.
            admin_user_enabled=False, anonymous_pull_enabled=False,
            zone_redundancy=containerregistry.ZoneRedundancy.ENABLED,
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
                sku=storage.SkuArgs(
                    name=storage.SkuName.STANDARD_GZRS if prod else storage.SkuName.STANDARD_ZRS),
                enable_https_traffic_only=True, minimum_tls_version=storage.MinimumTlsVersion.TLS1_2,
                allow_blob_public_access=False,
                # Entra ID only: no account keys or SAS tokens that bypass RBAC.
                allow_shared_key_access=False, default_to_o_auth_authentication=True,
                allow_cross_tenant_replication=False,
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
            self.stores[region.region] = RegionStore(
                cloud=Cloud.AZURE, region=region.region,
                image_registry=acr.login_server,
                weights_uri=weights_root(spec, region),
                weights_bucket=account.id, weights_scope=container.id,
                weights_key=cmk.key.id if cmk else None,
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


__all__ = ["ACR_PULL", "KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER", "STORAGE_BLOB_DATA_READER",
           "AzureRegistries", "grant", "registry_id", "registry_name", "role_definition", "vault_name"]
