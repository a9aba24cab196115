"""The redacting collector: chart schema, no bypass, OTTL literal round-trip, and a replay through RE2."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import jsonschema
import pytest
import re2
import yaml

from serving import charts, logpipeline
from serving.logpipeline import (
    EXPORTERS,
    REDACTION_PROCESSOR,
    collector_values,
    redaction_statements,
    vllm_request_logging_args,
)
from serving.redaction import RULES, redact
from tests.conftest import SHARED
from tests.test_redaction import ALL_TEXTS

CHART = SHARED / "charts" / "opentelemetry-collector" / "0.170.0"
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())
# The schema names only "http://json-schema.org/schema#" and uses `$defs` (2019-09+): check it as 2020-12.
SCHEMA = jsonschema.Draft202012Validator(json.loads((CHART / "values.schema.json").read_text()))
CLOUDS = sorted(EXPORTERS)
# OTTL's lexer rule for string literals (pkg/ottl grammar: `"(\\.|[^\\"])*"`), then Go strconv.Unquote.
OTTL_STRING = re.compile(r'"((?:\\.|[^\\"])*)"')
STATEMENT = re.compile(r'^(replace_pattern\(log\.body, |replace_all_patterns\(log\.attributes, "value", )'
                       r'("(?:\\.|[^\\"])*"), ("(?:\\.|[^\\"])*")\)$')


def _values(cloud: str) -> dict[str, Any]:
    return collector_values(cloud, models_namespace="models", cluster="prod", location="eu-west-1")


def _helm_merge(defaults: Any, overrides: Any) -> Any:
    """Helm's coalescing of user values over chart defaults: maps merge, everything else is replaced."""
    if isinstance(defaults, dict) and isinstance(overrides, dict):
        out = copy.deepcopy(defaults)
        for key, value in overrides.items():
            out[key] = _helm_merge(defaults.get(key), value) if key in defaults else value
        return out
    return overrides


def _go_unquote(literal: str) -> str:
    """strconv.Unquote for the escapes the generator may emit; any other escape is a test failure."""
    body = literal[1:-1]
    assert set(re.findall(r"\\(.)", body)) <= {"\\", '"'}, literal
    return json.loads(literal)  # JSON decodes \\ and \" exactly like Go


@pytest.mark.parametrize("cloud", CLOUDS)
def test_values_pass_the_chart_schema(cloud):
    SCHEMA.validate(_helm_merge(DEFAULTS, _values(cloud)))


def test_the_schema_check_can_fail():
    bad = _helm_merge(DEFAULTS, {**_values("aws"), "mode": "sidecar"})
    with pytest.raises(jsonschema.ValidationError):
        SCHEMA.validate(bad)


@pytest.mark.parametrize("cloud", CLOUDS)
def test_every_key_set_exists_in_the_chart_values(cloud):
    """Walk our values beside values.yaml; stop where the chart's default is free-form (an empty map, a list
    or a scalar: config, volumes, resources, securityContext...)."""
    def walk(ours: dict[str, Any], theirs: dict[str, Any], path: str) -> None:
        for key, value in ours.items():
            assert key in theirs, f"{path}{key} is not in the chart's values.yaml"
            if isinstance(value, dict) and isinstance(theirs[key], dict) and theirs[key]:
                walk(value, theirs[key], f"{path}{key}.")
    walk(_values(cloud), DEFAULTS, "")


@pytest.mark.parametrize("cloud", CLOUDS)
def test_no_pipeline_bypasses_redaction(cloud):
    config = _values(cloud)["alternateConfig"]
    pipelines = config["service"]["pipelines"]
    assert pipelines, "no pipeline"
    for name, pipeline in pipelines.items():
        assert pipeline["processors"][0] == REDACTION_PROCESSOR, name
        assert set(pipeline["receivers"]) <= set(config["receivers"])
        assert set(pipeline["exporters"]) == {EXPORTERS[cloud].component}
    # Every receiver feeds a pipeline (an unused one would be dead config), and there is no OTLP entry point.
    assert {r for p in pipelines.values() for r in p["receivers"]} == set(config["receivers"])
    assert not any(r.startswith("otlp") for r in config["receivers"])
    assert config["processors"][REDACTION_PROCESSOR]["error_mode"] == "propagate"


def test_daemonset_reads_only_the_models_namespace_and_opens_no_port():
    values = _values("gcp")
    assert values["mode"] == "daemonset"
    receiver = values["alternateConfig"]["receivers"][logpipeline.RECEIVER]
    assert receiver["include"] == ["/var/log/pods/models_*/*/*.log"]
    assert all(not port["enabled"] for port in values["ports"].values())
    assert set(values["ports"]) == set(DEFAULTS["ports"])  # every default port is switched off
    mounts = {m["mountPath"]: m for m in values["extraVolumeMounts"]}
    assert mounts["/var/log/pods"]["readOnly"] is True
    with pytest.raises(ValueError):
        collector_values("gcp", models_namespace="Models_ns", cluster="c", location="p")
    with pytest.raises(ValueError):
        collector_values("onprem", models_namespace="models", cluster="c", location="p")


def test_image_is_the_pinned_contrib_distribution_of_the_charts_app_version():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = _values("aws")
    assert DEFAULTS["image"]["repository"] == ""  # the chart has no default image: we must set one
    assert values["image"]["repository"] == "docker.io/otel/opentelemetry-collector-contrib"
    assert values["image"]["tag"] == chart["appVersion"] == "0.158.0"
    assert values["command"]["name"] == "otelcol-contrib"
    pinned = charts.chart(logpipeline.CHART)
    assert (pinned.name, pinned.version) == (chart["name"], chart["version"]) == (
        "opentelemetry-collector", "0.170.0")


def test_image_from_the_regions_registry_by_tag_or_digest():
    ecr = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/rtip/docker-hub/otel/opentelemetry-collector-contrib"
    by_tag = collector_values("aws", models_namespace="m", cluster="c", location="eu-west-1",
                              image_ref=f"{ecr}:0.158.0")["image"]
    assert (by_tag["repository"], by_tag["tag"]) == (ecr, "0.158.0")
    digest = "sha256:" + "ab" * 32
    by_digest = collector_values("aws", models_namespace="m", cluster="c", location="eu-west-1",
                                 image_ref=f"{ecr}@{digest}")["image"]
    assert (by_digest["repository"], by_digest["digest"]) == (ecr, digest) and "tag" not in by_digest
    with pytest.raises(ValueError):
        logpipeline.image_values("registry.example:5000/otel")


def test_service_account_carries_the_binding_and_no_token():
    values = collector_values("gcp", models_namespace="m", cluster="c", location="p",
                              service_account_annotations={"iam.gke.io/gcp-service-account": "x@p.iam"})
    account = values["serviceAccount"]
    assert account == {"create": True, "name": logpipeline.SERVICE_ACCOUNT,
                       "annotations": {"iam.gke.io/gcp-service-account": "x@p.iam"},
                       "automountServiceAccountToken": False}


def test_statements_round_trip_to_the_table():
    statements = redaction_statements()
    assert len(statements) == 2 * len(RULES)
    for i, rule in enumerate(RULES):
        for statement in statements[2 * i: 2 * i + 2]:
            m = STATEMENT.match(statement)
            assert m, statement
            assert _go_unquote(m.group(2)) == rule.pattern
            assert _go_unquote(m.group(3)) == rule.replacement


@pytest.mark.parametrize("cloud", CLOUDS)
def test_statements_survive_yaml_helm_tpl_and_confmap(cloud):
    values = _values(cloud)
    again = yaml.safe_load(yaml.safe_dump(values))
    assert again == values
    for statement in again["alternateConfig"]["processors"][REDACTION_PROCESSOR]["log_statements"]:
        assert "{{" not in statement and "}}" not in statement  # the chart runs `tpl` on the config
        assert "$" not in statement  # collector ${...} expansion and Go's ReplaceAllString `$1`


def test_ottl_string_refuses_what_it_cannot_escape_safely():
    assert logpipeline.ottl_string('a\\b"c') == '"a\\\\b\\"c"'
    with pytest.raises(ValueError):
        logpipeline.ottl_string("line\nbreak")


def _collector_replay(text: str, statements: list[str]) -> str:
    """What the collector does to a log body: each replace_pattern(log.body, ...) in order, through RE2."""
    for statement in statements:
        m = STATEMENT.match(statement)
        assert m is not None
        if m.group(1).startswith("replace_pattern"):
            replacement = _go_unquote(m.group(3)).replace("\\", "\\\\")
            text = re2.compile(_go_unquote(m.group(2))).sub(replacement, text)
    return text


def test_collector_replay_equals_python_patterns_only_on_the_whole_corpus():
    statements = _values("azure")["alternateConfig"]["processors"][REDACTION_PROCESSOR]["log_statements"]
    for text in ALL_TEXTS:
        assert _collector_replay(text, statements) == redact(text, validate=False)[0], text


def test_azure_reads_its_connection_string_from_a_mounted_secret():
    values = _values("azure")
    [volume] = [v for v in values["extraVolumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == "rtip-appinsights"
    [mount] = [m for m in values["extraVolumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] is True
    [item] = volume["secret"]["items"]
    path = f"{mount['mountPath']}/{item['path']}"
    assert values["alternateConfig"]["exporters"]["azuremonitor"]["connection_string"] == f"${{file:{path}}}"
    assert "extraEnvs" not in values  # no secret in the environment
    assert not [v for v in _values("aws")["extraVolumes"] if "secret" in v]


def test_vllm_request_logging_args():
    assert vllm_request_logging_args(2048) == ["--enable-log-requests", "--enable-log-outputs",
                                               "--max-log-len", "2048"]
    assert vllm_request_logging_args(512, log_outputs=False) == ["--enable-log-requests",
                                                                 "--max-log-len", "512"]
    with pytest.raises(ValueError):
        vllm_request_logging_args(0)
