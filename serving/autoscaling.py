"""KEDA autoscaling parameters per model, derived from its profile, tier and replica bounds.

Baselines (FACTS.md sections 6 and 7): KEDA polls every 30 s and cools down 300 s; the HPA
scales up by max(4 pods, 100%) per 15 s and stabilises scale-down over 300 s; the vLLM
production-stack tutorial scales on `vllm:num_requests_waiting` at threshold 5 with 15 s polling.
KServe's own KEDA path drops pollingInterval, fallback and behavior (FACTS.md section 6), so the
body here is for a ScaledObject the toolkit owns, targeting Deployment `<isvc>-predictor`
(`serving.kserve.io/autoscalerClass: external`).

The trigger: waiting requests, summed over the model's pods (the query must return one series)
and compared per replica (KEDA's default AverageValue metric type for the prometheus scaler).
The threshold is the queue a replica can hold while queueing uses half of the tier's TTFT slack:
- slack = p99 TTFT target - prefill of a p99 prompt (capacity.replica_capacity's model);
- a replica frees a batch slot every S / batch seconds (S = one request's service time), so a
  request behind W waiting ones waits about (W + 1) x S / batch;
- W = slack / 2 x batch / S - 1, at least 1. The other half of the slack absorbs the polling
  interval and the HPA's reaction while the new replicas start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from serving.capacity import RegionReplicas, ReplicaCapacity, prompt_factor
from serving.profiles import Profile
from serving.tiers import TierSpec

METRIC = "vllm:num_requests_waiting"
POLLING_INTERVAL_S = 15  # vLLM production-stack tutorial; the ServiceMonitor must scrape as often
COOLDOWN_S = 300  # KEDA default; only applies to scaling to zero, which min >= zones rules out
FALLBACK_FAILURES = 3  # failed metric reads before KEDA holds the fallback replica count
HPA_PERIOD_S = 15  # HPA sync period
HPA_MIN_STEP_PODS = 4  # the HPA default scale-up step, kept as a floor
SCALE_DOWN_STABILIZATION_S = 300  # HPA default, raised to one cold start below


@dataclass(frozen=True)
class Autoscaling:
    model: str
    query: str
    threshold: int  # waiting requests per replica
    polling_interval_s: int
    cooldown_s: int
    min_replicas: int
    max_replicas: int
    fallback_replicas: int
    behavior: dict[str, object] = field(hash=False)
    rationale: str = ""

    def scaled_object_spec(self, deployment: str, server_address: str) -> dict[str, object]:
        """The `spec` of a keda.sh/v1alpha1 ScaledObject for the predictor Deployment."""
        return {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "pollingInterval": self.polling_interval_s,
            "cooldownPeriod": self.cooldown_s,
            "minReplicaCount": self.min_replicas,
            "maxReplicaCount": self.max_replicas,
            "fallback": {"failureThreshold": FALLBACK_FAILURES, "replicas": self.fallback_replicas},
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": self.behavior}},
            "triggers": [{
                "type": "prometheus",
                "metadata": {
                    "serverAddress": server_address,
                    "query": self.query,
                    "threshold": str(self.threshold),
                    "activationThreshold": "0",
                },
            }],
        }


def waiting_threshold(capacity: ReplicaCapacity, prof: Profile, tier: TierSpec,
                      input_tokens: int, output_tokens: int) -> int:
    """Waiting requests per replica at which queueing has used half of the TTFT slack."""
    p99_prompt = prompt_factor(tier.percentile) * input_tokens
    slack_s = tier.ttft_ms / 1000 - prof.prefill_s(p99_prompt)
    service_s = prof.prefill_s(input_tokens) + output_tokens * capacity.tpot_tail_s
    return max(1, math.floor(slack_s / 2 * capacity.batch / service_s) - 1)


def behavior(replicas: RegionReplicas, cold_start_s: float) -> dict[str, object]:
    """HPA v2 behavior: scale up at once and in steps of the whole lag headroom; scale down no
    faster than a replica can come back (one cold start), one replica per zone a minute, so the
    zone spread survives every step."""
    step = max(HPA_MIN_STEP_PODS, math.ceil(replicas.max_replicas * replicas.headroom))
    return {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Percent", "value": 100, "periodSeconds": HPA_PERIOD_S},
                {"type": "Pods", "value": step, "periodSeconds": HPA_PERIOD_S},
            ],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": max(SCALE_DOWN_STABILIZATION_S, math.ceil(cold_start_s)),
            "selectPolicy": "Min",
            "policies": [{"type": "Pods", "value": max(1, replicas.zones), "periodSeconds": 60}],
        },
    }


def autoscaling(
    model: str,
    served_name: str,
    namespace: str,
    capacity: ReplicaCapacity,
    prof: Profile,
    tier: TierSpec,
    replicas: RegionReplicas,
    cold_start_s: float,
    input_tokens: int,
    output_tokens: int,
) -> Autoscaling:
    """Autoscaling of one model in one region. `served_name` is vLLM's --served-model-name,
    which its metrics carry as the `model_name` label."""
    threshold = waiting_threshold(capacity, prof, tier, input_tokens, output_tokens)
    query = f'sum({METRIC}{{namespace="{namespace}",model_name="{served_name}"}})'
    return Autoscaling(
        model=model,
        query=query,
        threshold=threshold,
        polling_interval_s=POLLING_INTERVAL_S,
        cooldown_s=COOLDOWN_S,
        min_replicas=replicas.min_replicas,
        max_replicas=replicas.max_replicas,
        # Without the metric the safe guess is peak: the SLO costs more than the idle GPUs.
        fallback_replicas=replicas.max_replicas,
        behavior=behavior(replicas, cold_start_s),
        rationale=(f"threshold {threshold} waiting/replica keeps queueing within half the "
                   f"{tier.ttft_ms:.0f} ms TTFT slack at batch {capacity.batch} "
                   f"(baseline: 5, vLLM production-stack)"),
    )


__all__ = ["METRIC", "POLLING_INTERVAL_S", "Autoscaling", "autoscaling", "behavior",
           "waiting_threshold"]
