"""Where an AKS cluster's redacting collector ships its logs: Application Insights on Log Analytics.

The contrib distribution's Azure log exporter is `azuremonitor` (exporter/azuremonitorexporter),
which writes to Application Insights and authenticates with the resource's connection string
only: its AUTHENTICATION.md says Entra ID is not supported directly (only through a separate
auth-proxy sidecar), so no workload identity is bound. The connection string (instrumentation key
and ingestion endpoint) is an ingestion credential, not a read credential; it travels as a Pulumi
secret into a Kubernetes Secret in the collector's namespace only. The component is
workspace-based (`ingestion_mode: LogAnalytics`), so the entries are stored in a Log Analytics
workspace of the cluster's own resource group.

Retention: a Log Analytics workspace on the pay-as-you-go SKU keeps data 30 to 730 days (Azure
Monitor docs, "Manage data retention in a Log Analytics workspace"), so a posture asking for less
gets the 30-day minimum, and the component says so in its notes.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import applicationinsights, operationalinsights

from components.azure.cluster import AzureCluster
from components.logsink import LogSink
from serving.posture import Posture

WORKSPACE_MIN_RETENTION_DAYS = 30
WORKSPACE_SKU = "PerGB2018"  # pay-as-you-go, the SKU new workspaces get


def workspace_retention_days(env: Posture) -> int:
    return max(WORKSPACE_MIN_RETENTION_DAYS, env.log_retention_days)


def azure_log_sink(name: str, cluster: AzureCluster, env: Posture, parent: pulumi.Resource) -> LogSink:
    child = pulumi.ResourceOptions(parent=parent, provider=cluster.cloud_provider)
    group, location = cluster.group.name, cluster.region.name
    workspace = operationalinsights.Workspace(
        f"{name}-workspace", resource_group_name=group, workspace_name=f"{cluster.cluster_name}-logs",
        location=location, sku=operationalinsights.WorkspaceSkuArgs(name=WORKSPACE_SKU),
        retention_in_days=workspace_retention_days(env), tags=cluster.tags, opts=child)
    # Keyword arguments: ComponentArgs names the component `resource_name`, which collides with the
    # resource's own first parameter (components/azure/identity.py).
    insights = applicationinsights.Component(
        f"{name}-insights", resource_group_name=group, resource_name_=f"{cluster.cluster_name}-requests",
        location=location, kind="other", application_type="other", ingestion_mode="LogAnalytics",
        workspace_resource_id=workspace.id, tags=cluster.tags, opts=child)
    return LogSink(location="", connection_string=pulumi.Output.secret(insights.connection_string),
                   after=(insights,))


__all__ = ["WORKSPACE_MIN_RETENTION_DAYS", "azure_log_sink", "workspace_retention_days"]
