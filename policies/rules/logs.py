"""Request logs: a model server that logs prompts does so only where a collector redacts them first.

vLLM writes prompts (and outputs) to stdout with `--enable-log-requests` (serving/logpipeline.py).
Outside dev (config `requireRedaction`), every model server started with it, as an
InferenceService argument or in its ClusterServingRuntime's container, needs on the same cluster
(the same Kubernetes provider) an OpenTelemetry Collector release whose configuration
- reads that server's namespace's pod logs (a filelog receiver including `/var/log/pods/<ns>_...`),
- sends every logs pipeline through the redaction processor before any other processor and any
  exporter, with every statement the rule table generates (serving.redaction via
  serving.logpipeline) and `error_mode: propagate` (a failing statement drops the batch rather
  than exporting it unredacted),
- and has at least one logs pipeline.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policies.rules.base import Config, StackResource, get
from serving.logpipeline import REDACTION_PROCESSOR, redaction_statements

ISVC = "kubernetes:serving.kserve.io/v1beta1:InferenceService"
RUNTIME = "kubernetes:serving.kserve.io/v1alpha1:ClusterServingRuntime"
RELEASE = "kubernetes:helm.sh/v3:Release"
COLLECTOR_CHART = "opentelemetry-collector"
LOGS_PROMPTS = "--enable-log-requests"
_STATEMENTS = frozenset(redaction_statements())


def _args(container: Any) -> list[str]:
    return [str(a) for a in get(container, "args", default=[])]


def _collector_config(values: Mapping[str, Any]) -> Mapping[str, Any]:
    # The chart uses `alternateConfig` instead of `config` when it is set.
    alternate = get(values, "alternateConfig", default={})
    return alternate if alternate else get(values, "config", default={})


def redaction_problems(values: Mapping[str, Any], namespace: str) -> list[str]:
    """Why a collector with these chart values does not redact `namespace`'s logs ([] if it does)."""
    config = _collector_config(values)
    problems: list[str] = []
    processor = get(config, "processors", REDACTION_PROCESSOR, default=None)
    if processor is None:
        return [f"it has no {REDACTION_PROCESSOR} processor"]
    missing = _STATEMENTS - {str(s) for s in get(processor, "log_statements", default=[])}
    if missing:
        problems.append(f"its {REDACTION_PROCESSOR} lacks {len(missing)} of the rule table's statements")
    if get(processor, "error_mode", default="propagate") != "propagate":
        problems.append(f"its {REDACTION_PROCESSOR} does not propagate errors (a failed statement "
                        "would export the entry unredacted)")
    pipelines = {name: p for name, p in get(config, "service", "pipelines", default={}).items()
                 if name == "logs" or str(name).startswith("logs/")}
    if not pipelines:
        problems.append("it has no logs pipeline")
    for name, pipeline in pipelines.items():
        processors = list(get(pipeline, "processors", default=[]))
        if not processors or processors[0] != REDACTION_PROCESSOR:
            problems.append(f"pipeline {name} does not start with {REDACTION_PROCESSOR}")
    receivers = {r for p in pipelines.values() for r in get(p, "receivers", default=[])}
    prefix = f"/var/log/pods/{namespace}_"
    reads = any(str(path).startswith(prefix)
                for r in receivers if str(r).split("/")[0] == "filelog"
                for path in get(config, "receivers", r, "include", default=[]))
    if not reads:
        problems.append(f"no redacted pipeline reads namespace {namespace}'s pod logs")
    return problems


def reads_namespace(values: Mapping[str, Any], namespace: str) -> bool:
    """Whether any filelog receiver of a collector with these values tails `namespace`'s pod
    logs, wired into a pipeline or not (a receiver can be added to one later)."""
    prefix = f"/var/log/pods/{namespace}_"
    receivers = get(_collector_config(values), "receivers", default={}) or {}
    return any(str(path).startswith(prefix)
               for name, receiver in receivers.items() if str(name).split("/")[0] == "filelog"
               for path in get(receiver, "include", default=[]))


def request_logs_redacted(resources: list[StackResource], config: Config) -> Iterator[tuple[str, str]]:
    if not config.get("requireRedaction"):
        return
    collectors: dict[str | None, list[StackResource]] = {}
    for r in resources:
        if r.type == RELEASE and get(r.props, "chart") == COLLECTOR_CHART:
            collectors.setdefault(r.provider, []).append(r)
    runtimes = {(r.provider, get(r.props, "metadata", "name")): r for r in resources if r.type == RUNTIME}
    for isvc in (r for r in resources if r.type == ISVC):
        model = get(isvc.props, "spec", "predictor", "model", default={})
        runtime = runtimes.get((isvc.provider, get(model, "runtime")))
        runtime_args = [a for c in get(runtime.props if runtime else {}, "spec", "containers", default=[])
                        for a in _args(c)]
        if LOGS_PROMPTS not in _args(model) + runtime_args:
            continue
        ns = str(get(isvc.props, "metadata", "namespace", default="default"))
        here = collectors.get(isvc.provider, [])
        if not here:
            yield isvc.urn, (f"the model server logs prompts ({LOGS_PROMPTS}) and no log collector "
                             "runs on its cluster to redact them")
            continue
        verdicts = [redaction_problems(get(c.props, "values", default={}), ns) for c in here]
        # Every collector that tails this namespace must redact, not just one of them: a second
        # release reading the same files would ship the prompts as they are.
        leaking = [(c, v) for c, v in zip(here, verdicts, strict=True)
                   if v and reads_namespace(get(c.props, "values", default={}), ns)]
        if leaking:
            c, v = leaking[0]
            yield isvc.urn, (f"the model server logs prompts ({LOGS_PROMPTS}) and log collector "
                             f"{get(c.props, 'name', default=c.urn)} reads them without redacting: "
                             f"{'; '.join(v)}")
        elif all(verdicts):
            yield isvc.urn, (f"the model server logs prompts ({LOGS_PROMPTS}) but its cluster's log "
                             f"collector does not redact them: {'; '.join(min(verdicts, key=len))}")


__all__ = ["reads_namespace", "redaction_problems", "request_logs_redacted"]
