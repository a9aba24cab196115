"""GCP resources get the IDs the real API gives them, so a `.name` used where an `.id` is needed
shows in the record offline (the key a GKE cluster, a repository or a bucket is encrypted with must
be the key's full resource name)."""

from __future__ import annotations

import re

from tests.conftest import record_of

# Formats from the Cloud KMS, Artifact Registry and Cloud Storage resource-name docs (the
# `pulumi import` IDs of the resources).
KEY = re.compile(r"^projects/[a-z][a-z0-9-]+/locations/[a-z0-9-]+/keyRings/[^/]+/cryptoKeys/[^/]+$")
RING = re.compile(r"^projects/[a-z][a-z0-9-]+/locations/[a-z0-9-]+/keyRings/[^/]+$")
REPO = re.compile(r"^projects/[a-z][a-z0-9-]+/locations/[a-z0-9-]+/repositories/[a-z0-9-]+$")


def test_kms_artifact_registry_and_bucket_ids_have_their_api_formats() -> None:
    record = record_of("prod")
    rings = record.by_type("gcp:kms/keyRing:KeyRing")
    keys = record.by_type("gcp:kms/cryptoKey:CryptoKey")
    assert rings and keys
    assert all(RING.match(r.outputs["id"]) for r in rings)
    assert all(KEY.match(k.outputs["id"]) and k.outputs["id"].startswith(k.inputs["keyRing"]) for k in keys)
    repos = record.by_type("gcp:artifactregistry/repository:Repository")
    assert repos and all(REPO.match(r.outputs["id"]) for r in repos)
    for bucket in record.by_type("gcp:storage/bucket:Bucket"):
        assert bucket.outputs["id"] == bucket.inputs["name"]
        assert bucket.outputs["selfLink"].endswith(f"/b/{bucket.inputs['name']}")


def test_everything_encrypted_names_the_key_by_its_full_resource_name() -> None:
    record = record_of("prod")
    (cluster,) = record.by_type("gcp:container/cluster:Cluster")
    names = [cluster.inputs["databaseEncryption"]["keyName"]]
    names += [r.inputs["kmsKeyName"] for r in record.by_type("gcp:artifactregistry/repository:Repository")
              if "kmsKeyName" in r.inputs]
    names += [b.inputs["encryption"]["defaultKmsKeyName"]
              for b in record.by_type("gcp:storage/bucket:Bucket")]
    assert len(names) >= 3
    # A key's short name ("gke-secrets") here would be refused by GKE, AR and GCS alike.
    assert all(KEY.match(n) for n in names), names
    grants = record.by_type("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
    assert grants and all(KEY.match(g.inputs["cryptoKeyId"]) for g in grants)


def test_key_rings_are_auto_named_so_a_recreated_stack_asks_for_new_ones() -> None:
    # Cloud KMS never deletes a key ring (pulumi-gcp KeyRing docs): a fixed name would refuse the
    # stack's next creation. Bridged providers auto-name `<logical name>-<7 random hex>`; ring
    # names are 1-63 letters, digits, '_' and '-' (Cloud KMS resource naming).
    record = record_of("prod")
    rings = record.by_type("gcp:kms/keyRing:KeyRing")
    assert len(rings) == 2  # the registries' key and the GKE secrets key
    for ring in rings:
        assert "name" not in ring.inputs
        name = ring.outputs["name"]
        assert re.fullmatch(re.escape(ring.name) + r"-[0-9a-f]{7}", name) and len(name) <= 63, name
        assert ring.outputs["id"].endswith(f"/keyRings/{name}")
