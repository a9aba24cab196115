"""Secret config values a stack names (stacks/secrets.py) are checked with the spec, before the
program registers anything: unset or clear-text values exit 2 with the key path that names them."""

from __future__ import annotations

import copy
from pathlib import Path

import pulumi
import pytest
import yaml

from components.secrets import secret_state
from rtip import offline
from rtip.stackfile import load
from stacks.secrets import SecretState, named_secrets, secret_problems
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
