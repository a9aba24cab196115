"""RequestLogs: one cluster's redacting log pipeline (serving/logpipeline.py), installed before any
model server may log a prompt.

Per cluster: the `rtip-logs` namespace (Pod Security `privileged`: the collector reads the node's
`/var/log/pods` through hostPath volumes, which `baseline` forbids; it runs with no capability and
no privilege escalation), its NetworkPolicies (serving/netpol.py: default deny, DNS, HTTPS to the
cloud's log service and the node's identity endpoint; nothing connects to it), the cloud's log
store and the collector's identity on it (components/<cloud>/logs.py, one row per cloud), and the
pinned opentelemetry-collector chart as a DaemonSet whose image comes from the region's registry.
Model servers log prompts only where the posture says so, and only after this release
(components/platform.py passes it to them as a dependency).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.addons_helm import helm_release, namespace
from components.aws.logs import aws_log_sink
from components.azure.logs import WORKSPACE_MIN_RETENTION_DAYS, azure_log_sink
from components.cluster import KubernetesCluster
from components.contract import RegionStore
from components.gcp.logs import gcp_log_sink
from components.logsink import LogSink
from serving import logpipeline
from serving.charts import image
from serving.hardware import Cloud
from serving.images import RegionalRegistry
from serving.netpol import LOGS
from serving.posture import Posture
from stacks.naming import MODELS_NAMESPACE

# hostPath volumes (the pod logs, the filelog checkpoints) are refused by `baseline`.
POD_SECURITY = "privileged"
AZURE_SECRET = "rtip-appinsights"
# One row per cloud: its log store and the collector's identity on it.
LOG_SINKS: dict[Cloud, Callable[..., LogSink]] = {
    Cloud.AWS: aws_log_sink,
    Cloud.GCP: gcp_log_sink,
    Cloud.AZURE: azure_log_sink,
}


class RequestLogs(pulumi.ComponentResource):
    """`store`: the region's registries, which serve the collector's image (by the digest `digests`
    pins, the stack's `registries.digests`)."""

    release: k8s.helm.v3.Release

    def __init__(self, name: str, cluster: KubernetesCluster, env: Posture,
                 opts: pulumi.ResourceOptions | None = None, *, store: RegionStore | None = None,
                 digests: Mapping[str, str] | None = None) -> None:
        facts = cluster.facts
        exporter = logpipeline.EXPORTERS[str(facts.cloud)]
        notes = []
        if facts.cloud is Cloud.AZURE and env.log_retention_days < WORKSPACE_MIN_RETENTION_DAYS:
            notes.append(f"request logs: the posture keeps {env.log_retention_days} days, a Log Analytics "
                         f"workspace at least {WORKSPACE_MIN_RETENTION_DAYS}")
        super().__init__("rtip:k8s:RequestLogs", name, {
            "cluster": facts.name,
            "namespace": LOGS,
            "exporter": exporter.component,
            "promptsLogged": env.request_logs,
            "retentionDays": env.log_retention_days,
            "notes": notes,
        }, opts)
        provider = facts.provider
        ns = namespace(f"{name}-ns", LOGS, POD_SECURITY, self, provider)
        sink = LOG_SINKS[facts.cloud](f"{name}-store", cluster, env, self)
        after: list[pulumi.Resource] = [ns, *sink.after]
        if sink.connection_string is not None:
            after.append(k8s.core.v1.Secret(
                f"{name}-connection", metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=AZURE_SECRET, namespace=LOGS, labels={"app.kubernetes.io/managed-by": "rtip"}),
                type="Opaque", string_data={logpipeline.AZURE_SECRET_KEY: sink.connection_string},
                opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[ns])))
        pins = dict(digests or {})
        what = f"log collector on {facts.name}"
        keys = list(sink.annotations)

        def values(args: list[Any]) -> dict[str, Any]:
            root, annotations = args[0], dict(zip(keys, args[1:], strict=True))
            ref = (RegionalRegistry(root, store.cloud, pins).ref(logpipeline.IMAGE_KEY, what)
                   if store is not None else image(logpipeline.IMAGE_KEY))
            return logpipeline.collector_values(
                str(facts.cloud), models_namespace=MODELS_NAMESPACE, cluster=facts.name,
                location=sink.location, image_ref=ref, service_account_annotations=annotations,
                azure_secret=AZURE_SECRET)

        root: pulumi.Input[str] = store.image_registry if store is not None else ""
        self.release = helm_release(
            f"{name}-collector", logpipeline.CHART, LOGS,
            pulumi.Output.all(root, *sink.annotations.values()).apply(values), self, provider, after)
        self.register_outputs({})


__all__ = ["AZURE_SECRET", "LOG_SINKS", "POD_SECURITY", "RequestLogs"]
