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

Where the runtime holds a webhook's clear value (under the CLI, which decrypts the stack's config
before the program runs and hands it over with the names of the secret keys; offline the value is
ciphertext and cannot be read), the URL is checked against what Alertmanager's egress allows
(serving/netpol.py: TCP 443 to IPv4 addresses outside the region's network): an `https://` URL
with a host, on port 443, not an IPv6 literal, a loopback, unspecified, link-local or multicast
address, nor an address inside the network it would post from. Otherwise the policy drops the
post, and only the delivery alerts (or the heartbeat's silence) would tell. A host name is not
resolved (it resolves where Alertmanager runs): one that points inside the network passes here
and is dropped there. The message never repeats the URL: it is a secret.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from enum import Enum
from urllib.parse import urlsplit

from serving.netpol import WEBHOOK_PORT
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


def offline_placeholder(key: str) -> str:
    """What the offline engine hands the program for a `secure:` value it cannot decrypt
    (rtip/stackfile.py): the program must tell it from a clear value the CLI decrypted."""
    return f"[offline secret {key}]"


def webhook_url_problem(url: str, networks: list[ipaddress.IPv4Network]) -> str | None:
    """Why Alertmanager could not post to `url` from a cluster in `networks`, or None. Names no
    part of the value: any of it may be the secret itself (a value without `//` parses with its
    host or token as the scheme, `https://user:password` with the password as the port)."""
    text = url.strip()  # Alertmanager trims a url_file's whitespace too
    if not text.lower().startswith("https://"):
        shown = "an http:// URL" if text.lower().startswith("http://") else "no https:// URL"
        return (f"holds {shown}; webhook URLs must be https://: the alerts carry the cluster's "
                f"names and the egress rule opens port {WEBHOOK_PORT} only")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return "does not hold a URL Alertmanager can parse"
    if not parts.hostname:
        return "holds an https:// URL without a host"
    if port not in (None, WEBHOOK_PORT):  # not named: `https://user:password` parses as a port
        return (f"holds a URL on a port other than {WEBHOOK_PORT}; the network policy lets "
                f"Alertmanager reach port {WEBHOOK_PORT} only")
    try:
        address = ipaddress.ip_address(parts.hostname)
    except ValueError:
        return None  # a name: resolved where Alertmanager runs, which the plan cannot see
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # dialled over IPv4
    if address.version == 6:
        return "holds a URL whose host is an IPv6 address; the network policy opens IPv4 only"
    if address.is_loopback or address.is_unspecified or address.is_link_local or address.is_multicast:
        return ("holds a URL whose host is a loopback, unspecified, link-local or multicast "
                "address, which no webhook receiver outside the pod answers on")
    inside = [str(n) for n in networks if address in n]
    if inside:
        return (f"holds a URL whose host is an address inside the region's network {inside[0]}; "
                f"the webhook egress rule opens port {WEBHOOK_PORT} outside that network only")
    return None


def webhook_problems(spec: StackSpec, reveal: Callable[[str], str | None]) -> list[Problem]:
    """One problem per webhook URL the runtime can read (`reveal` gives the clear value, or None)
    that Alertmanager's egress would drop. The SLO webhooks are posted to from every region's
    cluster, a heartbeat from its own region's."""
    networks = {r.region: r.network.cidr for r in spec.regions}
    named = [(f"alert_webhooks.{severity}", name, list(networks.values()))
             for severity, name in spec.alert_webhooks.items()]
    named += [(f"heartbeat_webhooks.{region}", name, [networks[region]] if region in networks else [])
              for region, name in spec.heartbeat_webhooks.items()]
    problems: list[Problem] = []
    for path, name, nets in named:
        key = f"{CONFIG_NAMESPACE}:{name}"
        url = reveal(key)
        why = webhook_url_problem(url, nets) if url is not None else None
        if why is not None:
            problems.append(Problem(path, f"config value {key!r} {why}"))
    return problems


__all__ = ["SecretState", "named_secrets", "offline_placeholder", "secret_problems", "webhook_problems",
           "webhook_url_problem"]
