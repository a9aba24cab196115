"""Deploy-time checks over an offline record: what `pulumi up` would trip on that a plan does not.

Both read only the record (rtip/offline.py), so they run unchanged for any stack:
- kinds (kinds.py): every Kubernetes object is served on its cluster, by the cluster's Kubernetes
  version or by a CRD a Helm release it waits for installs;
- values (values.py): every Helm release's values name keys its pinned chart has, and pass the
  chart's values.schema.json;
- scheduling (scheduling.py, nodes.py): every pod the platform will run fits some pool;
- reach (reach.py): every Kubernetes provider's API is reachable from the stack's deployer and
  authorizes it before the provider's first call;
- images (images.py): every image is pinned and pullable by its cluster;
- capacity (capacity.py): every GPU pool has a node autoscaler that reaches its peak, AKS caches
  sit on assembled NVMe, Prometheus persists, one node-feature-discovery per cluster;
- alerts (alerts.py): Alertmanager keeps the chart's routes, every webhook URL file is in a
  mounted Secret of an Alertmanager that reads it, and every route matches alerts a rule of its
  cluster fires, and the gateway's absence page asks for the proxies' Deployment by the name Envoy
  Gateway will give it (proxy_name.py);
- autoscaling (query_series.py): the series each ScaledObject's query selects exist with the
  labels it selects them by (target labels a PodMonitor writes, kube-state-metrics' pod series);
- drain (drain.py): every predictor caps a response, its preStop drain waits out the longest at
  its tier's pace, and the node autoscaler waits as long.
"""

from __future__ import annotations

from rtip.deploycheck.alerts import check_alerts
from rtip.deploycheck.capacity import check_capacity
from rtip.deploycheck.drain import check_drain
from rtip.deploycheck.findings import Finding, Severity
from rtip.deploycheck.images import check_images
from rtip.deploycheck.kinds import check_kinds
from rtip.deploycheck.proxy_name import check_proxy_name
from rtip.deploycheck.query_series import check_query_series
from rtip.deploycheck.reach import check_reach
from rtip.deploycheck.scheduling import check_scheduling
from rtip.deploycheck.values import check_values
from rtip.offline import Record


def run_checks(record: Record) -> list[Finding]:
    """All findings, kinds first, each group in record order."""
    return [*check_kinds(record), *check_values(record), *check_scheduling(record),
            *check_reach(record), *check_images(record), *check_capacity(record),
            *check_alerts(record), *check_proxy_name(record), *check_query_series(record),
            *check_drain(record)]


__all__ = ["Finding", "Severity", "check_alerts", "check_capacity", "check_drain", "check_images",
           "check_kinds", "check_proxy_name", "check_query_series", "check_reach", "check_scheduling",
           "check_values", "run_checks"]
