"""Shared fixtures: the offline record of every stack, run once per session."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import yaml
from hypothesis import settings

from rtip import offline
from rtip.offline import Record
from rtip.stackfile import PROJECT_DIR, load
from stacks.loader import load_spec
from stacks.plan import Plan
from stacks.schema import StackSpec

# Tests check behaviour, never wall-clock time: no per-example deadline (a loaded CI machine
# would otherwise fail a property test for being slow, not wrong).
settings.register_profile("rtip", deadline=None)
settings.load_profile("rtip")

# Upstream CRDs, traces and FACTS.md live in `shared/` beside the checkout (README, Tests).
SHARED = PROJECT_DIR.parent / "shared"

STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (PROJECT_DIR / "stacks").glob("Pulumi.*.yaml"))


def pytest_sessionstart(session: pytest.Session) -> None:
    # Tests on upstream data fail, never skip, without it: say why once, not in 13 assertions.
    if not (SHARED / "crds").is_dir() or not (SHARED / "traces").is_dir():
        pytest.exit(f"{SHARED} (upstream CRDs, traces, FACTS.md) is missing: the tests read the "
                    f"shared/ folder beside the checkout; clone rtip next to it", returncode=2)


@cache
def record_of(stack: str) -> Record:
    return offline.run(load(stack))


@cache
def spec_of(stack: str) -> StackSpec:
    config = load(stack)
    return load_spec(config.platform, config.source)


def plan_of(stack: str) -> Plan:
    """The plan the program built the stack's resources from (stacks.plan, read off the record)."""
    plan = record_of(stack).plan
    assert isinstance(plan, Plan)
    return plan


# A deployer inside every region's network with an identity on each cloud: what a stack whose
# APIs are private needs for `rtip plan`'s reach check (stacks/schema_deployer.py).
DEPLOYER_INSIDE = {
    "network": "inside",
    "aws": {"role_arn": "arn:aws:iam::123456789012:role/rtip-deployer"},
    "gcp": {"service_account": "rtip-deployer@rtip-test-project.iam.gserviceaccount.com"},
    "azure": {"object_id": "5b3c2a1d-9e8f-4a7b-8c6d-1e2f3a4b5c6d",
              "subscription_id": "00000000-0000-4000-8000-000000000000"},
}


def stack_doc(stack: str) -> dict:
    return yaml.safe_load((PROJECT_DIR / "stacks" / f"Pulumi.{stack}.yaml").read_text())


def only_regions(platform: dict, regions: list[dict]) -> dict:
    """`platform` cut to `regions` (entries of its own), each keeping its heartbeat webhook."""
    platform["regions"] = regions
    names = {r["region"] for r in regions}
    if "heartbeat_webhooks" in platform:
        beats = platform["heartbeat_webhooks"]
        platform["heartbeat_webhooks"] = {k: v for k, v in beats.items() if k in names}
    return platform


def add_region(platform: dict, region: dict, at: int | None = None) -> dict:
    """`platform` with `region` added (at index `at`, else last) and, where the stack names
    heartbeats (every region or none), a heartbeat secret of its own."""
    platform["regions"].insert(len(platform["regions"]) if at is None else at, region)
    if platform.get("heartbeat_webhooks"):
        platform["heartbeat_webhooks"][region["region"]] = f"heartbeat-{region['region']}"
    return platform


def write_stack(tmp_path: Path, platform: object, name: str = "t", extra: dict | None = None) -> Path:
    """A stack file anywhere on disk whose `rtip:platform` is `platform`, with a `secure:` value
    for every tenant key, alert webhook and heartbeat it names (the program reads them; `extra` may override
    any)."""
    path = tmp_path / f"Pulumi.{name}.yaml"
    tenants = platform.get("tenants", []) if isinstance(platform, dict) else []
    names = [t.get("api_key_secret") for t in tenants if isinstance(t, dict)]
    hooks = platform.get("alert_webhooks") if isinstance(platform, dict) else None
    names += list(hooks.values()) if isinstance(hooks, dict) else []
    beats = platform.get("heartbeat_webhooks") if isinstance(platform, dict) else None
    names += list(beats.values()) if isinstance(beats, dict) else []
    keys = {f"rtip:{n}": {"secure": "v1:test-placeholder"} for n in names if isinstance(n, str) and n}
    path.write_text(yaml.safe_dump({"config": {"rtip:platform": platform, **keys, **(extra or {})}}))
    return path


@pytest.fixture(params=STACKS)
def stack(request: pytest.FixtureRequest) -> str:
    return request.param
