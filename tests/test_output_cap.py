"""The cap on one response and the scale-in drain it sets (serving/drain.py, stacks/model_plan.py):
vLLM stops every chat and completion response at the cap, and a predictor being scaled in waits
long enough for a response that long at its tier's pace, within the cluster autoscaler's wait."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable

import pytest

from rtip import report
from rtip.deploycheck import Severity, run_checks
from rtip.deploycheck.drain import _karpenter_duration_s, check_drain
from rtip.deploycheck.graph import cluster_of
from rtip.offline import Record, Resource
from serving import drain
from serving.simulator import EngineConfig, FleetConfig, SimConfig, StepTime, Targets, Trace, simulate
from stacks.loader import load_spec
from stacks.plan import plan_stack
from stacks.schema import ModelSpec
from tests.conftest import plan_of, record_of, stack_doc

# The tiers' targets (MLPerf's, FACTS.md section 7): TTFT and TPOT in seconds.
TIER_TARGETS = {"interactive": (0.5, 0.030), "standard": (2.0, 0.100), "batch": (6.0, 0.175)}
# By hand: 600 s (the cluster autoscaler's --max-graceful-termination-sec default) less the hook's
# 5 s settle and 8 s margin, less the TTFT, over the TPOT: 586.5 / 0.03, 585 / 0.1, 581 / 0.175.
DEFAULT_CAPS = {"interactive": 19_550, "standard": 5_850, "batch": 3_320}
CA_WAIT_S = 600


def test_the_stack_schema_states_the_default_caps_of_the_built_in_tiers() -> None:
    description = ModelSpec.model_fields["max_output_tokens"].description or ""
    for tier, cap in DEFAULT_CAPS.items():
        assert f"{cap:,} at {'the built-in ' if tier == 'interactive' else ''}{tier}" in description
        assert drain.output_cap(*TIER_TARGETS[tier]) == cap


def test_each_prod_model_gets_its_tiers_cap_within_its_context() -> None:
    plan = plan_of("prod")
    assert {mp.tier for mp in plan.models} == set(DEFAULT_CAPS)
    for mp in plan.models:
        assert mp.max_output_tokens == min(DEFAULT_CAPS[mp.tier], mp.max_model_len), mp.model


@pytest.mark.parametrize(("ttft_s", "tpot_s"), [*TIER_TARGETS.values(), (0.25, 0.007), (3.0, 0.33)])
def test_the_default_cap_is_the_longest_response_whose_drain_fits(ttft_s: float, tpot_s: float) -> None:
    cap = drain.output_cap(ttft_s, tpot_s)
    assert drain.grace_s(ttft_s, tpot_s, cap) <= CA_WAIT_S < drain.grace_s(ttft_s, tpot_s, cap + 1)


def _settle_and_bound_s(script: str) -> tuple[float, float]:
    """An emitted preStop script's settle (the picker may still route to the pod meanwhile) and
    the bound it then waits."""
    return (float(script.split("time.sleep(")[1].split(")")[0]),
            float(script.split("time.monotonic() + ")[1].split("\n")[0]))


def test_every_predictor_caps_its_responses_and_waits_for_the_longest() -> None:
    """The rendered InferenceServices: vLLM's generation-config override carries the cap, and the
    hook waits for a response of that many tokens at the tier's pace, within 600 s."""
    services = [r.inputs for r in record_of("prod").resources if r.inputs.get("kind") == "InferenceService"]
    assert services
    for svc in services:
        predictor = svc["spec"]["predictor"]
        args = predictor["model"]["args"]
        (override,) = [a.split("=", 1)[1] for a in args if a.startswith("--override-generation-config=")]
        cap = json.loads(override)["max_new_tokens"]
        (context,) = [int(a.split("=", 1)[1]) for a in args if a.startswith("--max-model-len=")]
        tier = predictor["annotations"]["rtip.dev/tier"]
        assert cap == min(DEFAULT_CAPS[tier], context)
        ttft_s, tpot_s = TIER_TARGETS[tier]
        script = predictor["model"]["lifecycle"]["preStop"]["exec"]["command"][2]
        settle, bound = _settle_and_bound_s(script)
        # A request routed at the end of the settle has the bound to finish in.
        assert bound >= ttft_s + cap * tpot_s
        # The hook ends 8 s before the grace period does (its last poll's timeout and a pause).
        assert settle + bound + 8 <= predictor["terminationGracePeriodSeconds"] <= CA_WAIT_S


def test_a_stated_cap_shortens_the_drain() -> None:
    """A stack that states a short cap gets the drain that cap needs, not the 600 s ceiling."""
    platform = stack_doc("dev")["config"]["rtip:platform"]
    platform["models"][0]["max_output_tokens"] = 1000
    name = platform["models"][0]["name"]
    mp = next(m for m in plan_stack(load_spec(platform, "test")).models if m.model == name)
    ttft_s, tpot_s = TIER_TARGETS[mp.tier]
    assert mp.max_output_tokens == 1000
    # By hand for the batch tier: 5 + 6 + 1,000 x 0.175 + 8 = 194 s.
    assert mp.grace_s == 194 == round(5 + ttft_s + 1000 * tpot_s + 8)


# A hand profile: one sequence's decode step takes 12 ms + 0.4 ms.
STEP = StepTime(0.03, 0.0001, 0.012, 0.0004)


def _alone(cap: int | None) -> float:
    """The time from first to last token of a 50-token response alone on a replica."""
    cfg = SimConfig(engine=EngineConfig(step=STEP, kv_blocks=2_000, max_output_tokens=cap),
                    fleet=FleetConfig(zones=("a",), initial_replicas=1), targets=Targets(1.0, 0.1))
    res = simulate(Trace([0.0], [100], [50]), cfg)
    return float(res.e2e_s[0] - res.ttft_s[0])


def test_the_simulated_engine_stops_a_response_at_the_cap() -> None:
    assert _alone(None) == pytest.approx(49 * 0.0124)
    assert _alone(5) == pytest.approx(4 * 0.0124)
    with pytest.raises(ValueError, match="max_output_tokens"):
        EngineConfig(step=STEP, kv_blocks=10, max_output_tokens=0)


# --- the deploy check (rtip/deploycheck/drain.py) over copies of prod's record ----------------------

def _svc(record: Record, cloud: str) -> Resource:
    """Prod's first InferenceService on a cluster of `cloud`."""
    return next(r for r in record.resources if r.inputs.get("kind") == "InferenceService"
                and (c := cluster_of(record, r)) is not None and c.type.split(":")[1] == cloud)


def _with(record: Record, edited: Resource) -> Record:
    return Record(record.stack, [edited if r.urn == edited.urn else r for r in record.resources],
                  record.outputs, record.warnings, record.plan)


def _edited(target: Resource, change: Callable[[dict], None]) -> Resource:
    inputs = copy.deepcopy(target.inputs)
    change(inputs)
    return dataclasses.replace(target, inputs=inputs)


def _drain_errors(record: Record, urn: str) -> list[str]:
    return [f.message for f in run_checks(record) if f.check == "drain" and f.urn == urn]


def test_the_shipped_stacks_drain_every_predictor() -> None:
    for stack in ("dev", "staging", "prod"):
        assert check_drain(record_of(stack)) == [], stack


def test_a_predictor_without_the_cap_is_found() -> None:
    record = record_of("prod")
    svc = _svc(record, "aws")

    def uncap(inputs: dict) -> None:
        model = inputs["spec"]["predictor"]["model"]
        model["args"] = [a for a in model["args"] if not a.startswith("--override-generation-config=")]

    (message,) = _drain_errors(_with(record, _edited(svc, uncap)), svc.urn)
    assert "no `max_new_tokens`" in message and "served context" in message


@pytest.mark.parametrize("override", ['{"max_new_tokens": 600', '["max_new_tokens", 600]',
                                      '{"max_new_tokens": "six hundred"}', '{"temperature": 0}'])
def test_a_cap_the_check_cannot_read_is_no_cap(override: str) -> None:
    """An override that is no JSON, no object, a cap that is no number or no cap at all gives
    the check nothing it can vouch for: the predictor is reported as uncapped, not passed."""
    record = record_of("prod")
    svc = _svc(record, "gcp")

    def garble(inputs: dict) -> None:
        model = inputs["spec"]["predictor"]["model"]
        model["args"] = [a if not a.startswith("--override-generation-config=")
                         else f"--override-generation-config={override}" for a in model["args"]]

    (message,) = _drain_errors(_with(record, _edited(svc, garble)), svc.urn)
    assert "no `max_new_tokens`" in message


@pytest.mark.parametrize(("tokens", "cut"), [(5850, False), (5851, True), (5880, True)])
def test_a_hook_shorter_than_the_longest_response_is_found(tokens: int, cut: bool) -> None:
    """A standard-tier predictor's hook waits 587 s after its 5 s settle (600 s grace less the
    8 s margin less the settle). 5,850 tokens take 2 + 585 = 587 s: drained; 5,851 take 587.1 s
    and 5,880 take 590 s: cut."""
    record = record_of("prod")
    svc = next(r for r in record.resources if r.inputs.get("kind") == "InferenceService"
               and r.inputs["spec"]["predictor"]["annotations"]["rtip.dev/tier"] == "standard")

    def set_cap(inputs: dict) -> None:
        model = inputs["spec"]["predictor"]["model"]
        model["args"] = [a if not a.startswith("--override-generation-config=")
                         else f'--override-generation-config={{"max_new_tokens": {tokens}}}'
                         for a in model["args"]]

    errors = _drain_errors(_with(record, _edited(svc, set_cap)), svc.urn)
    if not cut:
        assert errors == []
        return
    (message,) = errors
    assert f"a {tokens}-token response at the standard tier's pace takes {2 + tokens * 0.1:.1f} s" in message
    assert "after its settle its preStop drain waits 587 s" in message and "cut at a scale-in" in message


def test_every_aks_cluster_states_the_autoscaler_wait_the_drain_fits() -> None:
    """The drain is sized to the cluster autoscaler's wait for an evicted pod, which AKS
    documents as 600 s by default (`max-graceful-termination-sec`, "Use the cluster autoscaler
    in AKS"): the plan states it, so a changed default cannot shorten it, and the drain check
    reads the stated value and passes every Azure predictor."""
    record = record_of("prod")
    clusters = [r for r in record.resources if r.type == "azure-native:containerservice:ManagedCluster"]
    assert clusters
    for aks in clusters:
        assert aks.inputs["autoScalerProfile"]["maxGracefulTerminationSec"] == "600"
    svc = _svc(record, "azure")
    assert svc.inputs["spec"]["predictor"]["terminationGracePeriodSeconds"] <= 600
    assert _drain_errors(record, svc.urn) == []


def test_a_node_autoscaler_that_waits_less_than_the_grace_period_is_found() -> None:
    record = record_of("prod")
    # AKS: an autoscaler profile that waits 300 s, below the predictors' 600 s grace.
    svc = _svc(record, "azure")
    cluster = cluster_of(record, svc)
    assert cluster is not None
    aks = next(c for c in record.children(cluster.urn)
               if c.type == "azure-native:containerservice:ManagedCluster")
    profiled = _with(record, _edited(aks, lambda i: i.setdefault("autoScalerProfile", {}).update(
        {"maxGracefulTerminationSec": "300"})))
    (message,) = _drain_errors(profiled, svc.urn)
    assert "600 s grace period is longer than the 300 s the node autoscaler waits" in message
    assert "maxGracefulTerminationSec" in message
    # A value that is no number is not read: the wait is not checked, and the check says why.
    garbled = _with(record, _edited(aks, lambda i: i.setdefault("autoScalerProfile", {}).update(
        {"maxGracefulTerminationSec": "ten minutes"})))
    (message,) = _drain_errors(garbled, svc.urn)
    assert "the node autoscaler's wait was not checked" in message
    assert "maxGracefulTerminationSec 'ten minutes' is no number" in message
    # GKE: the cluster autoscaler's 600 s, which a 601 s grace period passes.
    svc = _svc(record, "gcp")
    assert _drain_errors(record, svc.urn) == []
    longer = _with(record, _edited(svc, lambda i: i["spec"]["predictor"].update(
        {"terminationGracePeriodSeconds": 601})))
    (message,) = _drain_errors(longer, svc.urn)
    assert ("601 s grace period is longer than the 600 s the node autoscaler waits "
            "(gke-cluster-autoscaler's default)") in message
    # EKS: the Karpenter NodePool of the predictor's own pool force-deletes pods after 5 minutes;
    # the same on another pool's NodePool is no concern of this predictor.
    svc = _svc(record, "aws")
    cluster = cluster_of(record, svc)
    assert cluster is not None
    own = svc.inputs["spec"]["predictor"]["nodeSelector"]["rtip.dev/pool"]
    pools = {n.inputs["spec"]["template"]["metadata"]["labels"]["rtip.dev/pool"]: n
             for n in record.by_type("kubernetes:karpenter.sh/v1:NodePool")
             if (c := cluster_of(record, n)) is not None and c.urn == cluster.urn}
    other = next(p for name, p in pools.items() if name != own)

    def five_minutes(inputs: dict) -> None:
        inputs["spec"]["template"]["spec"]["terminationGracePeriod"] = "5m"

    assert _drain_errors(_with(record, _edited(other, five_minutes)), svc.urn) == []
    (message,) = _drain_errors(_with(record, _edited(pools[own], five_minutes)), svc.urn)
    assert "longer than the 300 s the node autoscaler waits (Karpenter NodePool" in message
    # A duration the NodePool CRD would refuse is not read: a warning, not a guess.
    def unreadable(inputs: dict) -> None:
        inputs["spec"]["template"]["spec"]["terminationGracePeriod"] = "1.5h"

    (message,) = _drain_errors(_with(record, _edited(pools[own], unreadable)), svc.urn)
    assert "the node autoscaler's wait was not checked" in message and "'1.5h' is no duration" in message


@pytest.mark.parametrize(("grace", "cut"), [(600, False), (599, True), (None, True)])
def test_a_grace_period_shorter_than_the_drain_is_found(grace: int | None, cut: bool) -> None:
    """A standard-tier predictor's hook settles 5 s and waits 587 s; with the hook's 8 s margin it
    needs 600 s. 599 s, or none (Kubernetes' default 30 s), stops vLLM mid-drain."""
    record = record_of("prod")
    svc = next(r for r in record.resources if r.inputs.get("kind") == "InferenceService"
               and r.inputs["spec"]["predictor"]["annotations"]["rtip.dev/tier"] == "standard")

    def set_grace(inputs: dict) -> None:
        predictor = inputs["spec"]["predictor"]
        predictor.pop("terminationGracePeriodSeconds")
        if grace is not None:
            predictor["terminationGracePeriodSeconds"] = grace

    errors = _drain_errors(_with(record, _edited(svc, set_grace)), svc.urn)
    if not cut:
        assert errors == []
        return
    (message,) = errors
    given = "Kubernetes' default 30 s" if grace is None else f"{grace} s"
    assert f"its grace period ({given}) ends before its preStop drain (592 s" in message


def test_a_tier_the_plan_does_not_have_is_a_warning() -> None:
    record = record_of("prod")
    svc = _svc(record, "aws")
    edited = _edited(svc, lambda i: i["spec"]["predictor"]["annotations"].update({"rtip.dev/tier": "gold"}))
    found = [f for f in run_checks(_with(record, edited)) if f.check == "drain" and f.urn == svc.urn]
    assert [f.severity for f in found] == [Severity.WARNING] and "'gold'" in found[0].message


@pytest.mark.parametrize(("text", "seconds"), [("48h", 172800.0), ("1h30m", 5400.0), ("90s", 90.0),
                                               ("1.5h", None), ("500ms", None), ("", None), ("5 m", None),
                                               ("10", None)])
def test_karpenter_durations_read_as_the_nodepool_crd_admits_them(text: str, seconds: float | None) -> None:
    """Only what the CRD's pattern admits (karpenter-crd 1.14.1: ^([0-9]+(s|m|h))+$)."""
    assert _karpenter_duration_s(text) == seconds


def test_rtip_plan_shows_each_models_cap_and_drain_as_emitted() -> None:
    """`rtip plan --json`'s max_output_tokens and drain_grace_s are what the model's
    InferenceService in that region carries."""
    plan, record = plan_of("prod"), record_of("prod")
    doc = report.document(plan, record)
    emitted = {}
    for r in record.resources:
        if r.inputs.get("kind") == "InferenceService" and (c := cluster_of(record, r)) is not None:
            predictor = r.inputs["spec"]["predictor"]
            (arg,) = [a for a in predictor["model"]["args"] if a.startswith("--override-generation-config=")]
            cap = json.loads(arg.split("=", 1)[1])["max_new_tokens"]
            emitted[c.name, r.inputs["metadata"]["name"]] = (cap, predictor["terminationGracePeriodSeconds"])
    clusters = {region.region.region: region.cluster for region in plan.regions}
    rows = {(clusters[m["region"]], m["name"]): (m["max_output_tokens"], m["drain_grace_s"])
            for m in doc["models"]}
    assert rows == emitted and len(rows) == len(plan.models)
