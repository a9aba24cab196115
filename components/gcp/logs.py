"""Where a GKE cluster's redacting collector ships its logs: Cloud Logging, in a bucket of its own.

The googlecloud exporter (GoogleCloudPlatform/opentelemetry-operations-go exporter/collector,
config.go: `project`, `log.default_log_name`) writes entries under one log name per cluster with
Application Default Credentials; on GKE those come from Workload Identity, so the collector's
Kubernetes service account acts as one Google service account per cluster holding
`roles/logging.logWriter` on the project (the exporter README's role for logs; the role has no
narrower resource to grant on).

Retention per posture: a Cloud Logging bucket holds what a sink routes to it for its
`retention_days`; the cluster's log name is routed to its own bucket, and excluded from the
`_Default` sink (a project exclusion applies to `_Default`, Logging API `projects.exclusions`), so
the entries are not also kept for `_Default`'s 30 days.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from components.gcp.cluster import GcpCluster
from components.logsink import LogSink
from serving.logpipeline import SERVICE_ACCOUNT, log_name
from serving.netpol import LOGS
from serving.posture import Posture
from stacks.naming import gcp_account_id

LOG_WRITER = "roles/logging.logWriter"
LOCATION = "global"  # the bucket's region; `global` like _Default, so any cluster's region fits


def log_filter(project: str, cluster: str) -> str:
    """The entries the cluster's collector writes: its one log name (Logging query language)."""
    return f'logName="projects/{project}/logs/{log_name(cluster)}"'


def gcp_log_sink(name: str, cluster: GcpCluster, env: Posture, parent: pulumi.Resource) -> LogSink:
    child = pulumi.ResourceOptions(parent=parent, provider=cluster.cloud_provider)
    project, cluster_name = cluster.spec.project, cluster.cluster_name
    account = gcp.serviceaccount.Account(f"{name}-gsa", gcp.serviceaccount.AccountArgs(
        account_id=gcp_account_id(cluster_name, "logs"), project=project,
        display_name=f"log collector of {cluster_name}"), opts=child)
    writer = gcp.projects.IAMMember(f"{name}-writer", gcp.projects.IAMMemberArgs(
        project=project, role=LOG_WRITER, member=account.email.apply(lambda e: f"serviceAccount:{e}")),
        opts=child)
    # Only the collector's Kubernetes service account, on this cluster's pool, may act as it.
    federation = gcp.serviceaccount.IAMMember(f"{name}-wi", gcp.serviceaccount.IAMMemberArgs(
        service_account_id=account.name, role="roles/iam.workloadIdentityUser",
        member=f"serviceAccount:{cluster.workload_pool}[{LOGS}/{SERVICE_ACCOUNT}]"), opts=child)
    bucket_id = f"{cluster_name}-requests"
    bucket = gcp.logging.ProjectBucketConfig(f"{name}-bucket", gcp.logging.ProjectBucketConfigArgs(
        project=project, location=LOCATION, bucket_id=bucket_id, retention_days=env.log_retention_days,
        description=f"redacted request logs of {cluster_name}"), opts=child)
    entries = log_filter(project, cluster_name)
    # A sink into a bucket of its own project needs no writer grant.
    sink = gcp.logging.ProjectSink(f"{name}-sink", gcp.logging.ProjectSinkArgs(
        project=project, name=bucket_id, filter=entries, unique_writer_identity=True,
        destination=f"logging.googleapis.com/projects/{project}/locations/{LOCATION}/buckets/{bucket_id}"),
        opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[bucket])))
    excluded = gcp.logging.ProjectExclusion(f"{name}-not-default", gcp.logging.ProjectExclusionArgs(
        project=project, name=f"{cluster_name}-requests", filter=entries,
        description=f"{cluster_name}'s request logs live in bucket {bucket_id} only"), opts=child)
    return LogSink(location=project, annotations={"iam.gke.io/gcp-service-account": account.email},
                   after=(writer, federation, sink, excluded))


__all__ = ["LOG_WRITER", "gcp_log_sink", "log_filter"]
