"""The pages' pod-name patterns against the names Kubernetes gives a Deployment's pods
(rtip/deploycheck/pod_names.py): the API server cuts a generated name's base to 58 characters
(apiserver pkg/storage/names/generate.go: 63 less a 5-character suffix), so a long model's pods
lose the '-' before their suffix. Expected names are worked out by hand from that rule."""

from __future__ import annotations

import re2

from rtip.deploycheck.pod_names import generated_pod_names, pattern_problems
from rtip.offline import Record, Resource
from serving.kube_names import predictor_name
from serving.simulator.prometheus import pod_name
from serving.slo_rules import overdue_expr

NS = "rtip-models"
LONG = "m" + "x" * 38 + "z"  # the longest model name a stack allows (40 characters)
ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery util/rand: what a generated suffix draws from


def _isvc(name: str) -> Resource:
    return Resource(type="kubernetes:serving.kserve.io/v1beta1:InferenceService", name=name,
                    urn=f"urn:pulumi:s::p::kubernetes:serving.kserve.io/v1beta1:InferenceService::{name}",
                    parent=None, provider=None, dependencies=(),
                    inputs={"metadata": {"name": name, "namespace": NS}}, outputs={}, custom=True)


def test_generated_names_follow_the_api_servers_cut() -> None:
    deployment = predictor_name(LONG)
    assert len(deployment) == 50
    names = generated_pod_names(deployment)
    # Each hash length 1-10, with six suffixes that spell apimachinery's 27-character alphabet.
    assert len(names) == 60
    suffixes = {n[-5:] for n in names}
    assert "".join(sorted(set("".join(suffixes)))) == "".join(sorted(ALPHANUMS))
    # A 6-character hash: base 50 + 1 + 6 + 1 = 58 characters, kept whole.
    assert names[5 * 6] == f"{deployment}-456789-bcdfg" and len(names[5 * 6]) == 63
    # 7 characters: base 59, cut to 58, which drops the '-' before the suffix.
    assert names[6 * 6] == f"{deployment}-456789bbcdfg" and len(names[6 * 6]) == 63
    # 10 characters: base 62, cut to 58: three hash characters and the '-' go.
    assert names[9 * 6] == f"{deployment}-456789bbcdfg"
    # A short deployment keeps both '-' at every length.
    assert generated_pod_names("a-predictor")[9 * 6] == "a-predictor-456789bcdf-bcdfg"


def test_the_pages_pattern_matches_every_pod_of_the_longest_model() -> None:
    record = Record("s", [_isvc(LONG), _isvc("llama-8b")])
    for model in (LONG, "llama-8b"):
        query = overdue_expr(NS, predictor_name(model), 600)
        assert list(pattern_problems(record, None, query, "its rule")) == []


def test_a_two_segment_pattern_misses_a_long_models_cut_names() -> None:
    record = Record("s", [_isvc(LONG)])
    deployment = predictor_name(LONG)
    old = f'kube_pod_created{{namespace="{NS}",pod=~"{deployment}-[a-z0-9]+-[a-z0-9]+"}}'
    (problem,) = pattern_problems(record, None, old, "its rule R")
    assert f"misses {deployment}'s pod {deployment}-456789bbcdfg" in problem
    assert problem.startswith("its rule R selects kube_pod_created")
    other = f'kube_pod_created{{namespace="{NS}",pod=~"someone-else-.+"}}'
    (problem,) = pattern_problems(record, None, other, "its rule R")
    assert problem.endswith(f"matches the pods of no Deployment in namespace {NS}")
    # Series of other families, or without a namespace, are not asked.
    assert list(pattern_problems(record, None, 'up{namespace="x",pod=~"y"}', "q")) == []
    # A pattern that leaves out a letter of the suffixes' alphabet (x) misses real pods.
    chars = "[bcdfghjklmnpqrstvwz2456789]+"
    narrow = f'kube_pod_created{{namespace="{NS}",pod=~"{deployment}-{chars}(-{chars})?"}}'
    (problem,) = pattern_problems(record, None, narrow, "its rule R")
    assert f"misses {deployment}'s pod {deployment}-4-tvwxz" in problem


def test_a_pattern_re2_refuses_is_reported_not_skipped() -> None:
    """Prometheus compiles `=~` with Go's RE2, which has no backreferences or lookarounds: a
    rule written with one fails to load, so the check says so instead of passing it."""
    record = Record("s", [_isvc("llama-8b")])
    deployment = predictor_name("llama-8b")
    for bad in (f"{deployment}-(?=x).+", f"({deployment})-\\1"):
        query = f'kube_pod_created{{namespace="{NS}",pod=~"{bad}"}}'
        (problem,) = pattern_problems(record, None, query, "its rule R")
        said = f'its rule R selects kube_pod_created{{pod=~"{bad}"}}'
        assert problem.startswith(f"{said}, which is no RE2 pattern (")


def test_no_model_s_pattern_matches_another_model_s_pods() -> None:
    """A model, and another named after its predictor (`<model>-predictor`, both valid names):
    cut to 58 characters, the other's pods read `<model>-predictor-predictor<hash><suffix>`, two
    segments after the first's Deployment name, which a pattern of any lowercase letters and
    digits takes (the review's case, checked with RE2). The name alphabet has no vowels, so
    `predictor` and `epp` never pass for a hash or a suffix; the check reports a pattern that
    takes two Deployments' pods."""
    model = "m" + "x" * 26  # 27 characters
    other = f"{model}-predictor"  # 37
    record = Record("s", [_isvc(model), _isvc(other)])
    page = overdue_expr(NS, predictor_name(model), 600)
    assert list(pattern_problems(record, None, page, "its rule")) == []
    pattern = page.split('pod=~"')[1].split('"')[0]
    compiled = re2.compile(f"^(?:{pattern})$")
    assert not any(compiled.search(n) for n in generated_pod_names(predictor_name(other)))
    loose = f'kube_pod_created{{namespace="{NS}",pod=~"{predictor_name(model)}-[a-z0-9]+(-[a-z0-9]+)?"}}'
    (problem,) = pattern_problems(record, None, loose, "its rule R")
    assert "matches the pods of more than one Deployment" in problem
    assert f"{predictor_name(other)}'s pod {predictor_name(other)}-" in problem


def test_the_pickers_an_inferencepool_release_renders_are_asked_too() -> None:
    """prod's record: each model's inferencepool release renders its endpoint picker
    `<model>-epp` in the models' namespace, so a pattern of any lowercase letters after the
    model's name takes the picker's pods as well as the predictor's, and is reported; the pages'
    own patterns pass (the name alphabet has no vowel, so `epp` never passes for a hash)."""
    from rtip.deploycheck.graph import cluster_of
    from rtip.deploycheck.pod_names import deployments
    from tests.conftest import record_of

    record = record_of("prod")
    isvc = next(r for r in record.resources if r.inputs.get("kind") == "InferenceService")
    model, cluster = isvc.inputs["metadata"]["name"], cluster_of(record, isvc)
    assert {f"{model}-epp", predictor_name(model)} <= set(deployments(record, cluster, NS))
    loose = f'kube_pod_created{{namespace="{NS}",pod=~"{model}-[a-z0-9]+-[a-z0-9]+(-[a-z0-9]+)?"}}'
    (problem,) = pattern_problems(record, cluster, loose, "its rule R")
    assert "matches the pods of more than one Deployment" in problem and f"{model}-epp's pod" in problem
    page = overdue_expr(NS, predictor_name(model), 600)
    assert list(pattern_problems(record, cluster, page, "its rule")) == []


def test_the_simulators_pods_are_named_as_kubernetes_names_them() -> None:
    """The simulator's pods carry a template hash and a 5-character suffix of the alphabet, so
    the pages select them as they would a cluster's: distinct for every replica."""
    pattern = overdue_expr(NS, predictor_name("m"), 600).split('pod=~"')[1].split('"')[0]
    compiled = re2.compile(f"^(?:{pattern})$")
    names = [pod_name("m", rid) for rid in range(2000)]
    assert len(set(names)) == 2000 and all(compiled.search(n) for n in names)
