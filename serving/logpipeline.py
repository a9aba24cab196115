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

from serving.redaction import RULES, Rule

CHART_NAME = "opentelemetry-collector"
CHART_REPO = "https://open-telemetry.github.io/opentelemetry-helm-charts"
CHART_VERSION = "0.170.0"
# The chart's appVersion; the chart requires image.repository to be set (no default since 0.88).
IMAGE_REPOSITORY = "otel/opentelemetry-collector-contrib"
IMAGE_TAG = "0.158.0"
COMMAND_NAME = "otelcol-contrib"

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


@dataclass(frozen=True)
class CloudExporter:
    component: str  # exporter id in the collector config
    config: Callable[[str, str], dict[str, Any]]  # (cluster, region or project) -> exporter config
    identity: str  # what the collector's service account needs


EXPORTERS: dict[str, CloudExporter] = {
    "aws": CloudExporter(
        "awscloudwatchlogs",
        lambda cluster, region: {"region": region, "log_group_name": f"/rtip/{cluster}/inference",
                                 "log_stream_name": "${env:OTEL_K8S_NODE_NAME}"},
        "IRSA or EKS Pod Identity role with logs:CreateLogStream, logs:PutLogEvents (+ CreateLogGroup)"),
    "gcp": CloudExporter(
        "googlecloud",
        lambda cluster, project: {"project": project,
                                  "log": {"default_log_name": f"rtip-{cluster}-inference"}},
        "Workload Identity bound to a Google service account with roles/logging.logWriter"),
    "azure": CloudExporter(
        "azuremonitor",
        lambda cluster, _region: {"connection_string": "${env:APPLICATIONINSIGHTS_CONNECTION_STRING}"},
        "Application Insights connection string from the Secret named in `azure_secret`"),
}


# --- Helm values -----------------------------------------------------------------------------------------


def collector_values(cloud: str, *, models_namespace: str, cluster: str, location: str,
                     azure_secret: str = "rtip-appinsights") -> dict[str, Any]:
    """Helm values for chart opentelemetry-collector 0.170.0: a redacting DaemonSet log collector.

    `location` is the AWS region or the GCP project (unused on Azure)."""
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
        "image": {"repository": IMAGE_REPOSITORY, "tag": IMAGE_TAG, "pullPolicy": "IfNotPresent"},
        "command": {"name": COMMAND_NAME},
        "alternateConfig": config,
        "ports": {name: {"enabled": False} for name in _CHART_PORTS},
        # Pod log files are root-owned 0640 and the checkpoint directory is a hostPath: read as root, with
        # no capabilities, no privilege escalation and a read-only root filesystem.
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
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
    }
    if cloud == "azure":
        values["extraEnvs"] = [{"name": "APPLICATIONINSIGHTS_CONNECTION_STRING", "valueFrom": {
            "secretKeyRef": {"name": azure_secret, "key": "connection-string"}}}]
    return values
