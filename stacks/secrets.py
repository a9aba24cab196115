"""The secret config values a stack names, checked before anything is planned or registered.

A stack names secrets by config key: each tenant's `api_key_secret`, each `alert_webhooks`
severity, each region's `heartbeat_webhooks`, each registry login's `username` and `token`. The
program reads them with `pulumi.Config().require_secret`, which fails only where it is called:
inside the Platform component, after that component and whatever came before it were registered,
with Pulumi's own message and no key path. So the names are checked with the spec instead:

- a name the stack does not set is refused, with the command that sets it;
- a name set as a plain value is refused too: `require_secret` would accept it and mark the
  Output secret, but the stack file (in git) would hold the API key or webhook URL in clear
  text. `pulumi config set --secret` writes a `secure:` value instead.

The Pulumi program (`__main__.py`) asks the SDK's runtime config (components/secrets.py), under
the CLI and offline alike. Offline, the stack file loader (rtip/stackfile.py) already refuses a
clear-text value of this project that Pulumi.yaml does not declare.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from enum import Enum

from stacks.checks_base import Problem
from stacks.schema import CONFIG_NAMESPACE, StackSpec


class SecretState(Enum):
    SECRET = "secret"
    PLAIN = "plain"
    MISSING = "missing"


def named_secrets(spec: StackSpec) -> Iterator[tuple[str, str]]:
    """(key path under rtip:platform, config key name) of every secret the stack names."""
    for i, tenant in enumerate(spec.tenants):
        yield f"tenants[{i}].api_key_secret", tenant.api_key_secret
    for severity, name in spec.alert_webhooks.items():
        yield f"alert_webhooks.{severity}", name
    for region, name in spec.heartbeat_webhooks.items():
        yield f"heartbeat_webhooks.{region}", name
    for host, login in spec.registries.upstream_credentials.items():
        yield f"registries.upstream_credentials.{host}.username", login.username
        yield f"registries.upstream_credentials.{host}.token", login.token


def secret_problems(spec: StackSpec, state: Callable[[str], SecretState]) -> list[Problem]:
    """One problem per named secret that is unset or set in clear text; `state` takes the full
    config key (`rtip:<name>`)."""
    problems: list[Problem] = []
    for path, name in named_secrets(spec):
        key = f"{CONFIG_NAMESPACE}:{name}"
        found = state(key)
        if found is SecretState.MISSING:
            problems.append(Problem(path, f"names config value {key!r}, which the stack does not "
                                    f"set; run `pulumi config set --secret {name} <value>`"))
        elif found is SecretState.PLAIN:
            problems.append(Problem(path, f"names config value {key!r}, which the stack holds in "
                                    f"clear text; set it with `pulumi config set --secret {name} "
                                    "<value>` so the stack file holds it encrypted"))
    return problems


__all__ = ["SecretState", "named_secrets", "secret_problems"]
