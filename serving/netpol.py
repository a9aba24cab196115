"""NetworkPolicies (networking.k8s.io/v1) for every namespace the toolkit creates: deny all
ingress and egress by default, then admit only the connections each component really makes.

The flows are one table (`FLOWS`, `EXTERNAL`): an in-cluster flow opens both ends (egress in the
source namespace, ingress in the destination), so a connection is never half allowed. Where a
port and labels come from is named beside each row (chart templates at the pinned versions,
serving/charts.py).

Peers outside the pod network are ipBlocks, because nothing else can name them:
- the Kubernetes API server: TCP 443 to the region's network CIDR (the stack's
  `regions[].network.cidr`, the VPC/VNet). EKS reaches the `kubernetes` Service through the
  control plane's ENIs in the cluster's subnets (endpoint private access is always on); a private
  GKE cluster's endpoint (Private Service Connect) takes an address from the node subnet; a private
  AKS cluster's private endpoint sits in the VNet. Only a public AKS API has an address outside
  the network, unknown before apply: there the rule opens TCP 443 to any address.
- object stores (S3, GCS, Blob) publish no fixed addresses, so weight downloads may use HTTPS
  to any address outside the region's network; nothing inside the network (nodes, the API's
  private endpoint, EKS pods, which take VPC addresses) is reachable that way.
- the API server's admission calls come from different places on every cloud (EKS: control-plane
  ENIs; GKE and AKS: konnectivity agents in kube-system) and Cilium (GKE Dataplane V2, AKS) does
  not match pods or nodes by ipBlock, so a webhook port is open to any source, as the charts' own
  policies do (cert-manager `webhook.networkPolicy`, KEDA `templates/webhooks/networkpolicy.yaml`).
  It serves only TLS admission reviews.
- kubelets and node-exporter listen on the nodes' addresses (node-exporter is hostNetwork), which
  Cilium matches by ipBlock only with `policy-cidr-match-mode: nodes`: their ports are open to
  any destination for the monitoring namespace alone.
NetworkPolicy does not apply to hostNetwork pods at all (node-exporter); kubelet probes come from
the pod's own node, which the enforcing engines admit.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import Any

from serving._model_pod import MODEL_LABEL, VLLM_PORT
from serving.hardware import Cloud
from serving.nodeprep import NODE_PREP_NAME

NS_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace (1.22+)
KUBE_SYSTEM = "kube-system"
# The namespaces as the components name them (components/addons*.py, components/namespaces.py,
# components/addons_cache.py, stacks/naming.py); tests/test_netpol.py keeps them equal.
CERT_MANAGER = "cert-manager"
KSERVE = "kserve"
KEDA = "keda"
MONITORING = "monitoring"
NVIDIA = "gpu-operator"
AMD = "kube-amd-gpu"
NODE_PREP = "rtip-node-prep"
DOWNLOAD_JOBS = "kserve-localmodel-jobs"
MODELS = "rtip-models"
SYSTEM = "rtip-system"
# The redacting request-log collector (components/logs.py): reads pod logs from the node's disk,
# so nothing connects to it; it sends to its cloud's log service and nowhere else.
LOGS = "rtip-logs"
# Where the request gateway (DESIGN.md: auth, tenant limits, endpoint picker) will run: the one
# namespace, besides monitoring, that may open connections to the model servers.
GATEWAY_NAMESPACE = SYSTEM

# kube-prometheus-stack's Prometheus port (components/models.py PROMETHEUS_PORT, the KEDA
# trigger's serverAddress).
PROMETHEUS_PORT = 9090
DENY_ALL = "rtip-default-deny"
ANYWHERE = "0.0.0.0/0"


@dataclass(frozen=True)
class Port:
    port: int
    protocol: str = "TCP"


def tcp(*ports: int) -> tuple[Port, ...]:
    return tuple(Port(p) for p in ports)


DNS = (Port(53, "UDP"), Port(53, "TCP"))


@dataclass(frozen=True)
class Pods:
    """Pods of one namespace: those carrying `labels` (all of them when empty); `exists` are
    label keys they must carry, whatever the value."""

    namespace: str
    labels: tuple[tuple[str, str], ...] = ()
    exists: tuple[str, ...] = ()

    def selector(self) -> dict[str, Any]:
        sel: dict[str, Any] = {}
        if self.labels:
            sel["matchLabels"] = dict(self.labels)
        if self.exists:
            sel["matchExpressions"] = [{"key": k, "operator": "Exists"} for k in self.exists]
        return sel


def everyone(ns: str) -> Pods:
    return Pods(ns)


@dataclass(frozen=True)
class Flow:
    """Pods `src` open connections to pods `dst` on `ports`."""

    src: Pods
    dst: Pods
    ports: tuple[Port, ...]


@dataclass(frozen=True)
class Outside:
    """Traffic between `pods` and addresses outside the pod network: egress to, or ingress from
    (`ingress`), `cidr` minus `exclude`; `cidr` None means any address (ports still bound it)."""

    pods: Pods
    ports: tuple[Port, ...]
    cidr: str | None
    exclude: tuple[str, ...] = ()
    ingress: bool = False


@dataclass(frozen=True)
class ClusterNetwork:
    """What the policies need to know of one cluster: its cloud, the region's network CIDR and
    whether its API has only a private endpoint."""

    cloud: Cloud
    cidr: IPv4Network
    private_api: bool
    # Where private endpoints to the region's stores sit inside the network (AKS: the VNet's
    # `endpoints` subnet, components/azure/network.py), else None (the stores are outside).
    store_endpoints: IPv4Network | None = None
    # Whether Alertmanager posts to webhooks (the stack's `alert_webhooks`, `heartbeat_webhooks`).
    alert_webhooks: bool = False

    def apiserver(self) -> str:
        return ANYWHERE if self.cloud is Cloud.AZURE and not self.private_api else str(self.cidr)


# Namespaces whose pods are controllers or operators that watch the Kubernetes API.
API_CLIENTS = (CERT_MANAGER, KSERVE, KEDA, MONITORING, NVIDIA, AMD)
# Namespaces the toolkit creates and governs; kube-system is the cloud's.
GOVERNED = (CERT_MANAGER, KSERVE, KEDA, MONITORING, NVIDIA, AMD, NODE_PREP, DOWNLOAD_JOBS, MODELS, SYSTEM,
            LOGS)
# The workload identity endpoints on the node a pod's cloud SDK calls for credentials before it
# reads the weights store. EKS Pod Identity: the agent's link-local address, port 80 (EKS user
# guide, "EKS Pod Identity agent"). GKE with Dataplane V2: the GKE metadata server at
# 169.254.169.254:80, and 169.254.169.252:988 (GKE network policy docs, Workload Identity).
# AKS workload identity exchanges a projected token with Entra ID over HTTPS: the store's rule.
IDENTITY: dict[Cloud, tuple[tuple[str, Port], ...]] = {
    Cloud.AWS: (("169.254.170.23/32", Port(80)),),
    Cloud.GCP: (("169.254.169.254/32", Port(80)), ("169.254.169.252/32", Port(988))),
    Cloud.AZURE: (),
}
PROMETHEUS = everyone(MONITORING)
# The Prometheus Operator labels Alertmanager's pods so (v0.93.0 pkg/alertmanager/operator.go
# makeSelectorLabels, applicationNameLabelValue).
ALERTMANAGER = Pods(MONITORING, (("app.kubernetes.io/name", "alertmanager"),))
MODEL_SERVERS = Pods(MODELS, exists=(MODEL_LABEL,))
# The inferencepool chart (v1.5.0 templates/_helpers.tpl selectorLabels) labels each endpoint
# picker `inferencepool: <release>-epp`; it serves ext_proc on `inferenceExtension.extProcPort`.
PICKER_LABEL = "inferencepool"
ENDPOINT_PICKERS = Pods(MODELS, exists=(PICKER_LABEL,))
EPP_PORT = 9002
# The gateway's proxies: Envoy Gateway v1.9.0 labels them app.kubernetes.io/name=envoy
# (internal/infrastructure/kubernetes/proxy/resource.go EnvoyAppLabel). The listener's port 443
# is served on 10443 in the pod: ports below 1024 are shifted by 10000 (internal/gatewayapi
# translator.go wellKnownPortShift). serving/gateway.py takes these from here.
PROXY_LABEL = ("app.kubernetes.io/name", "envoy")
PROXIES = Pods(SYSTEM, (PROXY_LABEL,))
HTTPS_PORT = 443
PROXY_PORT = HTTPS_PORT + 10000
# Alertmanager's egress to the stack's webhooks: this port, IPv4 (ANYWHERE) beyond the network.
# stacks/secrets.py refuses a webhook URL this rule would drop.
WEBHOOK_PORT = HTTPS_PORT
# Envoy's Prometheus stats on every proxy (Envoy Gateway v1.9.0 bootstrap EnvoyStatsPort, container
# port `metrics`), which the gateway's PodMonitor scrapes (serving/gateway_slo.py).
PROXY_METRICS_PORT = 19001
# The gateway's pods that call the Kubernetes API (the proxies, rate limiter and Redis do not):
# Envoy Gateway's controller (gateway-helm selector `control-plane: envoy-gateway`), its certgen
# Job (`app: certgen`, writes the control plane's TLS Secrets) and the AI Gateway controller
# (ai-gateway-helm selectorLabels `app.kubernetes.io/name: ai-gateway-helm`).
GATEWAY_API_CLIENTS = (Pods(SYSTEM, (("control-plane", "envoy-gateway"),)),
                       Pods(SYSTEM, (("app", "certgen"),)),
                       Pods(SYSTEM, (("app.kubernetes.io/name", "ai-gateway-helm"),)))

# Pods that open and accept no connection at all, each held by a policy of its own that selects
# it by its labels and allows nothing (the namespace's default deny covers it too; checkov's
# CKV2_K8S_6 graph only links a NetworkPolicy to a Pod through `podSelector.matchLabels`, never
# through an empty selector: checkov NetworkPolicyEdgeBuilder.find_connections skips a falsy
# podSelector). The NVMe cache's node prep (serving/nodeprep.py) enters the host's mount, UTS,
# IPC and PID namespaces but not its network one, talks to the runtime over a host socket and
# calls no service: it needs no network, not even DNS.
ISOLATED: tuple[Pods, ...] = (Pods(NODE_PREP, (("app.kubernetes.io/name", NODE_PREP_NAME),)),)
NO_NETWORK = frozenset(p.namespace for p in ISOLATED)

FLOWS: tuple[Flow, ...] = (
    # Name resolution: CoreDNS/kube-dns pods carry k8s-app=kube-dns on EKS, GKE and AKS.
    *(Flow(everyone(ns), Pods(KUBE_SYSTEM, (("k8s-app", "kube-dns"),)), DNS)
      for ns in GOVERNED if ns not in NO_NETWORK),
    # kube-prometheus-stack's parts call each other: Prometheus scrapes the operator (10250),
    # kube-state-metrics (8080), Grafana, Alertmanager and itself; it sends alerts to Alertmanager
    # (9093), whose replicas gossip (9094); Grafana queries Prometheus (9090).
    Flow(everyone(MONITORING), everyone(MONITORING), ()),
    # KEDA's Prometheus trigger (serving/autoscaling.py, serverAddress: components/models.py).
    Flow(Pods(KEDA, (("app", "keda-operator"),)), Pods(MONITORING), tcp(PROMETHEUS_PORT)),
    # The metrics adapter asks the operator for scaler metrics over gRPC 9666 (KEDA chart
    # templates/metrics-server/networkpolicy.yaml at v2.20.2).
    Flow(Pods(KEDA, (("app", "keda-operator-metrics-apiserver"),)),
         Pods(KEDA, (("app", "keda-operator"),)), tcp(9666)),
    # ServiceMonitors keda_values turns on: operator and metrics server, `prometheus.*.port` 8080.
    Flow(PROMETHEUS, Pods(KEDA, (("app", "keda-operator"),)), tcp(8080)),
    Flow(PROMETHEUS, Pods(KEDA, (("app", "keda-operator-metrics-apiserver"),)), tcp(8080)),
    # DCGM exporter's ServiceMonitor (nvidia_values), gpu-operator chart `dcgmExporter` port 9400.
    Flow(PROMETHEUS, everyone(NVIDIA), tcp(9400)),
    # The AMD metrics exporter's ServiceMonitor (serving/manifests.py DeviceConfig, port 5000).
    Flow(PROMETHEUS, everyone(AMD), tcp(5000)),
    # Each model's PodMonitor scrapes vLLM's /metrics on its serving port.
    Flow(PROMETHEUS, MODEL_SERVERS, tcp(VLLM_PORT)),
    # The gateway's PodMonitor scrapes its proxies' Envoy stats (serving/gateway_slo.py).
    Flow(PROMETHEUS, PROXIES, tcp(PROXY_METRICS_PORT)),
    # CoreDNS metrics (kube-prometheus-stack `coreDns.service.port` 9153).
    Flow(PROMETHEUS, Pods(KUBE_SYSTEM, (("k8s-app", "kube-dns"),)), tcp(9153)),
    # Inference requests: from the gateway's namespace only.
    Flow(everyone(GATEWAY_NAMESPACE), MODEL_SERVERS, tcp(VLLM_PORT)),
    # The front door (serving/gateway.py) runs whole in the gateway's namespace: Envoy Gateway's
    # controller, its proxies (xDS 18000), its rate-limit service (rate-limit xDS 18001, gRPC from
    # the proxies), the Redis it counts in (6379), the AI Gateway controller (extension server
    # 1063, its webhook, the proxies' ext_proc). They call each other on these and more ports.
    Flow(everyone(GATEWAY_NAMESPACE), everyone(GATEWAY_NAMESPACE), ()),
    # The proxies ask each model's endpoint picker over ext_proc (inferencepool
    # inferenceExtension.extProcPort 9002); its pods carry `inferencepool: <model>-epp`.
    Flow(PROXIES, ENDPOINT_PICKERS, tcp(EPP_PORT)),
    # The picker scrapes vLLM's /metrics (queue, KV cache) on the serving port.
    Flow(ENDPOINT_PICKERS, MODEL_SERVERS, tcp(VLLM_PORT)),
)

# Admission webhooks and aggregated APIs the API server calls (ports from the charts).
WEBHOOKS: tuple[tuple[Pods, tuple[Port, ...]], ...] = (
    # cert-manager values `webhook.securePort` 10250.
    (everyone(CERT_MANAGER), tcp(10250)),
    # kserve-resources and kserve-localmodel-resources v0.20.0: `webhook-server` containerPort
    # 9443 on the controllers (control-plane=kserve-controller-manager and
    # control-plane=kserve-localmodel-controller-manager).
    (everyone(KSERVE), tcp(9443)),
    # KEDA admission webhooks (`webhooks.port` default 9443) and the external metrics APIService
    # (`service.portHttpsTarget` 6443).
    (Pods(KEDA, (("app", "keda-admission-webhooks"),)), tcp(9443)),
    (Pods(KEDA, (("app", "keda-operator-metrics-apiserver"),)), tcp(6443)),
    # kube-prometheus-stack: the operator serves its admission webhooks on
    # `prometheusOperator.tls.internalPort` 10250.
    (everyone(MONITORING), tcp(10250)),
    # AMD GPU operator v1.5.1's KMM subchart: webhook-server containerPort 9443.
    (Pods(AMD, (("control-plane", "webhook-server"),)), tcp(9443)),
    # The AI Gateway controller's mutating webhook (ai-gateway-helm controller.mutatingWebhook.port
    # 9443) and Envoy Gateway's topology injector, served by its controller on 9443.
    (everyone(SYSTEM), tcp(9443)),
)


def outside(net: ClusterNetwork) -> tuple[Outside, ...]:
    """Every connection of `net`'s cluster that leaves or enters from outside the pod network."""
    beyond = (str(net.cidr),)
    rows: list[Outside] = [Outside(everyone(ns), tcp(443), net.apiserver()) for ns in API_CLIENTS]
    rows += [Outside(pods, ports, None, ingress=True) for pods, ports in WEBHOOKS]
    # Clients reach the gateway's proxies through the load balancer, which keeps their address
    # (externalTrafficPolicy Local); whether it faces the internet is the posture's call.
    rows.append(Outside(PROXIES, tcp(PROXY_PORT), None, ingress=True))
    # Each endpoint picker watches its InferencePool and the pool's pods.
    rows += [Outside(p, tcp(443), net.apiserver()) for p in (ENDPOINT_PICKERS, *GATEWAY_API_CLIENTS)]
    # Prometheus scrapes every kubelet (10250, cAdvisor too) and node-exporter (9100).
    rows.append(Outside(PROMETHEUS, tcp(10250, 9100), None))
    if net.alert_webhooks:
        # Alertmanager posts the SLO alerts and its heartbeat to the stack's webhooks, HTTPS
        # anywhere but the network.
        rows.append(Outside(ALERTMANAGER, tcp(WEBHOOK_PORT), ANYWHERE, beyond))
    # The log collector's exporter: CloudWatch Logs, Cloud Logging or Application Insights over
    # HTTPS (none publishes fixed addresses), after the cloud's identity endpoint (none on Azure,
    # where the exporter authenticates with the connection string).
    rows.append(Outside(everyone(LOGS), tcp(443), ANYWHERE, beyond))
    rows += [Outside(everyone(LOGS), (port,), cidr) for cidr, port in IDENTITY[net.cloud]]
    for pods in (MODEL_SERVERS, everyone(DOWNLOAD_JOBS)):
        # Weights: the region's store over HTTPS, after the cloud's identity endpoint.
        rows.append(Outside(pods, tcp(443), ANYWHERE, beyond))
        if net.store_endpoints is not None:
            # The weights account's blob endpoint resolves to its private endpoint in the VNet.
            rows.append(Outside(pods, tcp(443), str(net.store_endpoints)))
        rows += [Outside(pods, (port,), cidr) for cidr, port in IDENTITY[net.cloud]]
    # The AMD operator's driver build (KMM build pod) installs packages in an Ubuntu image
    # (archive.ubuntu.com over HTTP, repo.radeon.com over HTTPS) and pushes the image to the
    # region's registry (components/addons_gpu.py AMD_DRIVER_REPOSITORY).
    rows.append(Outside(everyone(AMD), tcp(80, 443), ANYWHERE, beyond))
    return tuple(rows)


def _ports(ports: tuple[Port, ...]) -> list[dict[str, Any]]:
    return [{"protocol": p.protocol, "port": p.port} for p in ports]


def _peer(pods: Pods, here: str) -> dict[str, Any]:
    peer: dict[str, Any] = {"podSelector": pods.selector()}
    if pods.namespace != here:
        peer["namespaceSelector"] = {"matchLabels": {NS_LABEL: pods.namespace}}
    return peer


def _rule(peers: list[dict[str, Any]] | None, ports: tuple[Port, ...], key: str) -> dict[str, Any]:
    rule: dict[str, Any] = {}
    if peers is not None:
        rule[key] = peers
    if ports:
        rule["ports"] = _ports(ports)
    return rule


def _block(o: Outside) -> list[dict[str, Any]] | None:
    if o.cidr is None:
        return None
    block: dict[str, Any] = {"cidr": o.cidr}
    if o.exclude:
        block["except"] = list(o.exclude)
    return [{"ipBlock": block}]


def namespace_policies(ns: str, net: ClusterNetwork) -> list[dict[str, Any]]:
    """The NetworkPolicy bodies of namespace `ns`: the default deny first, then one policy per
    group of pods with anything allowed."""
    if ns not in GOVERNED:
        raise ValueError(f"namespace {ns!r} has no network rules; name its flows in serving/netpol.py "
                         f"(governed: {', '.join(GOVERNED)})")
    rules: dict[Pods, dict[str, list[dict[str, Any]]]] = {}

    def add(pods: Pods, key: str, rule: dict[str, Any]) -> None:
        rules.setdefault(pods, {"ingress": [], "egress": []})[key].append(rule)

    for f in FLOWS:
        if f.src.namespace == ns:
            add(f.src, "egress", _rule([_peer(f.dst, ns)], f.ports, "to"))
        if f.dst.namespace == ns:
            add(f.dst, "ingress", _rule([_peer(f.src, ns)], f.ports, "from"))
    for o in outside(net):
        if o.pods.namespace == ns:
            key = "ingress" if o.ingress else "egress"
            add(o.pods, key, _rule(_block(o), o.ports, "from" if o.ingress else "to"))
    bodies = [_policy(ns, DENY_ALL, {}, {"policyTypes": ["Ingress", "Egress"]})]
    if ns in NO_NETWORK and rules:
        raise ValueError(f"namespace {ns} holds only isolated pods but has flows: {sorted(map(repr, rules))}")
    for pods in ISOLATED:
        if pods.namespace == ns:
            bodies.append(_policy(ns, f"rtip-isolate-{pods.labels[0][1]}", pods.selector(),
                                  {"policyTypes": ["Ingress", "Egress"]}))
    for pods, found in sorted(rules.items(), key=lambda kv: _order(kv[0])):
        spec: dict[str, Any] = {"policyTypes": [k.capitalize() for k in ("ingress", "egress") if found[k]]}
        spec.update({k: v for k, v in found.items() if v})
        bodies.append(_policy(ns, _name(pods), pods.selector(), spec))
    names = [b["metadata"]["name"] for b in bodies]
    if len(set(names)) != len(names):
        raise ValueError(f"namespace {ns}: two pod groups share a policy name: {sorted(names)}")
    return bodies


def _order(pods: Pods) -> tuple[int, str]:
    return (bool(pods.labels or pods.exists), repr(pods))


def _name(pods: Pods) -> str:
    if not (pods.labels or pods.exists):
        return "rtip-allow"
    value = pods.labels[0][1] if pods.labels else pods.exists[0].split("/")[-1]
    return f"rtip-allow-{value}"


def _policy(ns: str, name: str, selector: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns, "labels": {"app.kubernetes.io/managed-by": "rtip"}},
        "spec": {"podSelector": selector, **spec},
    }


__all__ = ["AMD", "ANYWHERE", "API_CLIENTS", "CERT_MANAGER", "DENY_ALL", "DNS", "DOWNLOAD_JOBS",
           "ENDPOINT_PICKERS", "EPP_PORT", "FLOWS",
           "GATEWAY_API_CLIENTS",
           "GATEWAY_NAMESPACE", "GOVERNED", "HTTPS_PORT", "IDENTITY", "ISOLATED", "KEDA", "KSERVE",
           "KUBE_SYSTEM",
           "MODELS", "MONITORING", "NODE_PREP", "NS_LABEL", "NVIDIA", "PICKER_LABEL",
           "PROMETHEUS_PORT",
           "PROXIES", "PROXY_LABEL", "PROXY_METRICS_PORT", "PROXY_PORT", "SYSTEM",
           "WEBHOOKS", "WEBHOOK_PORT", "ClusterNetwork", "Flow", "Outside", "Pods", "Port",
           "namespace_policies",
           "outside", "tcp"]
