"""Cluster control planes: a private or allow-listed API, secrets under a customer key, private nodes."""

from __future__ import annotations

from collections.abc import Iterator

from policies.rules.base import Config, Props, get, of_types

EKS, GKE, AKS = ("aws:eks/cluster:Cluster", "gcp:container/cluster:Cluster",
                 "azure-native:containerservice:ManagedCluster")
OPEN = {"0.0.0.0/0", "::/0"}


def _api(type_: str, props: Props) -> tuple[bool, list[str]]:
    """(private endpoint only, networks the public endpoint is open to)."""
    if type_ == EKS:
        public = bool(get(props, "vpcConfig", "endpointPublicAccess", default=True))
        cidrs = list(get(props, "vpcConfig", "publicAccessCidrs", default=["0.0.0.0/0"] if public else []))
        return not public, cidrs if public else []
    if type_ == GKE:
        private = bool(get(props, "privateClusterConfig", "enablePrivateEndpoint", default=False))
        blocks = get(props, "masterAuthorizedNetworksConfig", "cidrBlocks", default=None)
        # No authorized networks config: GKE's public endpoint answers every address.
        cidrs = ["0.0.0.0/0"] if blocks is None else [b.get("cidrBlock", "") for b in blocks]
        return private, [] if private else cidrs
    private = bool(get(props, "apiServerAccessProfile", "enablePrivateCluster", default=False))
    ranges = list(get(props, "apiServerAccessProfile", "authorizedIPRanges", default=[]))
    # AKS with no authorized ranges opens a public API server to the internet.
    return private, [] if private else (ranges or ["0.0.0.0/0"])


@of_types({EKS, GKE, AKS})
def cluster_api_not_public(type_: str, props: Props, config: Config) -> Iterator[str]:
    private, cidrs = _api(type_, props)
    if config.get("requirePrivateApi") and not private:
        yield f"the cluster API has a public endpoint (open to {', '.join(cidrs) or 'nothing'})"
    for cidr in cidrs:
        if cidr in OPEN:
            yield f"the cluster API is open to {cidr}, the whole internet"


@of_types({EKS, GKE, AKS})
def secrets_customer_key(type_: str, props: Props, config: Config) -> Iterator[str]:
    if not config.get("requireSecretsKey"):
        return
    if type_ == EKS:
        keyed = "secrets" in get(props, "encryptionConfig", "resources", default=[]) and \
            bool(get(props, "encryptionConfig", "provider", "keyArn"))
    elif type_ == GKE:
        keyed = get(props, "databaseEncryption", "state") == "ENCRYPTED" and \
            bool(get(props, "databaseEncryption", "keyName"))
    else:
        keyed = bool(get(props, "securityProfile", "azureKeyVaultKms", "enabled", default=False))
    if not keyed:
        yield "Kubernetes secrets are not encrypted with a customer-managed key"


@of_types({GKE, "azure-native:containerservice:AgentPool"})
def no_public_node_ips(type_: str, props: Props, config: Config) -> Iterator[str]:
    if type_ == GKE and not get(props, "privateClusterConfig", "enablePrivateNodes", default=False):
        yield "GKE nodes get public IP addresses (privateClusterConfig.enablePrivateNodes is off)"
    if type_ != GKE and get(props, "enableNodePublicIP", default=False):
        yield "AKS agent pool nodes get public IP addresses (enableNodePublicIP)"


__all__ = ["cluster_api_not_public", "no_public_node_ips", "secrets_customer_key"]
