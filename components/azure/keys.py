"""Customer-managed keys in Key Vault, and the role grants every Azure component makes.

One rule for every Azure key the stack owns: a vault per purpose and region with soft delete and
purge protection (Storage, ACR and the AKS KMS plugin refuse keys from a purgeable vault), Azure
RBAC instead of access policies (so a grant can name one key), a key that rotates itself, and a
user-assigned identity that may use that one key and nothing else.

A purge-protected vault keeps its name, globally, for the whole soft-delete retention after it is
deleted, so the vault is named by azure-native (`<stem><8 random hex>`, stacks/naming.vault_stem)
rather than by the program: a stack destroyed and created again gets new vaults. Everything that
needs the vault reads its name or URI from the resource.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import authorization, keyvault, managedidentity

# Built-in role definition IDs are the same GUIDs in every tenant. Checked against the role
# definitions as Azure returns them, mirrored at azure-rbac-catalog.org/roles/<guid>
# (Key Vault Crypto Service Encryption User: keys/read, wrap, unwrap; Key Vault Crypto User:
# encrypt, decrypt and the rest of the key operations, what the AKS KMS plugin needs).
KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER = "e147488a-f6f5-4113-8e2d-b22465e65bf6"
KEY_VAULT_CRYPTO_USER = "12338af0-0e69-4776-bea7-57ae8d297424"
# Key Vault Contributor ("Lets you manage key vaults, but not access to them"; Azure built-in
# roles, MicrosoftDocs): what the AKS KMS plugin's identity needs on a private vault to make the
# private link it reaches the vault through.
KEY_VAULT_CONTRIBUTOR = "f25e0fa2-a7c8-4377-a976-54943a77a395"

KEY_ROTATION = "P90D"  # a new key version every 90 days; the versionless URI follows it
KEY_EXPIRY = "P1Y"  # each version expires a year after creation, long after its successor exists
SOFT_DELETE_DAYS = 90  # the maximum: a deleted vault or key stays recoverable for a quarter


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


@dataclass(frozen=True)
class KeyUse:
    """What a key is for: its name, the operations it allows, the role its user gets."""

    key_name: str
    operations: tuple[keyvault.JsonWebKeyOperation, ...]
    role: str


# Storage and ACR wrap and unwrap their data keys with it.
WRAP = KeyUse("registries", (keyvault.JsonWebKeyOperation.WRAP_KEY, keyvault.JsonWebKeyOperation.UNWRAP_KEY),
              KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER)
# The AKS KMS plugin encrypts and decrypts the DEKs of Kubernetes secrets with it.
ENCRYPT = KeyUse("kms", (keyvault.JsonWebKeyOperation.ENCRYPT, keyvault.JsonWebKeyOperation.DECRYPT),
                 KEY_VAULT_CRYPTO_USER)


class CustomerKey:
    """A vault, a key and the user-assigned identity allowed to use that key."""

    def __init__(self, name: str, vault_stem: str, identity: str, use: KeyUse, location: str,
                 group: pulumi.Input[str], tags: dict[str, str], opts: pulumi.ResourceOptions,
                 private: bool = False) -> None:
        """`private`: the vault answers on no public network (public network access disabled,
        a deny-all firewall with no trusted-service bypass); only private endpoints reach its
        data plane. The key and its rotation policy are written through Azure Resource Manager
        (Microsoft.KeyVault/vaults/keys), which the vault's firewall does not govern."""
        # Keyword arguments: the Args class names the identity `resource_name`, which collides
        # with the resource's own first parameter in the 3.29 SDK (see components/azure/cluster.py).
        self.identity = managedidentity.UserAssignedIdentity(
            name, resource_group_name=group, resource_name_=identity, location=location, tags=tags,
            opts=opts)
        # No vault_name: the logical name is the stem azure-native completes with a random suffix.
        self.vault = keyvault.Vault(vault_stem, keyvault.VaultArgs(
            resource_group_name=group, location=location, tags=tags,
            properties=keyvault.VaultPropertiesArgs(
                # The identity lives in the subscription's own tenant, so its tenant is the vault's.
                tenant_id=self.identity.tenant_id,
                sku=keyvault.SkuArgs(family=keyvault.SkuFamily.A, name=keyvault.SkuName.STANDARD),
                enable_soft_delete=True, soft_delete_retention_in_days=SOFT_DELETE_DAYS,
                enable_purge_protection=True,
                enable_rbac_authorization=True,
                public_network_access="Disabled" if private else None,
                network_acls=keyvault.NetworkRuleSetArgs(
                    default_action=keyvault.NetworkRuleAction.DENY,
                    bypass=keyvault.NetworkRuleBypassOptions.NONE) if private else None,
            )), opts=opts)
        self.key = keyvault.Key(name, keyvault.KeyArgs(
            resource_group_name=group, vault_name=self.vault.name, key_name=use.key_name, tags=tags,
            properties=keyvault.KeyPropertiesArgs(
                # RSA 2048: the size the Storage and ACR customer-key guides use (recalled, not
                # rechecked here).
                kty=keyvault.JsonWebKeyType.RSA, key_size=2048, key_ops=list(use.operations),
                rotation_policy=keyvault.RotationPolicyArgs(
                    attributes=keyvault.KeyRotationPolicyAttributesArgs(expiry_time=KEY_EXPIRY),
                    lifetime_actions=[keyvault.LifetimeActionArgs(
                        action=keyvault.ActionArgs(type=keyvault.KeyRotationPolicyActionType.ROTATE),
                        trigger=keyvault.TriggerArgs(time_after_create=KEY_ROTATION))]),
            )), opts=opts)
        # Scoped to the key itself: the narrowest scope Key Vault RBAC has.
        self.grant = grant(f"{name}-user", use.role, self.key.id, self.identity.principal_id, opts)
        self.vault_uri = self.vault.properties.apply(lambda p: p.vault_uri)


__all__ = ["ENCRYPT", "KEY_VAULT_CONTRIBUTOR", "KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER",
           "KEY_VAULT_CRYPTO_USER", "WRAP",
           "CustomerKey", "KeyUse", "grant", "role_definition"]
