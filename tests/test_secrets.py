"""Secret config values a stack names (stacks/secrets.py) are checked with the spec, before the
program registers anything: unset or clear-text values exit 2 with the key path that names them."""

from __future__ import annotations

import copy
import ipaddress
from dataclasses import replace
from pathlib import Path

import pulumi
import pytest
import yaml

from components.secrets import secret_state, secret_value
from rtip import offline
from rtip.stackfile import load
from stacks.secrets import SecretState, named_secrets, secret_problems, webhook_problems, webhook_url_problem
from tests.conftest import spec_of, stack_doc, write_stack
from tests.test_bad_input import plan_fails

LOGIN = {"docker.io": {"username": "hubUser", "token": "hubToken"}}


def _platform(stack: str, **over: object) -> dict:
    platform = copy.deepcopy(stack_doc(stack)["config"]["rtip:platform"])
    platform.update(over)
    return platform


def _stack_file(tmp_path: Path, platform: dict, drop: tuple[str, ...] = (),
                plain: dict[str, str] | None = None) -> Path:
    """write_stack gives every tenant key and webhook a `secure:` value; `drop` removes some,
    `plain` sets some in clear text."""
    path = write_stack(tmp_path, platform)
    doc = yaml.safe_load(path.read_text())
    for name in drop:
        del doc["config"][f"rtip:{name}"]
    for name, value in (plain or {}).items():
        doc["config"][f"rtip:{name}"] = value
    path.write_text(yaml.safe_dump(doc))
    return path


def test_every_secret_a_shipped_stack_names_is_found_by_hand() -> None:
    """prod's file names two tenant keys, two SLO webhooks and four heartbeats, and holds a
    `secure:` value for each: the file's secure keys are exactly the names found."""
    doc = stack_doc("prod")
    platform = doc["config"]["rtip:platform"]
    by_hand = [(f"tenants[{i}].api_key_secret", t["api_key_secret"])
               for i, t in enumerate(platform["tenants"])]
    by_hand += [(f"alert_webhooks.{k}", v) for k, v in platform["alert_webhooks"].items()]
    by_hand += [(f"heartbeat_webhooks.{k}", v) for k, v in platform["heartbeat_webhooks"].items()]
    found = sorted(named_secrets(spec_of("prod")))
    assert found == sorted(by_hand) and len(found) == 8
    secure = {k.removeprefix("rtip:") for k, v in doc["config"].items()
              if isinstance(v, dict) and "secure" in v}
    assert secure == {name for _, name in found}


def test_states_give_one_problem_per_unset_or_clear_text_name() -> None:
    spec = spec_of("prod")
    states = {"rtip:searchApiKey": SecretState.MISSING, "rtip:sloPageWebhook": SecretState.PLAIN}
    found = secret_problems(spec, lambda key: states.get(key, SecretState.SECRET))
    assert [(p.path, "does not set" in p.message, "clear text" in p.message) for p in found] == [
        ("tenants[0].api_key_secret", True, False), ("alert_webhooks.page", False, True)]
    assert secret_problems(spec, lambda key: SecretState.SECRET) == []


def test_a_tenant_key_the_stack_does_not_set_exits_2_before_planning(tmp_path: Path, capsys) -> None:
    path = _stack_file(tmp_path, _platform("dev"), drop=("mlTeamApiKey",))
    err = plan_fails(capsys, path)  # exit 2, nothing printed to stdout
    assert (f"{path}: rtip:platform.tenants[0].api_key_secret: names config value 'rtip:mlTeamApiKey', "
            "which the stack does not set; run `pulumi config set --secret mlTeamApiKey <value>`") in err
    # Pulumi's own message (from require_secret inside the Platform component) never comes.
    assert "Missing required configuration" not in err


def test_a_missing_secret_and_a_spec_problem_come_in_one_run(tmp_path: Path, capsys) -> None:
    """A stack that names a region twice and drops a tenant key hears of both at once, rather
    than fixing one and rerunning to hear of the other."""
    platform = _platform("dev")
    platform["regions"] = [platform["regions"][0], copy.deepcopy(platform["regions"][0])]
    path = _stack_file(tmp_path, platform, drop=("mlTeamApiKey",))
    err = plan_fails(capsys, path)
    assert f"{path}: rtip:platform.regions[1].region: " in err and "appears more than once" in err
    assert (f"{path}: rtip:platform.tenants[0].api_key_secret: names config value 'rtip:mlTeamApiKey', "
            "which the stack does not set") in err


def test_the_runtime_tells_secret_from_clear_text_as_the_cli_hands_it_over() -> None:
    """components.secrets reads the SDK's runtime config, which the CLI (and rtip/offline.py)
    fill with the stack's values and the keys that were `secure:`."""
    saved = (dict(pulumi.runtime.config.CONFIG.get()), set(pulumi.runtime.config._SECRET_KEYS.get()))
    try:
        pulumi.runtime.set_all_config({"rtip:hook": "https://h.example.com/x", "rtip:key": "k"},
                                      ["rtip:key"])
        assert [secret_state(k) for k in ("rtip:hook", "rtip:key", "rtip:gone")] == [
            SecretState.PLAIN, SecretState.SECRET, SecretState.MISSING]
    finally:
        pulumi.runtime.set_all_config(saved[0], sorted(saved[1]))


def test_a_webhook_url_in_clear_text_never_reaches_the_program(tmp_path: Path, capsys) -> None:
    """Offline, the stack file loader refuses it first (an undeclared key of the project that is
    not `secure:`); the program's own check is for the CLI's other ways in."""
    platform = _platform("dev", alert_webhooks={"ticket": "ticketHook"})
    path = _stack_file(tmp_path, platform, plain={"ticketHook": "https://hooks.example.com/t0ken"})
    err = plan_fails(capsys, path)
    assert f"{path}: config.rtip:ticketHook: unknown key" in err and "`secure:` value" in err


def test_a_registry_login_is_checked_too(tmp_path: Path) -> None:
    platform = _platform("dev")
    platform["registries"] = {**platform.get("registries", {}), "upstream_credentials": LOGIN}
    path = _stack_file(tmp_path, platform)
    with pytest.raises(offline.ProgramRejected) as rejected:
        offline.run(load(str(path)))
    message = str(rejected.value)
    for field, name in (("username", "hubUser"), ("token", "hubToken")):
        assert (f"rtip:platform.registries.upstream_credentials.docker.io.{field}: names config value "
                f"'rtip:{name}', which the stack does not set") in message
    # Both set as secrets, the same stack plans.
    doc = yaml.safe_load(path.read_text())
    doc["config"].update({"rtip:hubUser": {"secure": "v1:u"}, "rtip:hubToken": {"secure": "v1:t"}})
    path.write_text(yaml.safe_dump(doc))
    assert offline.run(load(str(path))).plan.spec.registries.upstream_credentials


def _as_the_cli_hands_it(path: Path, clear: dict[str, str]):
    """The stack's config as `pulumi preview` hands it to the program: every secret decrypted to
    its clear value (`clear` by name, others a valid URL or key) and listed as a secret key."""
    config = load(str(path))
    values = dict(config.values)
    for key in config.secret_keys:
        values[key] = clear.get(key.removeprefix("rtip:"), "https://hooks.example.com/ok")
    return replace(config, values=values)


def test_under_the_cli_a_webhook_alertmanager_cannot_reach_is_refused_without_echoing_it(
        tmp_path: Path) -> None:
    platform = _platform("dev", alert_webhooks={"page": "pageHook", "ticket": "ticketHook"})
    path = _stack_file(tmp_path, platform)
    cli = _as_the_cli_hands_it(path, {"pageHook": "http://hooks.example.com/t0kenA",
                                      "ticketHook": "https://hooks.example.com:8443/t0kenB"})
    with pytest.raises(offline.ProgramRejected) as rejected:
        offline.run(cli)
    message = str(rejected.value)
    assert ("rtip:platform.alert_webhooks.page: config value 'rtip:pageHook' holds an http:// URL; "
            "webhook URLs must be https://") in message
    assert ("rtip:platform.alert_webhooks.ticket: config value 'rtip:ticketHook' holds a URL on a port "
            "other than 443; the network policy lets Alertmanager reach port 443 only") in message
    assert "t0ken" not in message and "hooks.example.com" not in message
    for value in ("hooks.example.com:8443/s3cretpath", "t0k3n:s3cretpart@host/x", "mytok3n:abcdef",
                  "https://admin:54321"):
        why = webhook_url_problem(value, [])
        assert why is not None and not any(part in why for part in ("hooks", "s3cret", "t0k3n", "mytok3n",
                                                                    "admin", "54321"))
    # The same values encrypted, as offline: nothing to read, nothing refused (the shipped stacks
    # plan with ciphertext), and secret_value tells the two apart.
    assert secret_value_of(load(str(path)).for_engine(), "rtip:pageHook") is None
    assert secret_value_of(cli.for_engine(), "rtip:pageHook") == "http://hooks.example.com/t0kenA"


def secret_value_of(config: dict[str, str], key: str) -> str | None:
    saved = (dict(pulumi.runtime.config.CONFIG.get()), set(pulumi.runtime.config._SECRET_KEYS.get()))
    try:
        pulumi.runtime.set_all_config(config, [key])
        return secret_value(key)
    finally:
        pulumi.runtime.set_all_config(saved[0], sorted(saved[1]))


def test_a_heartbeat_is_checked_against_its_own_regions_network() -> None:
    """prod's us-east-1 network is 10.20.0.0/16 and us-west-2's 10.21.0.0/16 (the stack file): a
    heartbeat posted from us-east-1 to 10.21.x leaves its network, to 10.20.x does not; an SLO
    webhook is posted from every region, so 10.21.x is inside one of them."""
    spec = spec_of("prod")
    clear = {"rtip:heartbeatUsEast1": "https://10.21.0.9/beat", "rtip:heartbeatUsWest2": "https://10.21.0.9/b",
             "rtip:sloTicketWebhook": "https://10.21.0.9/t", "rtip:sloPageWebhook": "https://[2001:db8::5]/p"}
    found = {p.path: p.message for p in webhook_problems(spec, clear.get)}
    assert set(found) == {"heartbeat_webhooks.us-west-2", "alert_webhooks.ticket", "alert_webhooks.page"}
    assert "inside the region's network 10.21.0.0/16" in found["heartbeat_webhooks.us-west-2"]
    assert "inside the region's network 10.21.0.0/16" in found["alert_webhooks.ticket"]
    assert "IPv6" in found["alert_webhooks.page"]
    assert webhook_problems(spec, {"rtip:heartbeatUsEast1": "https://10.22.0.1/x"}.get) == []
    assert webhook_problems(spec, lambda key: None) == []  # ciphertext: nothing to read


@pytest.mark.parametrize(("url", "why"), [
    ("https://hooks.example.com/x", None),
    ("https://hooks.example.com:443/x", None),
    ("hooks.example.com/x", "no https:// URL"),
    ("https:///x", "without a host"),
    ("https://hooks.example.com:99999/x", "can parse"),
    ("https://hooks.example.com:80/x", "a port other than 443"),
    ("https://224.0.0.1/x", "multicast"),
    ("http://hooks.example.com/x", "an http:// URL"),
    ("https://127.0.0.1/x", "loopback"),
    ("https://169.254.169.254/latest", "link-local"),
    ("https://0.0.0.0/x", "unspecified"),
    ("https://[::ffff:203.0.113.5]/x", None),  # IPv4-mapped: dialled over IPv4, outside the network
    ("https://[::ffff:10.20.0.7]/x", "inside the region's network 10.20.0.0/16"),
])
def test_webhook_urls_by_hand(url: str, why: str | None) -> None:
    got = webhook_url_problem(url, [ipaddress.ip_network("10.20.0.0/16")])
    assert (got is None) if why is None else (got is not None and why in got)
