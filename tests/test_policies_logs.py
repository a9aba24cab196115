"""request-logs-redacted through the analyzer the Pulumi CLI uses: a model server that logs prompts
passes only beside a redacting collector on its own cluster (records built by hand)."""

from __future__ import annotations

import copy
from typing import Any

from rtip.check import analyze, environment_config
from rtip.offline import Record, Resource
from serving.logpipeline import REDACTION_PROCESSOR, collector_values, vllm_request_logging_args

POLICY = "request-logs-redacted"
PROD = environment_config("prod")
DEV = environment_config("dev")
ISVC = "kubernetes:serving.kserve.io/v1beta1:InferenceService"
RUNTIME = "kubernetes:serving.kserve.io/v1alpha1:ClusterServingRuntime"
RELEASE = "kubernetes:helm.sh/v3:Release"
K8S = "pulumi:providers:kubernetes"
NS = "rtip-models"


def _resource(type_: str, name: str, inputs: dict[str, Any], provider: str | None) -> Resource:
    return Resource(type=type_, name=name, urn=f"urn:pulumi:t::rtip::{type_}::{name}", parent=None,
                    provider=f"urn:pulumi:t::rtip::{K8S}::{provider}" if provider else None,
                    dependencies=(), inputs=inputs, outputs={**inputs, "id": name}, custom=True)


def provider(name: str) -> Resource:
    return _resource(K8S, name, {"kubeconfig": "{}"}, None)


def isvc(name: str, on: str, logs: bool = True, runtime: str = "llama-vllm") -> Resource:
    args = ["--model=/mnt/models", *(vllm_request_logging_args() if logs else [])]
    return _resource(ISVC, name, {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                                  "metadata": {"name": name, "namespace": NS},
                                  "spec": {"predictor": {"model": {"runtime": runtime, "args": args}}}}, on)


def collector(name: str, on: str, values: dict[str, Any] | None = None) -> Resource:
    values = values if values is not None else collector_values(
        "aws", models_namespace=NS, cluster="c", location="us-east-1")
    return _resource(RELEASE, name, {"name": "opentelemetry-collector", "chart": "opentelemetry-collector",
                                     "version": "0.170.0", "namespace": "rtip-logs", "values": values}, on)


def flagged(*resources: Resource, config: dict[str, Any] = PROD) -> set[str]:
    record = Record(stack="t", resources=[provider("east"), provider("west"), *resources])
    return {v.urn.rsplit("::", 1)[-1] for v in analyze(record, config) if v.policy == POLICY}


def broken(change: Any) -> dict[str, Any]:
    values = collector_values("aws", models_namespace=NS, cluster="c", location="us-east-1")
    changed = copy.deepcopy(values)
    change(changed["alternateConfig"])
    return changed


def test_a_logging_server_beside_a_redacting_collector_passes() -> None:
    assert flagged(isvc("llama", "east"), collector("logs", "east")) == set()


def test_a_server_that_does_not_log_prompts_needs_no_collector() -> None:
    assert flagged(isvc("llama", "east", logs=False)) == set()


def test_a_logging_server_without_a_collector_fails() -> None:
    assert flagged(isvc("llama", "east")) == {"llama"}


def test_the_collector_must_run_on_the_same_cluster() -> None:
    assert flagged(isvc("llama", "east"), collector("logs", "west")) == {"llama"}
    assert flagged(isvc("llama", "east"), isvc("qwen", "west"), collector("logs", "west")) == {"llama"}


def test_the_flag_on_the_runtime_counts_too() -> None:
    runtime = _resource(RUNTIME, "llama-vllm", {"metadata": {"name": "llama-vllm"}, "spec": {"containers": [
        {"name": "kserve-container", "args": ["--port=8080", "--enable-log-requests"]}]}}, "east")
    assert flagged(isvc("llama", "east", logs=False), runtime) == {"llama"}


def test_a_collector_that_does_not_redact_everything_fails() -> None:
    def reorder(config: dict[str, Any]) -> None:
        pipeline = config["service"]["pipelines"]["logs"]
        pipeline["processors"] = ["memory_limiter", "batch", REDACTION_PROCESSOR]

    def drop_processor(config: dict[str, Any]) -> None:
        del config["processors"][REDACTION_PROCESSOR]

    def drop_rule(config: dict[str, Any]) -> None:
        config["processors"][REDACTION_PROCESSOR]["log_statements"].pop()

    def ignore_errors(config: dict[str, Any]) -> None:
        config["processors"][REDACTION_PROCESSOR]["error_mode"] = "ignore"

    def second_pipeline(config: dict[str, Any]) -> None:
        config["service"]["pipelines"]["logs/raw"] = {
            "receivers": ["filelog/models"], "processors": ["batch"], "exporters": ["awscloudwatchlogs"]}

    def other_namespace(config: dict[str, Any]) -> None:
        config["receivers"]["filelog/models"]["include"] = ["/var/log/pods/rtip-system_*/*/*.log"]

    for change in (reorder, drop_processor, drop_rule, ignore_errors, second_pipeline, other_namespace):
        assert flagged(isvc("llama", "east"), collector("logs", "east", broken(change))) == {"llama"}, \
            change.__name__


def test_a_second_collector_reading_the_prompts_unredacted_fails() -> None:
    # Beside a redacting collector, a second release tails the same pod logs with no redaction:
    # it would ship the prompts as they are.
    def no_redaction(config: dict[str, Any]) -> None:
        del config["processors"][REDACTION_PROCESSOR]
        config["service"]["pipelines"]["logs"]["processors"] = ["batch"]

    raw = collector("raw", "east", broken(no_redaction))
    assert flagged(isvc("llama", "east"), collector("logs", "east"), raw) == {"llama"}
    # A second collector that reads another namespace's files is none of this server's business.
    def elsewhere(config: dict[str, Any]) -> None:
        no_redaction(config)
        config["receivers"]["filelog/models"]["include"] = ["/var/log/pods/rtip-system_*/*/*.log"]

    other = collector("other", "east", broken(elsewhere))
    assert flagged(isvc("llama", "east"), collector("logs", "east"), other) == set()


def test_dev_only_advises_nothing_and_prod_is_mandatory() -> None:
    assert flagged(isvc("llama", "east"), config=DEV) == set()
    assert DEV[POLICY] == {"enforcementLevel": "advisory", "requireRedaction": False}
    record = Record(stack="t", resources=[provider("east"), isvc("llama", "east")])
    [violation] = [v for v in analyze(record, PROD) if v.policy == POLICY]
    assert violation.enforcement == "mandatory"


def test_the_shipped_prod_record_passes_and_fails_without_its_collectors() -> None:
    from tests.conftest import record_of

    prod = record_of("prod")
    assert not [v for v in analyze(prod, PROD) if v.policy == POLICY]
    logging = {r.name for r in prod.by_type(ISVC)
               if "--enable-log-requests" in r.inputs["spec"]["predictor"]["model"]["args"]}
    assert logging  # prod's posture logs prompts
    collectors = {r.urn for r in prod.by_type(RELEASE) if r.inputs.get("chart") == "opentelemetry-collector"}
    assert len(collectors) == len(prod.by_type("pulumi:providers:kubernetes"))  # one per cluster
    stripped = Record(stack=prod.stack, resources=[r for r in prod.resources if r.urn not in collectors])
    assert {v.urn.rsplit("::", 1)[-1] for v in analyze(stripped, PROD) if v.policy == POLICY} == logging
