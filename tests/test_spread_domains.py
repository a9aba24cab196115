"""The zone spread's domains: kube-scheduler counts a zone only while a node the pods select is
there (podtopologyspread filtering.go `calPreFilterState` builds its counts off existing nodes),
while the node autoscaler launches into every zone its pools name."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from pathlib import Path

from serving.simulator import ColdStartSpec, EngineConfig, Failover, FleetConfig, StepTime
from serving.simulator.fleet import DRAINING, Fleet
from stacks.model_plan import ModelRegionPlan
from stacks.simulation import deployment, zones_kept
from tests.conftest import plan_of, record_of

STEP = StepTime(0.02, 0.0001, 0.015, 0.0004)
COLD = ColdStartSpec(full_s=700.0, warm_s=200.0, node_ready_s=400.0)
ROOT = Path(__file__).resolve().parents[1]
ISVC = "kubernetes:serving.kserve.io/v1beta1:InferenceService"


def _fleet(every_zone_a_domain: bool, failover: Failover | None = None) -> Fleet:
    """Zones a, b, c on three-slot nodes, one node a zone; two replicas: a and b hold one each,
    c's node none."""
    cfg = FleetConfig(zones=("a", "b", "c"), initial_replicas=2, slots_per_node=3, cold_start=COLD,
                      initial_nodes=3, node_empty_ttl_s=100.0, every_zone_a_domain=every_zone_a_domain,
                      failover=failover or Failover())
    return Fleet(cfg, EngineConfig(step=STEP, kv_blocks=100), lambda t, kind, obj: None)


def _consolidate_c(fleet: Fleet) -> None:
    (node,) = [n for n in fleet.nodes if n.zone == "c"]
    assert not node.replicas
    node.empty_since = 0.0
    fleet.node_gc(node, 100.0)
    assert node.gone_s == 100.0


def _per_zone(fleet: Fleet) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for r in fleet.active():
        counts[r.zone] += 1
    return dict(counts)


def test_a_zone_whose_node_is_gone_is_no_domain_until_the_node_autoscaler_launches_there() -> None:
    """With c's empty node still up, c holds the fewest (0) and the third replica takes its free
    slot, a warm start (200 s). Once it is consolidated, the scheduler's domains are a and b:
    the third replica takes a's free slot (1 + 1 - 1 <= maxSkew 1), the fourth b's, the fifth
    a's again (2 + 1 - 2 = 1), all warm: 3/2/0, where a spread over three zones holds at most
    ceil(5 / 3) = 2 a zone, so losing a leaves 2 survivors, not 3. The sixth takes b's last slot;
    the seventh finds none in a domain and waits for the node autoscaler, which counts c too
    (Karpenter takes a spread's zones from its NodePools) and launches there: a full cold start
    (700 s)."""
    kept = _fleet(every_zone_a_domain=False)
    third = kept.place(150.0)
    assert (third.zone, third.ready_s, kept.narrowed) == ("c", 350.0, 0)

    fleet = _fleet(every_zone_a_domain=False)
    _consolidate_c(fleet)
    placed = [fleet.place(t) for t in (150.0, 160.0, 170.0)]
    assert [(r.zone, r.ready_s) for r in placed] == [("a", 350.0), ("b", 360.0), ("a", 370.0)]
    assert _per_zone(fleet) == {"a": 3, "b": 2}
    placed = [fleet.place(t) for t in (180.0, 190.0)]
    assert [(r.zone, r.ready_s) for r in placed] == [("b", 380.0), ("c", 890.0)]
    assert fleet.narrowed == 5  # every one placed while c held no node


def test_where_other_models_keep_every_zone_a_domain_the_third_replica_goes_to_c() -> None:
    """The same fleet with c's node gone but other models' nodes of the pool in c: c is a domain
    holding none of these pods, so the third replica must go there, on a node launched for it."""
    fleet = _fleet(every_zone_a_domain=True)
    _consolidate_c(fleet)
    third = fleet.place(150.0)
    assert (third.zone, third.ready_s) == ("c", 850.0)
    assert _per_zone(fleet) == {"a": 1, "b": 1, "c": 1}
    assert fleet.narrowed == 1  # c held no node of this fleet, though other models keep it a domain


def test_a_pending_replica_binds_where_the_domains_allow_it() -> None:
    """c's node consolidated, zone a lost, and no node launched while a is down (Karpenter): b
    is the only domain. Two replicas fill b's free slots; a third finds none in a domain, and the
    node autoscaler launches nothing, so it waits Pending. When one of b's is stopped, the
    scheduler binds the Pending one to that slot (among the domains, b alone). Were c a domain
    too, it would hold the fewest (0) and no slot, and the Pending replica would stay."""
    fleet = _fleet(every_zone_a_domain=False, failover=Failover(new_nodes_while_down=False))
    _consolidate_c(fleet)
    fleet.fail_zone("a", 110.0)
    filled = [fleet.place(t) for t in (120.0, 130.0)]
    assert [r.zone for r in filled] == ["b", "b"]
    pending = fleet.place(140.0)
    assert not pending.scheduled and fleet.unscheduled == 1
    filled[0].state = DRAINING  # scaled in; its drain limit comes at 150 s
    fleet.stop_draining(filled[0], 150.0)
    assert pending.scheduled and pending.zone == "b" and pending.placed_s == 150.0
    assert fleet.narrowed == 3  # each placed while c held no node


def test_zones_kept_where_another_models_floor_holds_a_pod_a_zone_on_the_same_nodes() -> None:
    """Read off the emitted InferenceServices of prod: a model's zones stay domains where another
    predictor in its cluster selects the very same nodes (equal nodeSelector) with minReplicas at
    least the pool's zones."""
    plan, record = plan_of("prod"), record_of("prod")
    by_cluster: dict[str, list[tuple[str, dict[str, str], int]]] = defaultdict(list)
    for isvc in record.by_type(ISVC):
        predictor = isvc.inputs["spec"]["predictor"]
        by_cluster[isvc.provider].append((isvc.inputs["metadata"]["name"], predictor["nodeSelector"],
                                          predictor["minReplicas"]))
    seen = {}
    for mp in plan.models:
        zones = len(plan.region(mp.region).pool(mp.pool).zones)
        (cluster,) = [c for c in by_cluster if c.endswith(f"-{mp.region}-k8s")]
        (mine,) = [sel for name, sel, _ in by_cluster[cluster] if name == mp.model]
        expected = any(name != mp.model and sel == mine and floor >= zones
                       for name, sel, floor in by_cluster[cluster])
        assert zones_kept(plan, mp) is expected, (mp.model, mp.region)
        assert deployment(plan, mp).fleet.every_zone_a_domain is expected  # what the simulator runs
        seen[(mp.model, mp.region)] = expected
    # The benchmarks' region: the VL model shares the MIG pool with the 8B (floor 11); the 70B
    # has its H100 pool to itself.
    assert seen[("qwen-vl", "us-east-1")] and not seen[("llama-70b", "us-east-1")]


def test_no_run_of_the_prod_plan_placed_a_replica_while_a_zone_had_no_node() -> None:
    """The README's claim that the spread's domains moved no figure: every policy's run in the
    committed results of each draw (all zones up) counts no replica placed while a zone held no
    node of the model."""
    results = ROOT / "benchmarks" / "results"
    for name, runs in (("autoscaling", 64), ("autoscaling_conv_seed1", 32), ("autoscaling_conv_seed2", 32),
                       ("autoscaling_code_seed1", 32)):
        rows = json.loads((results / f"{name}.json").read_text())["rows"]
        assert [r["narrowed_placements"] for r in rows] == [0] * runs, name


def test_on_gke_a_model_of_another_mig_profile_keeps_no_zone() -> None:
    """GKE labels each node with its MIG partition size and the predictor selects it
    (serving/deployments.py `node_selector`), so in us-central1 the VL model's zones are kept by the
    3B on the same pool only while both run the same profile (2g.20gb in prod); given the 3B a
    3g.40gb slice, its nodes are others, and nothing keeps the VL model's zones."""
    plan = plan_of("prod")
    vl = next(m for m in plan.models if (m.model, m.region) == ("qwen-vl", "us-central1"))
    assert zones_kept(plan, vl)
    def other_profile(m: ModelRegionPlan) -> ModelRegionPlan:
        if (m.model, m.region) != ("llama-3b", "us-central1"):
            return m
        return dataclasses.replace(m, slice=dataclasses.replace(m.slice, mig_profile="3g.40gb"))

    regions = tuple(dataclasses.replace(r, models=tuple(map(other_profile, r.models))) for r in plan.regions)
    assert not zones_kept(dataclasses.replace(plan, regions=regions), vl)
