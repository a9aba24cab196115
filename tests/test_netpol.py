"""NetworkPolicies: every namespace starts under a default deny, every emitted policy is a valid
networking.k8s.io/v1 object, and the flows the platform needs pass while others are refused.

The reachability answers come from a small evaluator written here from the NetworkPolicy
semantics in the Kubernetes docs ("Network Policies": a pod is isolated for a direction once any
policy of that type selects it; a connection needs the source's egress and the destination's
ingress; peers in one `from`/`to` entry are ANDed; an ipBlock matches addresses; no `ports` means
every port), not from serving/netpol.py. It reads ipBlocks as matching every address, pods
included (the VPC CNI reading, where pods take VPC addresses): the looser reading, so a refusal
it finds holds on every engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network
from typing import Any

import kubernetes_validate
import pytest

from components import addons, addons_cache, addons_gpu, namespaces
from rtip.offline import Record
from rtip.render import manifest
from serving import netpol
from serving.hardware import Cloud
from stacks.naming import MODELS_NAMESPACE
from tests.conftest import STACKS, record_of, spec_of

NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NAMESPACE = "kubernetes:core/v1:Namespace"
RELEASE = "kubernetes:helm.sh/v3:Release"


@dataclass(frozen=True)
class Endpoint:
    ip: str
    namespace: str | None = None  # None: outside the cluster (API server, S3, a node)
    labels: dict[str, str] = field(default_factory=dict)


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        op, key, values = e["operator"], e["key"], e.get("values", [])
        fails = {"Exists": key not in labels, "DoesNotExist": key in labels,
                 "In": labels.get(key) not in values, "NotIn": labels.get(key) in values}
        if fails[op]:
            return False
    return True


def _peer(peer: dict[str, Any], here: str, other: Endpoint) -> bool:
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        ip = IPv4Address(other.ip)
        return ip in IPv4Network(block["cidr"]) and \
            not any(ip in IPv4Network(x) for x in block.get("except", []))
    if other.namespace is None:
        return False
    if "namespaceSelector" in peer:
        ns_ok = _selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": other.namespace})
    else:
        ns_ok = other.namespace == here
    return ns_ok and _selects(peer.get("podSelector", {}), other.labels)


def _port(rule: dict[str, Any], port: int, protocol: str) -> bool:
    ports = rule.get("ports")
    return not ports or any(p.get("protocol", "TCP") == protocol and p.get("port") in (None, port)
                            for p in ports)


def _admits(policies: list[dict[str, Any]], pod: Endpoint, other: Endpoint, port: int, protocol: str,
            direction: str) -> bool:
    """Whether `pod`'s policies let it talk with `other` in `direction` (Ingress or Egress)."""
    if pod.namespace is None:
        return True  # outside the cluster: no NetworkPolicy applies
    mine = [p for p in policies if p["metadata"]["namespace"] == pod.namespace
            and direction in p["spec"].get("policyTypes", ["Ingress"])
            and _selects(p["spec"]["podSelector"], pod.labels)]
    if not mine:
        return True
    key, peers = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    return any(_port(rule, port, protocol) and (peers not in rule or any(
        _peer(peer, pod.namespace, other) for peer in rule[peers]))
        for p in mine for rule in p["spec"].get(key, []))


def reach(policies: list[dict[str, Any]], src: Endpoint, dst: Endpoint, port: int,
          protocol: str = "TCP") -> bool:
    return _admits(policies, src, dst, port, protocol, "Egress") and \
        _admits(policies, dst, src, port, protocol, "Ingress")


def cluster_policies(record: Record, cloud: str) -> list[dict[str, Any]]:
    """The policies of the first cluster of `cloud` in `record` (by its Kubernetes provider,
    a child of the cloud's cluster component)."""
    for prov in record.by_type("pulumi:providers:kubernetes"):
        cluster = record.get(prov.parent) if prov.parent else None
        if cluster is not None and cluster.type == f"rtip:{cloud}:Cluster":
            return [manifest(r) for r in record.by_type(NETPOL) if r.provider == prov.urn]
    raise AssertionError(f"no {cloud} cluster in the record")


# -- emitted objects ------------------------------------------------------------------------


def test_namespace_names_are_the_components() -> None:
    assert (netpol.CERT_MANAGER, netpol.KSERVE, netpol.KEDA, netpol.MONITORING) == (
        addons.CERT_MANAGER_NAMESPACE, addons.KSERVE_NAMESPACE, addons.KEDA_NAMESPACE,
        addons.MONITORING_NAMESPACE)
    assert (netpol.NVIDIA, netpol.AMD) == (addons_gpu.NVIDIA_NAMESPACE, addons_gpu.AMD_NAMESPACE)
    assert (netpol.NODE_PREP, netpol.DOWNLOAD_JOBS) == (
        addons_cache.NODE_PREP_NAMESPACE, addons_cache.JOBS_NAMESPACE)
    assert (netpol.MODELS, netpol.SYSTEM) == (MODELS_NAMESPACE, namespaces.SYSTEM_NAMESPACE)
    # The KEDA trigger's Prometheus address names the port the monitoring namespace admits.
    from components.models import prometheus_address
    assert prometheus_address().endswith(f":{netpol.PROMETHEUS_PORT}")


@pytest.mark.parametrize("stack", STACKS)
def test_every_namespace_starts_under_a_default_deny(stack: str) -> None:
    record = record_of(stack)
    deny = {(r.provider, r.inputs["metadata"]["namespace"]) for r in record.by_type(NETPOL)
            if r.inputs["spec"]["podSelector"] == {}
            and set(r.inputs["spec"]["policyTypes"]) == {"Ingress", "Egress"}
            and not r.inputs["spec"].get("ingress") and not r.inputs["spec"].get("egress")}
    spaces = record.by_type(NAMESPACE)
    assert spaces
    for ns in spaces:
        assert (ns.provider, ns.inputs["metadata"]["name"]) in deny, ns.urn
    # Each policy is applied after its namespace exists.
    by_name = {(r.provider, r.inputs["metadata"]["name"]): r.urn for r in spaces}
    for p in record.by_type(NETPOL):
        assert by_name[(p.provider, p.inputs["metadata"]["namespace"])] in p.dependencies, p.urn


@pytest.mark.parametrize("stack", STACKS)
def test_policies_validate_strictly(stack: str) -> None:
    version = spec_of(stack).kubernetes_version
    for r in record_of(stack).by_type(NETPOL):
        kubernetes_validate.validate(manifest(r), version, strict=True)


def test_releases_wait_for_their_namespace_policies() -> None:
    """A chart's pods and hooks start only once the deny and its allowances are applied."""
    record = record_of("prod")
    policies: dict[tuple[str | None, str], set[str]] = {}
    for p in record.by_type(NETPOL):
        policies.setdefault((p.provider, p.inputs["metadata"]["namespace"]), set()).add(p.urn)
    releases = record.by_type(RELEASE)
    assert releases
    for rel in releases:
        if rel.inputs["namespace"] == netpol.KUBE_SYSTEM:
            continue  # the cloud's namespace (Karpenter on EKS): not ours to police
        needed = policies[(rel.provider, rel.inputs["namespace"])]
        assert needed <= set(rel.dependencies), rel.urn


# -- flows -----------------------------------------------------------------------------------

PROMETHEUS = Endpoint("10.20.1.10", "monitoring", {"app.kubernetes.io/name": "prometheus"})
MODEL = Endpoint("10.20.2.20", "rtip-models", {"rtip.dev/model": "llama-8b", "app": "llama-8b-predictor"})
KEDA_OPERATOR = Endpoint("10.20.1.30", "keda", {"app": "keda-operator"})
KEDA_ADAPTER = Endpoint("10.20.1.31", "keda", {"app": "keda-operator-metrics-apiserver"})
KEDA_WEBHOOKS = Endpoint("10.20.1.32", "keda", {"app": "keda-admission-webhooks"})
KSERVE = Endpoint("10.20.1.40", "kserve", {"control-plane": "kserve-controller-manager"})
CERT_WEBHOOK = Endpoint("10.20.1.50", "cert-manager", {"app.kubernetes.io/component": "webhook"})
DNS = Endpoint("10.20.1.2", "kube-system", {"k8s-app": "kube-dns"})
KUBE_SYSTEM_POD = Endpoint("10.20.1.3", "kube-system", {"k8s-app": "metrics-server"})
GATEWAY = Endpoint("10.20.1.60", "rtip-system", {"app": "gateway"})
TENANT = Endpoint("10.20.1.70", "tenant-a", {"app": "job"})
NODE_PREP = Endpoint("10.20.1.80", "rtip-node-prep", {"app.kubernetes.io/name": "rtip-nvme-cache"})
# The region CIDRs of prod (stacks/Pulumi.prod.yaml): us-east-1 10.20/16, us-central1 10.30/16.
API_SERVER = {"aws": Endpoint("10.20.128.5"), "gcp": Endpoint("10.30.64.2"), "azure": Endpoint("10.40.0.4")}
S3 = Endpoint("52.216.8.10")  # an S3 address: outside every stack network
NODE = Endpoint("10.20.64.7")  # a node: kubelet, node-exporter


@pytest.fixture(scope="module")
def aws() -> list[dict[str, Any]]:
    return cluster_policies(record_of("prod"), "aws")


def test_node_prep_pods_have_a_policy_of_their_own_that_allows_nothing(aws: list[dict[str, Any]]) -> None:
    # checkov's CKV2_K8S_6 links a policy to a pod only through matchLabels the pod carries.
    from serving.nodeprep import node_prep_daemonset

    ds = node_prep_daemonset(netpol.NODE_PREP, "/mnt/nvme", False, "img", {}, [])
    labels = ds["spec"]["template"]["metadata"]["labels"]
    own = [p for p in aws if p["metadata"]["namespace"] == netpol.NODE_PREP
           and p["spec"]["podSelector"].get("matchLabels")
           and p["spec"]["podSelector"]["matchLabels"].items() <= labels.items()]
    assert len(own) == 1
    assert own[0]["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in own[0]["spec"] and "egress" not in own[0]["spec"]
    # Nothing else in the namespace opens a path for it.
    assert all(not p["spec"].get("ingress") and not p["spec"].get("egress")
               for p in aws if p["metadata"]["namespace"] == netpol.NODE_PREP)


def test_needed_flows_pass(aws: list[dict[str, Any]]) -> None:
    ok = [
        (PROMETHEUS, MODEL, 8080, "TCP"),  # the model's PodMonitor
        (KEDA_OPERATOR, PROMETHEUS, 9090, "TCP"),  # the ScaledObject's Prometheus trigger
        (KEDA_ADAPTER, KEDA_OPERATOR, 9666, "TCP"),
        (PROMETHEUS, KEDA_OPERATOR, 8080, "TCP"),
        (PROMETHEUS, NODE, 10250, "TCP"),
        (PROMETHEUS, NODE, 9100, "TCP"),
        (GATEWAY, MODEL, 8080, "TCP"),
        (MODEL, DNS, 53, "UDP"),
        (MODEL, S3, 443, "TCP"),  # weights
        (MODEL, Endpoint("169.254.170.23"), 80, "TCP"),  # EKS Pod Identity agent
        (KSERVE, API_SERVER["aws"], 443, "TCP"),
        (KEDA_OPERATOR, API_SERVER["aws"], 443, "TCP"),
        (PROMETHEUS, API_SERVER["aws"], 443, "TCP"),
        # The API server calls webhooks and the metrics API (ports from the charts' values).
        (API_SERVER["aws"], KSERVE, 9443, "TCP"),
        (API_SERVER["aws"], CERT_WEBHOOK, 10250, "TCP"),
        (API_SERVER["aws"], KEDA_WEBHOOKS, 9443, "TCP"),
        (API_SERVER["aws"], KEDA_ADAPTER, 6443, "TCP"),
    ]
    refused = [(s, d, p) for s, d, p, proto in ok if not reach(aws, s, d, p, proto)]
    assert not refused


def test_other_flows_are_refused(aws: list[dict[str, Any]]) -> None:
    denied = [
        (MODEL, PROMETHEUS, 9090),  # a model server cannot query metrics
        (MODEL, KUBE_SYSTEM_POD, 443),
        (GATEWAY, KUBE_SYSTEM_POD, 443),  # tenant-facing namespace -> kube-system
        (TENANT, MODEL, 8080),  # only the gateway and Prometheus reach the model servers
        (GATEWAY, MODEL, 9090),
        (MODEL, API_SERVER["aws"], 443),  # model pods never call the API
        (MODEL, CERT_WEBHOOK, 10250),
        (MODEL, Endpoint("8.8.8.8"), 80),
        (NODE_PREP, S3, 443),
        (NODE_PREP, API_SERVER["aws"], 443),
        (NODE_PREP, DNS, 53),  # it enters the host's mount namespace, not its network one
        (KSERVE, S3, 443),  # controllers reach the API only
        (PROMETHEUS, KSERVE, 9443),
        (API_SERVER["aws"], KSERVE, 8443),
        (API_SERVER["aws"], MODEL, 8080),
    ]
    allowed = [(s, d, p) for s, d, p in denied if reach(aws, s, d, p)]
    assert not allowed


def test_cloud_endpoints() -> None:
    """The API server peer is the region's network; GKE's metadata server is open to the model
    pods (GKE docs: with Dataplane V2 169.254.169.254/32 port 80, and 169.254.169.252/32 port 988)."""
    gcp = cluster_policies(record_of("prod"), "gcp")
    assert reach(gcp, MODEL, Endpoint("169.254.169.254"), 80)
    assert reach(gcp, MODEL, Endpoint("169.254.169.252"), 988)
    assert reach(gcp, KSERVE, API_SERVER["gcp"], 443)
    assert not reach(gcp, KSERVE, Endpoint("34.1.2.3"), 443)
    azure = cluster_policies(record_of("prod"), "azure")
    assert reach(azure, KSERVE, API_SERVER["azure"], 443)
    assert not reach(azure, MODEL, Endpoint("169.254.169.254"), 80)


def test_public_aks_api_is_outside_the_network() -> None:
    """A public AKS API answers on an address known only after apply: controllers may reach TCP
    443 anywhere there, and still nothing else."""
    net = netpol.ClusterNetwork(Cloud.AZURE, IPv4Network("10.40.0.0/16"), private_api=False)
    policies = [p for ns in netpol.GOVERNED for p in netpol.namespace_policies(ns, net)]
    assert reach(policies, KSERVE, Endpoint("20.1.2.3"), 443)
    assert not reach(policies, KSERVE, Endpoint("20.1.2.3"), 80)
    assert not reach(policies, MODEL, API_SERVER["azure"], 443)


def test_unknown_namespace_is_an_error() -> None:
    net = netpol.ClusterNetwork(Cloud.AWS, IPv4Network("10.20.0.0/16"), private_api=True)
    with pytest.raises(ValueError, match="no network rules"):
        netpol.namespace_policies("someone-else", net)


# -- the front door's flows (serving/gateway.py) -----------------------------------------------
# Pod labels as upstream sets them: Envoy Gateway v1.9.0 internal/infrastructure/kubernetes/proxy/
# resource.go EnvoyAppLabel and ratelimit/resource.go rateLimitLabels (gRPC port InfraGRPCPort
# 8081); the inferencepool v1.5.0 chart's picker selector `inferencepool: <release>-epp`
# (extProcPort 9002); the counters' store as serving/gateway_charts.py labels its pods.
PROXY = Endpoint("10.20.1.61", "rtip-system", {"app.kubernetes.io/name": "envoy",
                                               "app.kubernetes.io/component": "proxy",
                                               "app.kubernetes.io/managed-by": "envoy-gateway"})
RATE_LIMITER = Endpoint("10.20.1.62", "rtip-system", {"app.kubernetes.io/name": "envoy-ratelimit",
                                                      "app.kubernetes.io/component": "ratelimit",
                                                      "app.kubernetes.io/managed-by": "envoy-gateway"})
EPP = Endpoint("10.20.2.30", "rtip-models", {"inferencepool": "llama-8b-epp"})
CLIENT = Endpoint("203.0.113.7")  # a client through the load balancer (its address kept)


def counters() -> Endpoint:
    from serving import gateway_charts
    deployment, _ = gateway_charts.redis("valkey")
    return Endpoint("10.20.1.63", "rtip-system", deployment["spec"]["template"]["metadata"]["labels"])


def test_gateway_flows_pass(aws: list[dict[str, Any]]) -> None:
    ok = [
        (CLIENT, PROXY, 10443),  # the listener's 443, shifted by 10000 in the pod (Envoy Gateway)
        (PROXY, EPP, 9002),  # ext_proc: which replica
        (PROXY, MODEL, 8080),  # the request itself, to the replica the picker chose
        (PROXY, RATE_LIMITER, 8081),  # the global rate limit's gRPC check
        (RATE_LIMITER, counters(), 6379),  # the counters
        (EPP, MODEL, 8080),  # the picker scrapes vLLM's queue and KV-cache metrics
        (EPP, API_SERVER["aws"], 443),  # it watches its pool and the pool's pods
    ]
    refused = [(s, d, p) for s, d, p in ok if not reach(aws, s, d, p)]
    assert not refused


def test_gateway_internals_are_closed_to_others(aws: list[dict[str, Any]]) -> None:
    denied = [
        (TENANT, EPP, 9002),
        (MODEL, EPP, 9002),
        (TENANT, counters(), 6379),
        (MODEL, counters(), 6379),
        (CLIENT, counters(), 6379),  # only the proxies face the load balancer
        (CLIENT, EPP, 9002),
        (CLIENT, RATE_LIMITER, 8081),
        (EPP, RATE_LIMITER, 8081),  # the picker talks to its pool's pods and the API only
        (EPP, Endpoint("8.8.8.8"), 443),
        (PROXY, MODEL, 9090),  # the proxies reach the models' serving port only
    ]
    allowed = [(s, d, p) for s, d, p in denied if reach(aws, s, d, p)]
    assert not allowed
