"""GCP registries and model-pod identity, from the offline record."""

from __future__ import annotations

import copy

import pytest

from components.gcp.registries import shared_location
from rtip import offline
from rtip.stackfile import load
from stacks.naming import weights_bucket
from stacks.schema import GcpRegion
from tests.conftest import add_region, record_of, spec_of, stack_doc, write_stack


@pytest.fixture(scope="module")
def two_gcp_regions(tmp_path_factory):
    doc = copy.deepcopy(stack_doc("prod")["config"]["rtip:platform"])
    second = copy.deepcopy(doc["regions"][2])
    second.update(region="us-east4", zones=["us-east4-a", "us-east4-b", "us-east4-c"],
                  network={"cidr": "10.31.0.0/16"})
    add_region(doc, second, at=3)
    path = write_stack(tmp_path_factory.mktemp("gcp2"), doc, name="gcp2")
    return offline.run(load(str(path)))


def standard_repositories(record):
    return [r for r in record.by_type("gcp:artifactregistry/repository:Repository")
            if r.inputs.get("mode") != "REMOTE_REPOSITORY"]


def test_shared_location() -> None:
    def r(name):
        return GcpRegion(cloud="gcp", region=name, project="p-12345", zones=[f"{name}-a"],
                         network={"cidr": "10.0.0.0/16"})
    assert shared_location([r("us-central1")]) is None
    assert shared_location([r("us-central1"), r("us-east4")]) == "us"
    assert shared_location([r("us-central1"), r("europe-west4")]) is None


def test_one_region_gets_a_regional_repository_and_bucket() -> None:
    record = record_of("prod")
    spec = spec_of("prod")
    (repo,) = standard_repositories(record)
    assert repo.inputs["location"] == "us-central1" and repo.inputs["format"] == "DOCKER"
    assert repo.inputs["dockerConfig"]["immutableTags"] is True
    (bucket,) = record.by_type("gcp:storage/bucket:Bucket")
    gcp_region = next(r for r in spec.regions if r.cloud == "gcp")
    assert bucket.inputs["name"] == weights_bucket(spec, gcp_region)
    assert bucket.inputs["location"] == "US-CENTRAL1"
    assert bucket.inputs["versioning"] == {"enabled": True}
    assert bucket.inputs["uniformBucketLevelAccess"] is True
    assert bucket.inputs["publicAccessPrevention"] == "enforced"
    (key,) = [k for k in record.by_type("gcp:kms/cryptoKey:CryptoKey")
              if record.get(k.parent).type == "rtip:gcp:Registries"]
    assert bucket.inputs["encryption"]["defaultKmsKeyName"] == key.outputs["id"]
    assert repo.inputs["kmsKeyName"] == key.outputs["id"]
    members = {m.inputs["member"] for m in record.by_type("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
               if record.get(m.parent).type == "rtip:gcp:Registries"}
    number = gcp_region.project_number
    assert members == {f"serviceAccount:service-{number}@gcp-sa-artifactregistry.iam.gserviceaccount.com",
                       f"serviceAccount:service-{number}@gs-project-accounts.iam.gserviceaccount.com"}


def test_two_regions_share_a_multi_region_repository_and_a_dual_region_bucket(two_gcp_regions) -> None:
    record = two_gcp_regions
    (repo,) = standard_repositories(record)
    assert repo.inputs["location"] == "us"
    (bucket,) = record.by_type("gcp:storage/bucket:Bucket")
    assert bucket.inputs["location"] == "US"
    assert bucket.inputs["customPlacementConfig"]["dataLocations"] == ["US-CENTRAL1", "US-EAST4"]
    assert bucket.inputs["rpo"] == "ASYNC_TURBO"
    assert len(record.by_type("rtip:gcp:Cluster")) == 2


@pytest.mark.parametrize("which", ["prod", "two"])
def test_model_pods_read_only_the_weights_bucket(which, two_gcp_regions) -> None:
    record = record_of("prod") if which == "prod" else two_gcp_regions
    (bucket,) = record.by_type("gcp:storage/bucket:Bucket")
    identities = record.by_type("rtip:gcp:ModelIdentity")
    assert len(identities) == len(record.by_type("rtip:gcp:Cluster"))
    for identity in identities:
        (gsa,) = [a for a in record.by_type("gcp:serviceaccount/account:Account") if a.parent == identity.urn]
        (grant,) = [g for g in record.by_type("gcp:storage/bucketIAMMember:BucketIAMMember")
                    if g.parent == identity.urn]
        assert grant.inputs["bucket"] == bucket.outputs["name"]
        assert grant.inputs["role"] == "roles/storage.objectViewer"
        assert grant.inputs["member"] == f"serviceAccount:{gsa.outputs['email']}"
        wis = [w for w in record.by_type("gcp:serviceaccount/iAMMember:IAMMember")
               if w.parent == identity.urn]
        assert {w.inputs["role"] for w in wis} == {"roles/iam.workloadIdentityUser"}
        # The model servers, and the cache's download Jobs where the cluster has a cache.
        assert sorted(w.inputs["member"].split(".svc.id.goog[", 1)[1].rstrip("]") for w in wis) == \
            sorted(identity.inputs["serviceAccounts"])
        assert any(w.inputs["member"].endswith(".svc.id.goog[rtip-models/model-server]") for w in wis)
        (sa,) = [s for s in record.by_type("kubernetes:core/v1:ServiceAccount") if s.parent == identity.urn
                 and s.inputs["metadata"]["name"] == "model-server"]
        assert sa.inputs["metadata"]["annotations"]["iam.gke.io/gcp-service-account"] == gsa.outputs["email"]
        cluster = next(a for a in record.ancestors(identity) if a.type == "rtip:gcp:Cluster")
        assert record.get(sa.provider).parent == cluster.urn
    # No grant on the project or anything wider than the bucket for the model identities.
    for member in record.by_type("gcp:projects/iAMMember:IAMMember"):
        assert not any(a.type == "rtip:gcp:ModelIdentity" for a in record.ancestors(member))


def test_a_docker_hub_remote_repository_beside_each_standard_one() -> None:
    record = record_of("prod")
    repos = record.by_type("gcp:artifactregistry/repository:Repository")
    remote = [r for r in repos if r.inputs.get("mode") == "REMOTE_REPOSITORY"]
    standard = [r for r in repos if r.inputs.get("mode") != "REMOTE_REPOSITORY"]
    assert {r.inputs["location"] for r in remote} == {r.inputs["location"] for r in standard}
    by_id = {}
    for repo in remote:
        assert repo.inputs["format"] == "DOCKER"
        by_id.setdefault(repo.inputs["repositoryId"], []).append(repo)
    # Two upstreams: Docker Hub (Artifact Registry's preset) and registry.k8s.io (the endpoint
    # picker, by URI), each a remote repository in every location, with the ID the pulled path names.
    assert sorted(by_id) == ["rtip-docker-hub", "rtip-k8s"]
    for repo in by_id["rtip-docker-hub"]:
        assert repo.inputs["remoteRepositoryConfig"]["dockerRepository"] == {"publicRepository": "DOCKER_HUB"}
    for repo in by_id["rtip-k8s"]:
        config = repo.inputs["remoteRepositoryConfig"]
        assert "dockerRepository" not in config and config["commonRepository"] == {"uri": "https://registry.k8s.io"}
