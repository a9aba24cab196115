"""checkov (its own venv, FACTS.md section 8) over the rendered prod manifests.

Every failed check must be in ACCEPTED with the reason a production platform may keep it; any
other failure fails the test. `make test` installs checkov and sets RTIP_CHECKOV.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from rtip.cli import main
from tests.conftest import SHARED

# check id -> why the platform keeps it everywhere (empty until an object class needs one).
ACCEPTED: dict[str, str] = {}
# The NVMe cache's node-prep DaemonSet (serving/nodeprep.py) assembles and bind-mounts host disks:
# mdadm, mkfs and mount act on the host's devices and mount namespace, which takes a privileged
# container in the host PID namespace; it runs a one-shot step and then sleeps, so probes would
# test nothing. (check id, resource prefix) -> why.
NODE_PREP = "DaemonSet.rtip-node-prep.rtip-nvme-cache"
ACCEPTED_FOR: dict[tuple[str, str], str] = {
    (check, NODE_PREP): "host disk setup needs a privileged container in the host PID namespace"
    for check in ("CKV_K8S_16", "CKV_K8S_17", "CKV_K8S_20", "CKV_K8S_22", "CKV_K8S_28", "CKV_K8S_29",
                  "CKV_K8S_31", "CKV_K8S_37")
} | {
    ("CKV_K8S_8", NODE_PREP): "a one-shot setup step that then sleeps: a liveness probe tests nothing",
    ("CKV_K8S_9", NODE_PREP): "no traffic is ever sent to it: a readiness probe tests nothing",
}


def accepted(check: str, resource: str) -> bool:
    return check in ACCEPTED or any(check == c and resource.startswith(r) for c, r in ACCEPTED_FOR)


def checkov(folder: Path) -> list[dict]:
    binary = os.environ.get("RTIP_CHECKOV", ".venv-checkov/bin/checkov")
    if not Path(binary).exists():
        pytest.fail(f"checkov not found at {binary}: run `make test`, which installs it")
    done = subprocess.run([binary, "-d", str(folder), "--framework", "kubernetes", "-o", "json",
                           "--skip-download", "--quiet", "--compact"],
                          capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode in (0, 1), done.stderr  # 1 means some check failed
    reports = json.loads(done.stdout) if done.stdout.strip() else []
    return reports if isinstance(reports, list) else [reports]


def failed(reports: list[dict]) -> list[tuple[str, str]]:
    return [(f["check_id"], f["resource"]) for r in reports
            for f in r.get("results", {}).get("failed_checks", [])]


@pytest.fixture(scope="module")
def prod_manifests(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("prod")
    assert main(["plan", "prod", "--out", str(out)]) == 0
    return out


def test_prod_manifests_pass_checkov(prod_manifests, capsys) -> None:
    capsys.readouterr()
    reports = checkov(prod_manifests)
    scanned = sum(r.get("summary", {}).get("resource_count", 0) for r in reports)
    assert scanned > 0
    unexpected = [(c, res) for c, res in failed(reports) if not accepted(c, res)]
    assert not unexpected, unexpected


def test_checkov_catches_an_unsafe_pod(tmp_path) -> None:
    # The gate must be able to fail: a privileged pod on a `latest` image with no limits.
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "vllm/vllm-openai:latest",
                                    "securityContext": {"privileged": True}}]}}
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod))
    ids = {c for c, _ in failed(checkov(tmp_path))}
    assert {"CKV_K8S_16", "CKV_K8S_14", "CKV_K8S_21"} <= ids  # privileged, latest tag, default ns


# -- the log collector's DaemonSet (components/logs.py) -------------------------------------------
# The collector is a Helm release, so the rendered manifests hold its values, not its DaemonSet.
# `collector_daemonset` writes the DaemonSet opentelemetry-collector 0.170.0 renders from those
# values (templates/daemonset.yaml and templates/_pod.tpl at tag opentelemetry-collector-0.170.0,
# commit f5178cb), the fields our values reach with every preset off, so checkov judges what runs.
OTEL_CHART = SHARED / "charts" / "opentelemetry-collector" / "0.170.0"
COLLECTOR = "DaemonSet.rtip-logs.opentelemetry-collector-agent"
COLLECTOR_ACCEPTED: dict[str, str] = {
    # Pod log files are root-owned 0640 on the node: only their owner (root) reads them without a
    # capability, so the container runs as UID 0 with every capability dropped, no privilege
    # escalation and a read-only root filesystem (serving/logpipeline.py).
    "CKV_K8S_23": "reads root-owned 0640 pod log files as their owner, with every capability dropped",
    "CKV_K8S_40": "reads root-owned 0640 pod log files as their owner, with every capability dropped",
}


def collector_daemonset(release: dict, chart_values: dict) -> dict:
    values, name = release["values"], release["name"]
    memory = values["resources"]["limits"]["memory"]
    pod_ip = {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}
    env = [{"name": "MY_POD_IP", "valueFrom": pod_ip},
           {"name": "OTEL_K8S_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
           # useGOMEMLIMIT (default true): 80% of the memory limit (opentelemetry-collector.gomemlimit).
           {"name": "GOMEMLIMIT", "value": f"{int(memory.removesuffix('Mi')) * 8 // 10}MiB"},
           *values.get("extraEnvs", [])]
    image = values["image"]
    ref = (f"{image['repository']}@{image['digest']}" if image.get("digest")
           else f"{image['repository']}:{image['tag']}")
    probe = {"httpGet": chart_values["livenessProbe"]["httpGet"]}
    pod = {
        "serviceAccountName": values["serviceAccount"]["name"],
        "automountServiceAccountToken": values["serviceAccount"]["automountServiceAccountToken"],
        "securityContext": values.get("podSecurityContext", {}),
        "containers": [{
            "name": "opentelemetry-collector", "command": [f"/{values['command']['name']}"],
            "args": ["--config=/conf/relay.yaml"], "securityContext": values["securityContext"],
            "image": ref, "imagePullPolicy": image["pullPolicy"], "env": env,
            "livenessProbe": probe, "readinessProbe": {"httpGet": chart_values["readinessProbe"]["httpGet"]},
            "resources": values["resources"],
            "volumeMounts": [{"mountPath": "/conf", "name": "opentelemetry-collector-configmap"},
                             *values["extraVolumeMounts"]],
        }],
        "volumes": [{"name": "opentelemetry-collector-configmap", "configMap": {
            "name": f"{name}-agent", "items": [{"key": "relay", "path": "relay.yaml"}]}},
                    *values["extraVolumes"]],
        "tolerations": values["tolerations"],
        "hostNetwork": False, "hostPID": False,
    }
    labels = {"app.kubernetes.io/name": "opentelemetry-collector", "app.kubernetes.io/instance": name,
              "component": "agent-collector"}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": f"{name}-agent", "namespace": release["namespace"], "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "updateStrategy": {"type": "RollingUpdate"},
                     "template": {"metadata": {"labels": labels}, "spec": pod}}}


def test_the_log_collectors_daemonset_passes_checkov(prod_manifests, tmp_path) -> None:
    chart_values = yaml.safe_load((OTEL_CHART / "values.yaml").read_text())
    found = sorted(prod_manifests.glob("*/helmrelease-opentelemetry-collector.yaml"))
    assert len(found) == 4  # one per prod cluster
    for path in found:
        # Each cluster's DaemonSet beside its namespace's NetworkPolicies (CKV2_K8S_6 looks for them).
        folder = tmp_path / path.parent.name
        folder.mkdir()
        daemonset = collector_daemonset(yaml.safe_load(path.read_text()), chart_values)
        (folder / "daemonset.yaml").write_text(yaml.safe_dump(daemonset))
        for policy in path.parent.glob("networkpolicy-rtip-logs-*.yaml"):
            (folder / policy.name).write_text(policy.read_text())
    reports = checkov(tmp_path)
    # Every DaemonSet was scanned: each is reported for reading the logs as root (accepted below).
    as_root = [res for c, res in failed(reports) if c == "CKV_K8S_23" and res.startswith(COLLECTOR)]
    assert len(as_root) == len(found)
    unexpected = [(c, res) for c, res in failed(reports)
                  if not (res.startswith(COLLECTOR) and c in COLLECTOR_ACCEPTED)]
    assert not unexpected, unexpected
