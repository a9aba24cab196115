"""Prompt/response logs: vLLM request logging, collected by an OpenTelemetry Collector that redacts first.

What gets logged, and where (vLLM v0.11)
  Request logging is off by default. `--enable-log-requests` makes the OpenAI server's `RequestLogger`
  write, at INFO, one line per request to the container's stdout: `Received request <id>: prompt: <repr of
  the prompt>, params: SamplingParams(...), prompt_token_ids: [...], prompt_embeds shape: ..., lora_request:
  ....`; `--enable-log-outputs` (only together with the former) adds `Generated response <id>: output:
  <repr>, output_token_ids: [...], finish_reason: ...`. `--max-log-len N` truncates the logged prompt/output
  to N characters and the token id lists to N ids. The prompt is logged with `%r`, so newlines arrive as the
  two characters `\\n` (the redaction table is tested on such lines). Uvicorn's access log adds the client
  address per request. Kubernetes writes the container's stdout to
  `/var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log` on the node (CRI format); those files are the
  input.

Pipeline
  A DaemonSet collector (chart `opentelemetry-collector` 0.170.0, contrib distribution: it is the one that
  has filelog + transform + the AWS/GCP/Azure log exporters) tails
  `/var/log/pods/<models-namespace>_*/*/*.log` (every container of the models namespace), parses the CRI
  envelope, then runs ONE pipeline: `filelog -> transform/redact -> memory_limiter -> batch -> <cloud
  exporter>`. `transform/redact` holds one `replace_pattern` on the log body and one `replace_all_patterns`
  over every log attribute value per rule of `serving.redaction.RULES`, in table order, with `error_mode:
  propagate` (a statement that fails drops the batch instead of exporting it unredacted). There is no OTLP
  receiver and no other pipeline, so nothing reaches an exporter without passing the redaction first. The
  collector cannot run the table's validators (Luhn, mod-97, ...): it redacts every pattern match, a
  superset of the Python side (see `serving.redaction`).

`alternateConfig` is used instead of `config` so the chart's default receivers (otlp, jaeger, zipkin,
prometheus) and their metrics/traces pipelines are not merged in; every container port is disabled.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from serving.charts import ChartKey, image
from serving.redaction import RULES, Rule

# The chart (serving/charts.py pins it) and the image key of its contrib distribution at the chart's
# appVersion; the chart requires image.repository to be set (no default since 0.88).
CHART = ChartKey.OTEL_COLLECTOR
IMAGE_KEY = "otel-collector"
COMMAND_NAME = "otelcol-contrib"
# The collector's Kubernetes service account: each cloud binds its log-writing identity to it.
SERVICE_ACCOUNT = "log-collector"
# The node's name, for AWS's per-node log stream: the chart sets OTEL_K8S_NODE_NAME from
# spec.nodeName in every pod (templates/_pod.tpl at opentelemetry-collector-0.170.0, commit f5178cb).
NODE_NAME_ENV = "OTEL_K8S_NODE_NAME"
# Where the Azure exporter's connection string is mounted from its Secret (key `connection-string`).
AZURE_SECRET_KEY = "connection-string"
AZURE_SECRET_DIR = "/var/run/secrets/rtip-appinsights"
AZURE_SECRET_FILE = f"{AZURE_SECRET_DIR}/{AZURE_SECRET_KEY}"

REDACTION_PROCESSOR = "transform/redact"
RECEIVER = "filelog/models"
CHECKPOINT_DIR = "/var/lib/otelcol/rtip-logs"  # filelog offsets survive a collector restart
DEFAULT_MAX_LOG_LEN = 4096  # characters of prompt/output per vLLM log line
_CHART_PORTS = ("otlp", "otlp-http", "jaeger-compact", "jaeger-thrift", "jaeger-grpc", "zipkin", "metrics")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def vllm_request_logging_args(max_log_len: int = DEFAULT_MAX_LOG_LEN, *,
                              log_outputs: bool = True) -> list[str]:
    """vLLM v0.11 server arguments that log prompts (and outputs) to stdout, truncated to `max_log_len`."""
    if max_log_len <= 0:
        raise ValueError(f"max_log_len must be positive, got {max_log_len}")
    args = ["--enable-log-requests"]
    if log_outputs:
        args.append("--enable-log-outputs")
    return [*args, "--max-log-len", str(max_log_len)]


# --- OTTL ------------------------------------------------------------------------------------------------


def ottl_string(value: str) -> str:
    """An OTTL string literal. OTTL lexes `"(\\\\.|[^\\\\"])*"` and unquotes with Go's strconv.Unquote, so a
    backslash and a double quote are escaped; the table's patterns are printable ASCII, anything else is
    refused rather than escaped in a way the tests do not cover."""
    if not value.isascii() or not value.isprintable():
        raise ValueError(f"OTTL literal must be printable ASCII: {value!r}")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def redaction_statements(rules: tuple[Rule, ...] = RULES) -> list[str]:
    """Per rule, in table order: redact the log body, then every string attribute value."""
    statements: list[str] = []
    for rule in rules:
        pattern, replacement = ottl_string(rule.pattern), ottl_string(rule.replacement)
        statements.append(f"replace_pattern(log.body, {pattern}, {replacement})")
        statements.append(f'replace_all_patterns(log.attributes, "value", {pattern}, {replacement})')
    return statements


# --- exporters per cloud ---------------------------------------------------------------------------------


def log_group_name(cluster: str) -> str:
    """The CloudWatch Logs group an AWS cluster's collector writes to (the stack creates it)."""
    return f"/rtip/{cluster}/inference"


def log_name(cluster: str) -> str:
    """The Cloud Logging log name a GCP cluster's collector writes under."""
    return f"rtip-{cluster}-inference"



@dataclass(frozen=True)
class CloudExporter:
    component: str  # exporter id in the collector config
    config: Callable[[str, str], dict[str, Any]]  # (cluster, region or project) -> exporter config
    identity: str  # what the collector's service account needs


EXPORTERS: dict[str, CloudExporter] = {
    "aws": CloudExporter(
        "awscloudwatchlogs",
        lambda cluster, region: {"region": region, "log_group_name": log_group_name(cluster),
                                 "log_stream_name": "${env:" + NODE_NAME_ENV + "}"},
        "EKS Pod Identity role with logs:CreateLogStream and logs:PutLogEvents on the one log group "
        "the stack creates (components/aws/logs.py)"),
    "gcp": CloudExporter(
        "googlecloud",
        lambda cluster, project: {"project": project,
                                  "log": {"default_log_name": log_name(cluster)}},
        "Workload Identity bound to a Google service account with roles/logging.logWriter "
        "(components/gcp/logs.py)"),
    "azure": CloudExporter(
        "azuremonitor",
        # The `file` config provider (in the contrib distribution's manifest, opentelemetry-collector-
        # releases distributions/otelcol-contrib/manifest.yaml `providers`) reads the Secret's
        # mounted key at start: a file, not an environment variable in the pod spec.
        lambda cluster, _region: {"connection_string": "${file:" + AZURE_SECRET_FILE + "}"},
        "Application Insights connection string from the Secret named in `azure_secret` "
        "(components/azure/logs.py)"),
}


# --- Helm values -----------------------------------------------------------------------------------------


def image_values(ref: str) -> dict[str, str]:
    """The chart's `image` from a full reference: by digest where it has one (the chart then
    pulls `repository@digest`, templates/_pod.tpl), else by tag."""
    name, _, digest = ref.partition("@")
    if digest:
        return {"repository": name, "digest": digest, "pullPolicy": "IfNotPresent"}
    repository, _, tag = name.rpartition(":")
    if not repository or "/" in tag:
        raise ValueError(f"collector image {ref!r} has no tag or digest")
    return {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"}


def collector_values(cloud: str, *, models_namespace: str, cluster: str, location: str,
                     image_ref: str | None = None,
                     service_account_annotations: dict[str, str] | None = None,
                     azure_secret: str = "rtip-appinsights") -> dict[str, Any]:
    """Helm values for chart opentelemetry-collector 0.170.0: a redacting DaemonSet log collector.

    `location` is the AWS region or the GCP project (unused on Azure); `image_ref` the contrib
    image as the region's registry serves it (default: the upstream reference);
    `service_account_annotations` bind the collector's service account to its cloud identity."""
    if cloud not in EXPORTERS:
        raise ValueError(f"unknown cloud {cloud!r}; expected one of {sorted(EXPORTERS)}")
    if not _DNS1123_LABEL.fullmatch(models_namespace):
        raise ValueError(f"models_namespace must be a DNS-1123 label, got {models_namespace!r}")
    exporter = EXPORTERS[cloud]
    config = {
        "extensions": {
            "health_check": {"endpoint": "${env:MY_POD_IP}:13133"},  # the chart's probes need it
            "file_storage": {"directory": CHECKPOINT_DIR},
        },
        "receivers": {
            RECEIVER: {
                "include": [f"/var/log/pods/{models_namespace}_*/*/*.log"],
                "start_at": "end",
                "storage": "file_storage",
                "include_file_path": True,
                "include_file_name": False,
                "operators": [{"type": "container", "id": "container-parser", "max_log_size": 102400}],
            },
        },
        "processors": {
            REDACTION_PROCESSOR: {"error_mode": "propagate", "log_statements": redaction_statements()},
            "memory_limiter": {"check_interval": "5s", "limit_percentage": 80, "spike_limit_percentage": 25},
            "batch": {},
        },
        "exporters": {exporter.component: exporter.config(cluster, location)},
        "service": {
            "extensions": ["health_check", "file_storage"],
            "pipelines": {
                "logs": {
                    "receivers": [RECEIVER],
                    "processors": [REDACTION_PROCESSOR, "memory_limiter", "batch"],
                    "exporters": [exporter.component],
                },
            },
        },
    }
    values: dict[str, Any] = {
        "mode": "daemonset",
        "image": image_values(image_ref or image(IMAGE_KEY)),
        "command": {"name": COMMAND_NAME},
        # It never calls the Kubernetes API (no k8sattributes, no presets): no token in the pod. The
        # cloud identities bring their own projected tokens (EKS Pod Identity) or none (GKE).
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT,
                           "annotations": dict(service_account_annotations or {}),
                           "automountServiceAccountToken": False},
        "alternateConfig": config,
        "ports": {name: {"enabled": False} for name in _CHART_PORTS},
        # Pod log files are root-owned 0640 and the checkpoint directory is a hostPath: read as root, with
        # no capabilities, no privilege escalation and a read-only root filesystem.
        # Root as the files' owner needs no capability (owner permissions apply), so ALL are dropped.
        "podSecurityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "securityContext": {
            "runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "extraVolumes": [
            {"name": "pod-logs", "hostPath": {"path": "/var/log/pods", "type": "Directory"}},
            {"name": "filelog-checkpoints",
             "hostPath": {"path": CHECKPOINT_DIR, "type": "DirectoryOrCreate"}},
        ],
        "extraVolumeMounts": [
            {"name": "pod-logs", "mountPath": "/var/log/pods", "readOnly": True},
            {"name": "filelog-checkpoints", "mountPath": CHECKPOINT_DIR},
        ],
        # Model nodes carry GPU taints; the collector must run wherever a model pod can.
        "tolerations": [{"operator": "Exists"}],
        # The chart sets GOMEMLIMIT from the memory limit (useGOMEMLIMIT), so the collector's
        # garbage collector works to stay under it; memory_limiter refuses data above 80%.
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                      "limits": {"cpu": "1", "memory": "512Mi"}},
    }
    if cloud == "azure":
        item = {"key": AZURE_SECRET_KEY, "path": AZURE_SECRET_KEY}
        values["extraVolumes"].append({"name": "appinsights", "secret": {"secretName": azure_secret,
                                                                        "items": [item]}})
        values["extraVolumeMounts"].append({"name": "appinsights", "mountPath": AZURE_SECRET_DIR,
                                            "readOnly": True})
    return values
