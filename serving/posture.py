"""Environment postures: what differs between dev, staging and prod, one row each.

Every component reads its environment's row instead of branching on `prod`, and applies it the
same way on all three clouds. tests/test_posture.py walks every row through every cloud.

Why each row is what it is:
- dev is cheap and disposable: one NAT, no deletion protection, Google/AWS/Microsoft-managed keys,
  a public API endpoint limited to the stack's listed networks, no control-plane SLA, single
  controller replicas, short metrics retention; the model gateway on a public load balancer (API
  keys and TLS still required) so experiments need no VPN.
- staging rehearses prod's failure modes (a zone lost takes only its own NAT; controllers run two
  replicas so a drain does not stop scaling; secrets are encrypted with a customer key as in prod)
  but stays easy to tear down and reachable from the CI network.
- prod adds deletion protection, customer keys on registries and weights stores, a private API
  endpoint only, the paid control-plane tiers with an uptime SLA, and replication with a time
  commitment (S3 RTC, GCS turbo replication, GZRS on Azure).
- staging and prod put the model gateway on an internal load balancer: callers are services in
  the organisation's networks, and an endpoint the internet cannot reach cannot be abused even
  with a leaked key; staging does as prod so the path it rehearses is the same. dev's is public
  (API keys and TLS still required) so experiments need no VPN.
- request logs (prompts and outputs, serving/logpipeline.py): off in dev, where experiments send
  whatever their authors paste and nobody reviews tenants' use; on in staging, so the redacting
  pipeline prod depends on is exercised by the same traffic first; on in prod, where abuse and
  incident reviews need what a tenant asked and got. Every cluster runs the redacting collector
  either way (the model servers' own stdout is shipped too); only the prompts depend on the row.
- log retention (the collector's cloud log store): short in dev and staging (3 and 7 days, the
  metrics retention's horizon); 30 days in prod, the abuse-monitoring window hosted model APIs
  commonly state for prompts, and no longer, because even redacted prompts are tenant data.
  CloudWatch Logs accepts only listed day counts (1, 3, 5, 7, 14, 30, ...); each row is one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Environment(StrEnum):
    DEV = "dev"
    STAGING = "staging"
    PROD = "prod"


@dataclass(frozen=True)
class Posture:
    environment: Environment
    nat_per_zone: bool  # a NAT gateway in every zone (else one for the region)
    deletion_protection: bool  # clusters refuse deletion until it is switched off
    secrets_customer_key: bool  # Kubernetes secrets encrypted with a key the stack owns
    stores_customer_key: bool  # registries and weights stores encrypted with keys the stack owns
    private_api: bool  # the cluster API has a private endpoint only
    control_plane_sla: bool  # the paid control-plane tier with an uptime SLA (AKS Standard)
    controller_replicas: int  # replicas of cert-manager, KEDA, Prometheus, Alertmanager
    metrics_retention_days: int  # Prometheus retention
    replication_sla: bool  # replication with a time commitment (S3 RTC, GCS turbo, Azure GZRS)
    stable_channel: bool  # GKE STABLE release channel (else REGULAR)
    min_zones: int  # zones every region needs so one can be lost
    public_gateway: bool  # the model gateway's load balancer faces the internet (else internal)
    request_logs: bool  # model servers log prompts and outputs (through the redacting collector)
    log_retention_days: int  # how long the cloud log store keeps what the collector ships


POSTURES: dict[Environment, Posture] = {
    Environment.DEV: Posture(
        Environment.DEV, nat_per_zone=False, deletion_protection=False,
        secrets_customer_key=False, stores_customer_key=False, private_api=False,
        control_plane_sla=False, controller_replicas=1, metrics_retention_days=3,
        replication_sla=False, stable_channel=False, min_zones=1,
        public_gateway=True,
        request_logs=False, log_retention_days=3,
    ),
    Environment.STAGING: Posture(
        Environment.STAGING, nat_per_zone=True, deletion_protection=False,
        secrets_customer_key=True, stores_customer_key=False, private_api=False,
        control_plane_sla=True, controller_replicas=2, metrics_retention_days=7,
        replication_sla=False, stable_channel=False, min_zones=2,
        public_gateway=False,
        request_logs=True, log_retention_days=7,
    ),
    Environment.PROD: Posture(
        Environment.PROD, nat_per_zone=True, deletion_protection=True,
        secrets_customer_key=True, stores_customer_key=True, private_api=True,
        control_plane_sla=True, controller_replicas=2, metrics_retention_days=15,
        replication_sla=True, stable_channel=True, min_zones=2,
        public_gateway=False,
        request_logs=True, log_retention_days=30,
    ),
}


def posture(environment: str) -> Posture:
    return POSTURES[Environment(environment)]


__all__ = ["POSTURES", "Environment", "Posture", "posture"]
