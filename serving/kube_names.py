"""Names Kubernetes, KServe and kube-state-metrics give the objects and series the plan's rules
select, in one place for the rules that select them, the deploy check that asks the rules and
the simulator that writes them.

- KServe's Standard mode names an InferenceService's predictor Deployment `<isvc>-predictor`
  (v0.20.0 pkg/constants `PredictorServiceName`; `<isvc>-<spec.predictor.name>-predictor` when
  the predictor is named, which the plan never does).
- A ReplicaSet's pods are `<deployment>-<pod-template hash>-` plus 5 random characters of
  NAME_ALPHABET (apimachinery util/rand `alphanums`: no vowels); the hash is the decimal digits of
  a 32-bit FNV sum, each mapped into that alphabet (`rand.SafeEncodeString`: '0'-'9' become
  HASH_CHARS). The API server cuts a generated name's base to 58 characters first (apiserver
  pkg/storage/names generate.go), which rtip/deploycheck/pod_names.py generates.
- kube-state-metrics' pod family (v2.20.0 internal/store/pod.go), each series labelled namespace,
  pod and uid (kube-prometheus-stack keeps them: its ServiceMonitor honours the exporter's
  labels): the deletion timestamp (only for a pod that has one; Unix seconds), the creation time,
  the Ready condition (one series per status, `condition` "true", "false", "unknown", once a
  kubelet has set it: an unscheduled pod has none) and the phase (one series per phase, 1 for the
  pod's own).
- kube-state-metrics' `kube_deployment_spec_replicas{namespace, deployment}` (internal/store/
  deployment.go): a Deployment's desired replicas, for as long as the object exists.
- The well-known node label of a node's zone (ZONE_KEY), which every cloud's node controller sets
  and Prometheus's pod discovery can attach to a pod's target (`attachMetadata`).
"""

from __future__ import annotations

ZONE_KEY = "topology.kubernetes.io/zone"
POD_DELETION = "kube_pod_deletion_timestamp"
POD_CREATED = "kube_pod_created"
POD_READY = "kube_pod_status_ready"
POD_PHASE = "kube_pod_status_phase"
DEPLOYMENT_REPLICAS = "kube_deployment_spec_replicas"
KSM_POD_SERIES = (POD_DELETION, POD_CREATED, POD_READY, POD_PHASE)  # the exporter's, not the pod's own

NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
HASH_CHARS = "456789bcdf"
MAX_NAME = 63  # a generated object name, suffix included
SUFFIX = 5  # the random suffix of a generated name


def predictor_name(isvc: str) -> str:
    """The predictor Deployment KServe's Standard mode makes for InferenceService `isvc`."""
    return f"{isvc}-predictor"


__all__ = ["DEPLOYMENT_REPLICAS", "HASH_CHARS", "KSM_POD_SERIES", "MAX_NAME", "NAME_ALPHABET", "POD_CREATED",
           "POD_DELETION", "POD_PHASE", "POD_READY", "SUFFIX", "predictor_name"]
