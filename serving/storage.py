"""Persistent volumes the serving stack asks each cloud for: storage class and size.

Prometheus holds the autoscaling signal (KEDA's queries read it), so it keeps its TSDB on a
PersistentVolumeClaim, never on an emptyDir that a restart or a rescheduled pod wipes.
"""

from __future__ import annotations

import math

from serving.hardware import Cloud

# The block-storage class each cloud's clusters offer for ReadWriteOnce volumes:
# EKS `gp3` (the EBS CSI driver's class the cluster module installs), GKE `standard-rwo`
# (the Persistent Disk CSI driver's balanced class GKE preinstalls), AKS `managed-csi`
# (the Azure Disk CSI driver's StandardSSD class AKS preinstalls).
BLOCK_STORAGE_CLASS: dict[Cloud, str] = {
    Cloud.AWS: "gp3",
    Cloud.GCP: "standard-rwo",
    Cloud.AZURE: "managed-csi",
}

# Prometheus' sizing rule (prometheus.io/docs/prometheus/latest/storage, "Operational aspects"):
# needed_disk_space = retention_time_seconds * ingested_samples_per_second * bytes_per_sample,
# with 1-2 bytes per sample after compression; the upper figure is taken.
BYTES_PER_SAMPLE = 2
# Samples per second one cluster's Prometheus ingests: node, kube-state and DCGM exporters plus
# the model servers, at their scrape intervals. An estimate, not a measurement: recheck against
# `rate(prometheus_tsdb_head_samples_appended_total[1h])` once a cluster runs.
INGESTED_SAMPLES_PER_S = 20_000
# Room for the write-ahead log, the head block and compaction, which briefly needs a second copy
# of the blocks it merges.
HEADROOM = 1.5
MIN_PROMETHEUS_GIB = 20


def prometheus_volume_gib(retention_days: int, samples_per_s: int = INGESTED_SAMPLES_PER_S) -> int:
    """The PVC size (GiB) that holds `retention_days` of samples with headroom."""
    tsdb_bytes = retention_days * 86_400 * samples_per_s * BYTES_PER_SAMPLE
    return max(MIN_PROMETHEUS_GIB, math.ceil(tsdb_bytes * HEADROOM / 2**30))


__all__ = ["BLOCK_STORAGE_CLASS", "BYTES_PER_SAMPLE", "HEADROOM", "INGESTED_SAMPLES_PER_S",
           "MIN_PROMETHEUS_GIB", "prometheus_volume_gib"]
