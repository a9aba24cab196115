"""AWS registries and model-pod identity, from the offline record."""

from __future__ import annotations

import copy
import json
import re

import pytest

from rtip import offline
from rtip.stackfile import load
from stacks.naming import weights_bucket
from stacks.schema import AwsRegion
from tests.conftest import record_of, spec_of, stack_doc, write_stack


def region_of(record, res) -> str:
    return record.get(res.provider).inputs["region"]


def aws_regions(stack):
    return [r for r in spec_of(stack).regions if isinstance(r, AwsRegion)]


# Where each default image is filed: `<prefix>/<namespace>/<upstream path>` (written out by hand).
MIRRORED = {"vllm-openai": "rtip/docker-hub/vllm/vllm-openai", "vllm-rocm": "rtip/docker-hub/rocm/vllm",
            # Docker Hub files official images under `library/`.
            "node-prep": "rtip/docker-hub/library/ubuntu",
            # The front door's Docker Hub images (serving/charts.py IMAGES).
            "envoy-gateway": "rtip/docker-hub/envoyproxy/gateway",
            "envoy-proxy": "rtip/docker-hub/envoyproxy/envoy",
            "envoy-ratelimit": "rtip/docker-hub/envoyproxy/ratelimit",
            "ai-gateway-controller": "rtip/docker-hub/envoyproxy/ai-gateway-controller",
            "ai-gateway-extproc": "rtip/docker-hub/envoyproxy/ai-gateway-extproc",
            "ratelimit-redis": "rtip/docker-hub/valkey/valkey",
            # The log collector (serving/charts.py IMAGES otel-collector, docker.io/otel/...).
            "otel-collector": "rtip/docker-hub/otel/opentelemetry-collector-contrib"}


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_without_a_docker_hub_login_the_images_are_mirrored_into_the_source_region(stack) -> None:
    record = record_of(stack)
    spec = spec_of(stack)
    assert not spec.registries.upstream_credentials
    repos = record.by_type("aws:ecr/repository:Repository")
    assert sorted(r.inputs["name"] for r in repos) == sorted(MIRRORED[i] for i in spec.registries.images)
    source = aws_regions(stack)[0].region
    for repo in repos:
        assert region_of(record, repo) == source
        assert repo.inputs["imageTagMutability"] == "IMMUTABLE"
        assert repo.inputs["imageScanningConfiguration"]["scanOnPush"] is True
        enc = repo.inputs["encryptionConfigurations"][0]
        assert enc["encryptionType"] == ("KMS" if spec.is_prod else "AES256")
    # Docker Hub needs a login for an ECR pull-through cache: no rule for it without one; the
    # endpoint picker's registry.k8s.io needs none, so each AWS region has that rule.
    rules = record.by_type("aws:ecr/pullThroughCacheRule:PullThroughCacheRule")
    assert {r.inputs["upstreamRegistryUrl"] for r in rules} <= {"registry.k8s.io"}
    assert len(rules) == len(aws_regions(stack))


def test_ecr_replicates_the_mirrored_repositories_into_every_other_aws_region() -> None:
    record = record_of("prod")
    (config,) = record.by_type("aws:ecr/replicationConfiguration:ReplicationConfiguration")
    (rule,) = config.inputs["replicationConfiguration"]["rules"]
    assert sorted(d["region"] for d in rule["destinations"]) == [r.region for r in aws_regions("prod")[1:]]
    assert sorted(f["filter"] for f in rule["repositoryFilters"]) == sorted(MIRRORED.values())
    assert {f["filterType"] for f in rule["repositoryFilters"]} == {"PREFIX_MATCH"}
    assert not record_of("staging").by_type("aws:ecr/replicationConfiguration:ReplicationConfiguration")


@pytest.fixture(scope="module")
def with_login(tmp_path_factory):
    doc = copy.deepcopy(stack_doc("prod")["config"]["rtip:platform"])
    doc.setdefault("registries", {})["upstream_credentials"] = {
        "docker.io": {"username": "dockerHubUser", "token": "dockerHubToken"}}
    path = write_stack(tmp_path_factory.mktemp("login"), doc, name="login", extra={
        "rtip:dockerHubUser": {"secure": "v1:user"}, "rtip:dockerHubToken": {"secure": "v1:token"}})
    return offline.run(load(str(path)))


def test_a_docker_hub_login_gives_every_aws_region_its_own_pull_through_cache(with_login) -> None:
    record = with_login
    all_rules = record.by_type("aws:ecr/pullThroughCacheRule:PullThroughCacheRule")
    # Docker Hub, with the login; registry.k8s.io (the endpoint picker), which needs none.
    assert sorted((region_of(record, r), r.inputs["upstreamRegistryUrl"]) for r in all_rules) == sorted(
        (r.region, url) for r in aws_regions("prod") for url in ("registry-1.docker.io", "registry.k8s.io"))
    rules = {region_of(record, r): r for r in all_rules
             if r.inputs["upstreamRegistryUrl"] == "registry-1.docker.io"}
    secrets = {region_of(record, s): s for s in record.by_type("aws:secretsmanager/secret:Secret")}
    for region, rule in rules.items():
        assert rule.inputs["ecrRepositoryPrefix"] == "rtip/docker-hub"
        # CreatePullThroughCacheRule: a credential ARN matching
        # ^arn:aws:secretsmanager:[a-zA-Z0-9-:]+:secret:ecr\-pullthroughcache\/[a-zA-Z0-9\/_+=.@-]+$
        assert re.match(r"^arn:aws:secretsmanager:[a-zA-Z0-9-:]+:secret:ecr\-pullthroughcache\/"
                        r"[a-zA-Z0-9\/_+=.@-]+$", rule.inputs["credentialArn"])
        # The secret is in the rule's own region, as ECR requires.
        assert rule.inputs["credentialArn"] == secrets[region].outputs["arn"]
    for rule in all_rules:
        if rule.inputs["upstreamRegistryUrl"] == "registry.k8s.io":
            assert rule.inputs["ecrRepositoryPrefix"] == "rtip/k8s" and "credentialArn" not in rule.inputs
    for version in record.by_type("aws:secretsmanager/secretVersion:SecretVersion"):
        assert "secretString" in version.secret_paths
    templates = record.by_type("aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate")
    assert {(region_of(record, t), t.inputs["prefix"], tuple(t.inputs["appliedFors"]))
            for t in templates} == \
        {(r.region, prefix, ("PULL_THROUGH_CACHE",)) for r in aws_regions("prod")
         for prefix in ("rtip/docker-hub", "rtip/k8s")}
    # The cache serves the images: nothing to mirror, nothing to replicate.
    assert not record.by_type("aws:ecr/repository:Repository")
    images = {d.inputs["runtimeImage"] for d in record.by_type("rtip:k8s:ModelDeployment")
              if ".ecr." in d.inputs["runtimeImage"]}
    assert images == {f"123456789012.dkr.ecr.{r.region}.amazonaws.com/rtip/docker-hub/vllm/"
                      "vllm-openai:v0.11.0" for r in aws_regions("prod")}


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_a_versioned_private_weights_bucket_per_region(stack) -> None:
    record = record_of(stack)
    spec = spec_of(stack)
    buckets = {region_of(record, b): b for b in record.by_type("aws:s3/bucket:Bucket")}
    assert {r.region: weights_bucket(spec, r) for r in aws_regions(stack)} == \
        {k: b.inputs["bucket"] for k, b in buckets.items()}
    for kind in ("bucketVersioning:BucketVersioning", "bucketPublicAccessBlock:BucketPublicAccessBlock",
                 "bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"):
        per_region = {region_of(record, r): r for r in record.by_type(f"aws:s3/{kind}")}
        assert set(per_region) == set(buckets), kind
    for v in record.by_type("aws:s3/bucketVersioning:BucketVersioning"):
        assert v.inputs["versioningConfiguration"]["status"] == "Enabled"
    for sse in record.by_type("aws:s3/bucketServerSideEncryptionConfiguration:"
                              "BucketServerSideEncryptionConfiguration"):
        rule = sse.inputs["rules"][0]["applyServerSideEncryptionByDefault"]
        assert rule["sseAlgorithm"] == ("aws:kms" if spec.is_prod else "AES256")
        if spec.is_prod:
            key = next(k for k in record.by_type("aws:kms/key:Key")
                       if k.outputs["arn"] == rule["kmsMasterKeyId"])
            assert region_of(record, key) == region_of(record, sse)


def test_weights_replicate_with_rtc_and_customer_keys_in_prod() -> None:
    record = record_of("prod")
    (config,) = record.by_type("aws:s3/bucketReplicationConfig:BucketReplicationConfig")
    regions = aws_regions("prod")
    buckets = {region_of(record, b): b for b in record.by_type("aws:s3/bucket:Bucket")}
    assert config.inputs["bucket"] == buckets[regions[0].region].outputs["id"]
    assert [r["destination"]["bucket"] for r in config.inputs["rules"]] == \
        [buckets[r.region].outputs["arn"] for r in regions[1:]]
    for rule in config.inputs["rules"]:
        dest = rule["destination"]
        assert dest["replicationTime"] == {"status": "Enabled", "time": {"minutes": 15}}
        assert dest["encryptionConfiguration"]["replicaKmsKeyId"].startswith("arn:aws:kms:")
        assert rule["sourceSelectionCriteria"]["sseKmsEncryptedObjects"]["status"] == "Enabled"
    versioning = {v.urn for v in record.by_type("aws:s3/bucketVersioning:BucketVersioning")}
    assert versioning <= set(config.dependencies)


def test_only_s3_replicating_the_stacks_source_bucket_may_assume_the_replication_role() -> None:
    record = record_of("prod")
    (config,) = record.by_type("aws:s3/bucketReplicationConfig:BucketReplicationConfig")
    (role,) = [r for r in record.by_type("aws:iam/role:Role") if r.outputs["arn"] == config.inputs["role"]]
    source = aws_regions("prod")[0].region
    (bucket,) = [b for b in record.by_type("aws:s3/bucket:Bucket") if region_of(record, b) == source]
    # The account of the stack's deployer role (stacks/Pulumi.prod.yaml), and S3's ARN form
    # `arn:aws:s3:::<bucket>` for the source bucket's own name.
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "s3.amazonaws.com"}
    name = weights_bucket(spec_of("prod"), aws_regions("prod")[0])
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceAccount": "123456789012"},
        "ArnEquals": {"aws:SourceArn": f"arn:aws:s3:::{name}"}}
    assert bucket.outputs["arn"] == statement["Condition"]["ArnEquals"]["aws:SourceArn"]


def policies(record):
    for res in record.by_type("aws:iam/rolePolicy:RolePolicy"):
        yield res, json.loads(res.inputs["policy"])


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_no_grant_uses_a_wildcard_resource(stack) -> None:
    # The registries' and model identities' grants (Karpenter's EC2 Describe calls have no
    # resource-level permissions: tests/test_karpenter.py checks those against upstream).
    record = record_of(stack)
    for res, doc in policies(record):
        owners = {a.type for a in record.ancestors(res)}
        if not owners & {"rtip:aws:Registries", "rtip:aws:ModelIdentity"}:
            continue
        for statement in doc["Statement"]:
            resources = statement["Resource"]
            resources = [resources] if isinstance(resources, str) else resources
            assert resources, res.urn
            for arn in resources:
                assert arn != "*" and arn.startswith("arn:aws:"), (res.urn, arn)
                assert "*" not in arn.split(":::", 1)[-1].split("/", 1)[0], (res.urn, arn)


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_model_pods_read_only_their_own_regions_bucket(stack) -> None:
    record = record_of(stack)
    buckets = {region_of(record, b): b.outputs["arn"] for b in record.by_type("aws:s3/bucket:Bucket")}
    identities = record.by_type("rtip:aws:ModelIdentity")
    assert sorted(i.inputs["region"] for i in identities) == sorted(r.region for r in aws_regions(stack))
    for identity in identities:
        region = identity.inputs["region"]
        assocs = [a for a in record.by_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                  if a.parent == identity.urn]
        # The model servers, and the cache's download Jobs where the cluster has a cache
        # (tests/test_localmodel.py): each service account once, all to the one read-only role.
        trusted = sorted(f"{a.inputs['namespace']}/{a.inputs['serviceAccount']}" for a in assocs)
        assert trusted == sorted(identity.inputs["serviceAccounts"])
        assert "rtip-models/model-server" in trusted
        assert {a.inputs["clusterName"] for a in assocs} == {identity.inputs["cluster"]}
        assert len({a.inputs["roleArn"] for a in assocs}) == 1
        (grant,) = [p for p in record.by_type("aws:iam/rolePolicy:RolePolicy") if p.parent == identity.urn]
        resources = {r for s in json.loads(grant.inputs["policy"])["Statement"] for r in s["Resource"]}
        s3 = {r for r in resources if r.startswith("arn:aws:s3")}
        assert s3 == {buckets[region], f"{buckets[region]}/models/*"}
        (sa,) = [s for s in record.by_type("kubernetes:core/v1:ServiceAccount") if s.parent == identity.urn
                 and s.inputs["metadata"]["name"] == "model-server"]
        cluster = next(a for a in record.ancestors(identity) if a.type == "rtip:aws:Cluster")
        assert record.get(sa.provider).parent == cluster.urn


@pytest.mark.parametrize("stack", ["dev", "staging"])
def test_models_load_from_their_own_region(stack) -> None:
    from rtip.report import document
    spec = spec_of(stack)
    doc = document(record_of(stack).plan, record_of(stack))
    for m in doc["models"]:
        region = next(r for r in spec.regions if r.region == m["region"])
        assert m["source_uri"] == f"s3://{weights_bucket(spec, region)}/models/{m['name']}"
