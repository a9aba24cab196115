"""IAM: no wildcard action or resource, trust policies scoped to the account and cluster, no
broad AWS-managed policies on node roles."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from fnmatch import fnmatch

from policies.rules.base import Config, Props, get, of_types

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
POLICY = "aws:iam/policy:Policy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
# Services that assume roles on behalf of any account unless the trust names the source.
CONFUSED_DEPUTY_SERVICES = {"pods.eks.amazonaws.com", "s3.amazonaws.com"}
SCOPE_KEYS = {"aws:SourceAccount", "aws:SourceArn"}
# Actions the Service Authorization Reference lists with no resource type, so `Resource: "*"` is
# their only form whatever the environment: iam:ListInstanceProfiles ("Actions defined by AWS
# Identity and Access Management"; Karpenter's controller lists its instance profiles with it).
# Exact names, never patterns.
NO_RESOURCE_TYPE = frozenset({"iam:ListInstanceProfiles"})


def _statements(doc: object) -> list[Mapping]:
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except ValueError:
            return []
    statements = get(doc, "Statement", default=[])
    # The analyzer hands rules read-only Mapping/Sequence proxies, not dicts and lists.
    return [statements] if isinstance(statements, Mapping) else list(statements)


def _as_list(value: object) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])  # type: ignore[call-overload]


@of_types({ROLE_POLICY, POLICY})
def iam_no_wildcards(type_: str, props: Props, config: Config) -> Iterator[str]:
    # Actions AWS cannot scope to a resource (Describe*, pricing): `Resource: "*"` is their only form.
    unscoped = list(config.get("unscopedActions", []))
    for s in _statements(props.get("policy")):
        if s.get("Effect") != "Allow":
            continue
        actions = _as_list(s.get("Action"))
        for action in actions:
            if action == "*" or action.endswith(":*"):
                yield f"statement {s.get('Sid', '?')} allows every action ({action})"
        if "*" in _as_list(s.get("Resource")) and not all(
                a in NO_RESOURCE_TYPE or any(fnmatch(a, pattern) for pattern in unscoped)
                for a in actions):
            yield f"statement {s.get('Sid', '?')} applies to every resource (Resource: *)"


@of_types({ROLE})
def trust_scoped(type_: str, props: Props, config: Config) -> Iterator[str]:
    for s in _statements(props.get("assumeRolePolicy")):
        services = set(_as_list(get(s, "Principal", "Service", default=[])))
        conditions = {k for block in get(s, "Condition", default={}).values() for k in block}
        for service in sorted(services & CONFUSED_DEPUTY_SERVICES):
            if not conditions & SCOPE_KEYS:
                yield (f"the role trusts {service} without aws:SourceAccount or aws:SourceArn, so any "
                       "account's use of that service could assume it")
        if get(s, "Principal", "AWS") == "*" or s.get("Principal") == "*":
            yield "the role trusts every AWS principal"


@of_types({ATTACHMENT})
def no_broad_managed_policies(type_: str, props: Props, config: Config) -> Iterator[str]:
    arn = str(props.get("policyArn", ""))
    for forbidden in config.get("forbiddenManagedPolicies", []):
        if arn.endswith(f":policy/{forbidden}"):
            yield f"{forbidden} is attached to a role; grant its narrower equivalent where it is needed"


__all__ = ["NO_RESOURCE_TYPE", "iam_no_wildcards", "no_broad_managed_policies", "trust_scoped"]
