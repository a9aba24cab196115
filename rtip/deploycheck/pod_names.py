"""Does a rule's pod-name pattern match the pods Kubernetes will name? kube-state-metrics' pod
series carry only the pod's name, so the plan's pages select a Deployment's pods by a regex on
it; one that misses the names the API server really gives selects nothing, and the page it
feeds never fires.

How pods of a Deployment are named (Kubernetes 1.33):
- the Deployment controller names each ReplicaSet `<deployment>-<pod-template-hash>`, the hash a
  32-bit FNV sum printed in decimal and each digit mapped into the name alphabet
  (`rand.SafeEncodeString`): 1 to 10 characters of HASH_CHARS;
- the ReplicaSet controller creates its pods with `generateName: <replicaset>-`
  (controller_utils.go `getPodsPrefix`);
- the API server cuts a generated name's base to 58 characters (63 less the 5-character random
  suffix, drawn from NAME_ALPHABET) before it appends the suffix (apiserver
  pkg/storage/names/generate.go).

The names generated here run every hash length, and suffixes that use every letter of the
alphabet. A pattern must match every name of one Deployment of the namespace, and no name of any
other (a page on another model's pods would fire under this one's labels). It is read as
Prometheus reads a `=~` matcher: RE2, anchored at both ends.
"""

from __future__ import annotations

from collections.abc import Iterator

import re2

from rtip.deploycheck.graph import HELM_RELEASE, ApiKind, api_kind, cluster_of, in_namespace, object_name
from rtip.deploycheck.promql_text import matchers
from rtip.offline import Record, Resource
from serving.charts import CHARTS, ChartKey
from serving.gateway_charts import picker_name
from serving.kube_names import HASH_CHARS, MAX_NAME, NAME_ALPHABET, SUFFIX, predictor_name

MAX_HASH = 10  # digits of a uint32 in decimal


def generated_pod_names(deployment: str) -> list[str]:
    """Names a pod of `deployment` can have: for each length of its template hash, one per
    suffix of a run that spells the whole alphabet (so a pattern that drops a character misses
    one)."""
    alphabet = NAME_ALPHABET * 2
    suffixes = [alphabet[i:i + SUFFIX] for i in range(0, len(NAME_ALPHABET), SUFFIX)]
    names = []
    for length in range(1, MAX_HASH + 1):
        template_hash = (HASH_CHARS * 2)[:length]
        base = f"{deployment}-{template_hash}-"[:MAX_NAME - SUFFIX]
        names += [base + suffix for suffix in suffixes]
    return names


def deployments(record: Record, cluster: Resource | None, namespace: str) -> list[str]:
    """The Deployments the plan makes in `namespace` on `cluster`: its own, the predictor
    KServe's Standard mode makes for each InferenceService, and the endpoint picker each
    inferencepool release renders (`picker_name`). Other charts' Deployments are not known by
    name here, so a pattern is not asked of them."""
    own = [object_name(r) for r in in_namespace(record, cluster, "Deployment", namespace)
           if (api_kind(r) or ApiKind("", "", "")).group == "apps"]
    predictors = [predictor_name(object_name(r))
                  for r in in_namespace(record, cluster, "InferenceService", namespace)]
    pool_chart = CHARTS[ChartKey.INFERENCE_POOL].reference
    pickers = [picker_name(str(r.inputs.get("name"))) for r in record.by_type(HELM_RELEASE)
               if r.inputs.get("chart") == pool_chart and r.inputs.get("namespace") == namespace
               and cluster_of(record, r) == cluster]
    return sorted({*own, *predictors, *pickers})


def pattern_problems(record: Record, cluster: Resource | None, query: str, what: str) -> Iterator[str]:
    """For each `kube_pod_*{..., pod=~"..."}` of `query`: an error unless the pattern matches
    every name Kubernetes can give the pods of some Deployment of that namespace."""
    for metric, found in matchers(query):
        namespace = next((v for label, op, v in found if (label, op) == ("namespace", "=")), None)
        if not metric.startswith("kube_pod_") or namespace is None:
            continue
        for pattern in (v for label, op, v in found if (label, op) == ("pod", "=~")):
            yield from _pattern_problems(record, cluster, metric, namespace, pattern, what)


def _pattern_problems(record: Record, cluster: Resource | None, metric: str, namespace: str,
                      pattern: str, what: str) -> Iterator[str]:
    said = f'{what} selects {metric}{{pod=~"{pattern}"}}, which'
    try:
        compiled = re2.compile(f"^(?:{pattern})$")
    except re2.error as err:
        yield f"{said} is no RE2 pattern ({err})"
        return
    covered, near, strays = [], [], []
    for deployment in deployments(record, cluster, namespace):
        names = generated_pod_names(deployment)
        matched = [n for n in names if compiled.search(n)]
        if len(matched) == len(names):
            covered.append(deployment)
        elif matched:
            near.append(f"{deployment}'s pod {next(n for n in names if n not in matched)}")
        if matched:
            strays.append(f"{deployment}'s pod {matched[0]}")
    if not covered:
        yield (f"{said} misses {', '.join(near)} (a generated name's base is cut to "
               f"{MAX_NAME - SUFFIX} characters before its suffix)" if near else
               f"{said} matches the pods of no Deployment in namespace {namespace}")
    elif len(strays) > 1:
        yield f"{said} matches the pods of more than one Deployment: {', '.join(strays)}"


__all__ = ["deployments", "generated_pod_names", "pattern_problems"]
