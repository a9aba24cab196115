"""The pages' pod-name patterns against the names Kubernetes gives a Deployment's pods
(rtip/deploycheck/pod_names.py): the API server cuts a generated name's base to 58 characters
(apiserver pkg/storage/names/generate.go: 63 less a 5-character suffix), so a long model's pods
lose the '-' before their suffix. Expected names are worked out by hand from that rule."""

from __future__ import annotations

import re2

from rtip.deploycheck.pod_names import generated_pod_names, pattern_problems
from rtip.offline import Record, Resource
from serving.simulator.prometheus import predictor_name
from serving.slo_rules import overdue_expr

NS = "rtip-models"
LONG = "m" + "x" * 38 + "z"  # the longest model name a stack allows (40 characters)


def _isvc(name: str) -> Resource:
    return Resource(type="kubernetes:serving.kserve.io/v1beta1:InferenceService", name=name,
                    urn=f"urn:pulumi:s::p::kubernetes:serving.kserve.io/v1beta1:InferenceService::{name}",
                    parent=None, provider=None, dependencies=(),
                    inputs={"metadata": {"name": name, "namespace": NS}}, outputs={}, custom=True)


def test_generated_names_follow_the_api_servers_cut() -> None:
    deployment = predictor_name(LONG)
    assert len(deployment) == 50
    names = generated_pod_names(deployment)
    assert len(names) == 10  # one per length of the template hash, 1 to 10
    # A 6-character hash: base 50 + 1 + 6 + 1 = 58 characters, kept whole.
    assert names[5] == f"{deployment}-bcdfgh-56789" and len(names[5]) == 63
    # 7 characters: base 59, cut to 58, which drops the '-' before the suffix.
    assert names[6] == f"{deployment}-bcdfghj56789" and len(names[6]) == 63
    # 10 characters: base 62, cut to 58: three hash characters and the '-' go.
    assert names[9] == f"{deployment}-bcdfghj56789"
    # A short deployment keeps both '-' at every length.
    assert generated_pod_names("a-predictor")[9] == "a-predictor-bcdfghjklm-56789"


def test_the_pages_pattern_matches_every_pod_of_the_longest_model() -> None:
    record = Record("s", [_isvc(LONG), _isvc("llama-8b")])
    for model in (LONG, "llama-8b"):
        query = overdue_expr(model, NS, predictor_name(model), 600.0)
        assert list(pattern_problems(record, None, query, "its rule")) == []


def test_a_two_segment_pattern_misses_a_long_models_cut_names() -> None:
    record = Record("s", [_isvc(LONG)])
    deployment = predictor_name(LONG)
    old = f'kube_pod_created{{namespace="{NS}",pod=~"{deployment}-[a-z0-9]+-[a-z0-9]+"}}'
    (problem,) = pattern_problems(record, None, old, "its rule R")
    assert f"misses {deployment}'s pod {deployment}-bcdfghj56789" in problem
    assert problem.startswith("its rule R selects kube_pod_created")
    other = f'kube_pod_created{{namespace="{NS}",pod=~"someone-else-.+"}}'
    (problem,) = pattern_problems(record, None, other, "its rule R")
    assert problem.endswith(f"matches the pods of no Deployment in namespace {NS}")
    # Series of other families, or without a namespace, are not asked.
    assert list(pattern_problems(record, None, 'up{namespace="x",pod=~"y"}', "q")) == []


def test_no_model_s_pattern_matches_another_model_s_pods() -> None:
    """Every predictor's name ends in `-predictor`, so another model whose name extends this
    one's predictor name has at least two more segments, cut or not (read by RE2, anchored as
    Prometheus anchors a matcher)."""
    for model, other in (("m", "m-predictor-y"), (LONG[:20], LONG[:20] + "-predictor-y")):
        pattern = overdue_expr(model, NS, predictor_name(model), 600.0).split('pod=~"')[1].split('"')[0]
        compiled = re2.compile(f"^(?:{pattern})$")
        assert all(compiled.search(n) for n in generated_pod_names(predictor_name(model)))
        assert not any(compiled.search(n) for n in generated_pod_names(predictor_name(other)))
