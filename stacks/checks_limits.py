"""Values against their limits, checked before the planner runs, so a stack that cannot work says
which value is over which limit instead of the planner guessing a cause:

- `tensor_parallel` against the GPUs of one node of every pool the model may use in each region
  it runs in (its pinned pool, or every GPU pool of the region);
- the token mix (`tokens.input_tokens + tokens.output_tokens`) against the model's context, or
  against `max_model_len` when the stack caps it;
- `max_output_tokens` against the token mix's mean output (the sizing assumes responses that
  long) and against the drain: a response that long at the tier's TPOT must finish within the
  grace period the node autoscalers of its clouds honour (serving/drain.py, nodescaling.py);
- the models a region serves against the front door's 15 routes per cluster.
"""

from __future__ import annotations

from collections.abc import Iterator

from serving import drain
from serving.hardware import Cloud, machine
from serving.models import CATALOG
from stacks.checks_base import Problem
from stacks.schema import ModelSpec, StackSpec
from stacks.tiers import resolve_tiers, tier_of

# The front door routes a cluster's models through one AIGatewayRoute, one rule each, and its
# CRD caps `spec.rules` at 15 (ai-gateway-crds-helm v1.1.0, aigatewayroutes v1beta1 maxItems).
MAX_MODELS_PER_CLUSTER = 15


def check_limits(spec: StackSpec) -> Iterator[Problem]:
    for i, model in enumerate(spec.models):
        yield from _tensor_parallel(f"models[{i}]", spec, model)
        yield from _token_mix(f"models[{i}]", model)
        yield from _output_cap(f"models[{i}]", spec, model)
    yield from _models_per_cluster(spec)


def _models_per_cluster(spec: StackSpec) -> Iterator[Problem]:
    for j, region in enumerate(spec.regions):
        here = [m.name for m in spec.models if m.regions is None or region.region in m.regions]
        if len(here) > MAX_MODELS_PER_CLUSTER:
            yield Problem(f"regions[{j}]", f"{region.region} serves {len(here)} models, but its front "
                          f"door routes at most {MAX_MODELS_PER_CLUSTER} (one AIGatewayRoute rule each); "
                          f"list some models' `regions` elsewhere or split the stack")


def _tensor_parallel(at: str, spec: StackSpec, model: ModelSpec) -> Iterator[Problem]:
    tp = model.tensor_parallel
    if tp is None or tp == 1:
        return
    for region in spec.regions:
        if model.regions is not None and region.region not in model.regions:
            continue
        cloud = Cloud(region.cloud)
        pools = [p for p in region.gpu_pools if model.pool is None or p.name == model.pool]
        shapes = [(p.name, machine(cloud, p.machine_type)) for p in pools]
        known = [(name, s) for name, s in shapes if s is not None]
        if not known or len(known) < len(shapes):
            continue  # no pool, or an unknown machine type: reported at its own path
        if all(s.gpu_count < tp for _, s in known):
            have = ", ".join(f"{name} has {s.gpu_count} ({s.name})" for name, s in known)
            which = f"its pool {model.pool!r}" if model.pool else "any pool"
            yield Problem(f"{at}.tensor_parallel", f"{tp} GPUs per replica must sit on one node, "
                          f"but no node of {which} in {region.region} has {tp} GPUs: {have}; lower "
                          f"tensor_parallel or use a machine type with {tp} GPUs")


def _token_mix(at: str, model: ModelSpec) -> Iterator[Problem]:
    card = CATALOG.get(model.catalog)
    if card is None:
        return  # an unknown catalog entry is reported at models[i].catalog
    t = model.tokens
    total = t.input_tokens + t.output_tokens
    mix = f"{t.input_tokens} prompt + {t.output_tokens} output = {total} tokens per request"
    if model.max_model_len is not None:
        if total > model.max_model_len:
            yield Problem(f"{at}.max_model_len", f"{model.max_model_len} tokens is less than the "
                          f"token mix ({mix}); raise max_model_len or lower tokens")
    elif total > card.context_max:
        yield Problem(f"{at}.tokens", f"{mix} is more than {card.id}'s context of "
                      f"{card.context_max} tokens; lower input_tokens or output_tokens")


def _output_cap(at: str, spec: StackSpec, model: ModelSpec) -> Iterator[Problem]:
    """The cap stated, or the tier's default (drain.output_cap), against the token mix's mean
    output; a stated one against the drain limit too (drain.NODE_DRAIN_LIMIT_S). On EKS nothing
    cuts a longer drain (Karpenter waits for the pod's own grace period), but the plan's other
    clocks assume none is longer: the replicas-overdue window, a rollout's pace, the zone-loss
    window. So the limit holds on every cloud."""
    tier = resolve_tiers(spec).get(tier_of(spec, model))
    if tier is None:
        return  # an unknown tier is reported at models[i].tier
    cap = model.max_output_tokens
    mean = model.tokens.output_tokens
    limit = drain.NODE_DRAIN_LIMIT_S
    if cap is None:
        fits = drain.output_cap(tier.ttft_s, tier.tpot_s)
        if fits < mean:
            yield Problem(f"{at}.tier", f"the {tier.tier} tier ({tier.ttft_ms:g} ms TTFT, "
                          f"{tier.tpot_ms:g} ms per token) lets a response of at most {max(fits, 0)} "
                          f"tokens drain within {limit:g} s (the cluster autoscaler's wait on GKE and "
                          f"AKS, held on every cloud), below the token mix's mean output of {mean}; "
                          "use a faster tier or lower tokens.output_tokens")
        return
    if cap < mean:
        yield Problem(f"{at}.max_output_tokens", f"{cap} tokens is below the token mix's mean output "
                      f"of {mean}, which the sizing assumes; raise max_output_tokens or lower "
                      "tokens.output_tokens")
    grace = drain.grace_s(tier.ttft_s, tier.tpot_s, cap)
    if grace > limit:
        yield Problem(f"{at}.max_output_tokens", f"a response of {cap} tokens at the {tier.tier} "
                      f"tier's {tier.tpot_ms:g} ms per token needs a {grace} s drain when its replica "
                      f"is scaled in, past the {limit:g} s a drain may take (the cluster autoscaler's "
                      f"wait on GKE and AKS, held on every cloud); at most "
                      f"{drain.output_cap(tier.ttft_s, tier.tpot_s, limit)} tokens")


__all__ = ["check_limits"]
