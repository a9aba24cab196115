"""The rtip policy pack: every rule with its name, what it guards, and how to fix a violation.

Enforcement is per environment through the pack's config (policies/config/<environment>.json,
`pulumi preview --policy-pack policies --policy-pack-config policies/config/prod.json`): advisory
in dev, mandatory in staging and prod, with each rule's settings (whether the API must be private,
customer keys required ...) from the environment's posture row (serving/posture.py).
"""

from __future__ import annotations

from pulumi_policy import Policy

from policies.rules import clusters, gateway, iam, nodes, stores, supply, workloads
from policies.rules.base import resource_policy, stack_policy
from policies.rules.logs import request_logs_redacted

PACK_NAME = "rtip"
BOOL = {"type": "boolean"}
STRINGS = {"type": "array", "items": {"type": "string"}}


def policies() -> list[Policy]:
    return [
        resource_policy("cluster-api-not-public", "Cluster APIs private where the posture says so, "
                        "and never open to 0.0.0.0/0", clusters.cluster_api_not_public,
                        "reach the API from inside the network, or list only the networks that need it",
                        {"requirePrivateApi": BOOL}),
        resource_policy("secrets-customer-key", "Kubernetes secrets encrypted with a customer-managed key",
                        clusters.secrets_customer_key,
                        "give the cluster a KMS / Cloud KMS / Key Vault key for secrets",
                        {"requireSecretsKey": BOOL}),
        resource_policy("no-public-node-ips", "GKE and AKS nodes without public IP addresses",
                        clusters.no_public_node_ips, "enable private nodes"),
        stack_policy("eks-no-public-node-ips", "EKS node groups only in subnets without public IPs",
                     nodes.no_public_eks_node_ips, "place node groups in the private subnets"),
        stack_policy("eks-imdsv2-one-hop", "IMDSv2 with a hop limit of 1 on every EKS node group",
                     nodes.imds_v2_one_hop,
                     "give the node group a launch template with httpTokens=required and hop limit 1"),
        resource_policy("gpu-pools-tainted", "GPU node pools repel pods that do not ask for GPUs",
                        nodes.gpu_pools_tainted, "taint the pool nvidia.com/gpu or amd.com/gpu:NoSchedule"),
        resource_policy("registries-hardened", "Registries immutable, scanned, encrypted, not anonymous",
                        stores.registries_hardened,
                        "make tags immutable, scan on push, use the posture's key, disable anonymous pulls",
                        {"requireStoreKeys": BOOL}),
        resource_policy("object-stores-hardened", "GCS buckets and storage accounts private, versioned, "
                        "TLS only, encrypted", stores.object_stores_hardened,
                        "block public access, version objects, require TLS 1.2 and Entra ID",
                        {"requireStoreKeys": BOOL}),
        stack_policy("s3-buckets-hardened", "S3 buckets versioned, public access blocked, encrypted, "
                     "TLS only", stores.s3_buckets_hardened,
                     "add versioning, a public access block, default encryption and a TLS-only policy"),
        resource_policy("iam-no-wildcards", "No IAM statement allows every action or every resource",
                        iam.iam_no_wildcards, "name the actions and resource ARNs the role needs",
                        {"unscopedActions": STRINGS}),
        resource_policy("iam-trust-scoped", "Role trust bound to the account and the resource using it",
                        iam.trust_scoped, "add aws:SourceAccount and aws:SourceArn conditions"),
        resource_policy("iam-no-broad-managed-policies", "No broad AWS-managed policy on a role",
                        iam.no_broad_managed_policies,
                        "grant the narrower policy to the one workload that needs it (e.g. the CNI "
                        "policy to aws-node through Pod Identity)", {"forbiddenManagedPolicies": STRINGS}),
        resource_policy("model-servers-hardened", "Model servers with Guaranteed resources, no "
                        "privilege, non-root unless allow-listed, no API token",
                        workloads.model_servers_hardened,
                        "set requests = limits, drop privilege, run as non-root, automount no token",
                        {"rootAllowedGpuVendors": STRINGS}),
        resource_policy("namespaces-pod-security", "Every namespace enforces a Pod Security level",
                        workloads.namespaces_pod_security,
                        "label the namespace pod-security.kubernetes.io/enforce"),
        stack_policy("namespaces-default-deny", "Every namespace has a default-deny NetworkPolicy",
                     workloads.namespaces_default_deny,
                     "add a NetworkPolicy with podSelector {} and both policy types, then allow only "
                     "what is needed"),
        stack_policy("inference-services-survive-disruption", "Every InferenceService has a "
                     "PodDisruptionBudget and, outside dev, a replica in every zone at its floor",
                     workloads.isvc_disruption_and_zones,
                     "add a PodDisruptionBudget; raise the model's minimum replicas to the zones",
                     {"requireZoneFloor": BOOL}),
        resource_policy("helm-pinned", "Helm releases pinned to exact versions from allow-listed "
                        "repositories", supply.helm_pinned,
                        "pin the chart version in serving/charts.py", {"allowedRepositories": STRINGS}),
        resource_policy("images-pinned-own-registry", "Images pinned and pulled from the stack's own "
                        "registries", supply.images_pinned_and_own,
                        "pull through the region's registry and pin a tag or digest"),
        stack_policy("routes-behind-auth-and-limits", "Every route behind API-key or JWT auth and a "
                     "per-tenant rate limit (requests, and tokens where limited)",
                     gateway.routes_behind_auth_and_limits,
                     "target the route with a SecurityPolicy (apiKeyAuth or jwt) and a "
                     "BackendTrafficPolicy whose rules select the tenant; charge token limits "
                     "from a metadata key the route's llmRequestCosts writes"),
        stack_policy("request-logs-redacted", "Model servers log prompts only where a collector on "
                     "their cluster redacts every logs pipeline before it exports", request_logs_redacted,
                     "install the redacting collector (components/logs.py) on the cluster, or turn "
                     "request logging off (posture request_logs)", {"requireRedaction": BOOL}),
        resource_policy("providers-pinned", "Providers pinned to their account, project or subscription",
                        supply.providers_pinned,
                        "set allowedAccountIds / project / subscriptionId on the provider"),
    ]


__all__ = ["PACK_NAME", "policies"]
