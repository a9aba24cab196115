"""Customer-managed Cloud KMS keys: one rule for every GCP key the stack owns.

A key lives in a key ring of its location and is usable only by the Google service agents that
encrypt with it (GKE, Artifact Registry, Cloud Storage): each is granted encrypt/decrypt on that
one key, nothing on the ring or the project.

Cloud KMS never deletes a key ring or a key (pulumi-gcp's KeyRing and CryptoKey docs: destroying
one removes it from the state only, and a key's versions are destroyed), so a ring keeps its name
in the project for good. The ring is therefore auto-named (`<logical name>-<7 random hex>`): a
stack destroyed and created again gets a new ring instead of "already exists"; the key inside keeps
its plain name, unique within its ring."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_gcp as gcp

ROTATION_PERIOD = "7776000s"  # 90 days
ENCRYPTER = "roles/cloudkms.cryptoKeyEncrypterDecrypter"


def service_agent(project_number: str | None, service: str) -> str:
    """The e-mail of a project's Google service agent (`container-engine-robot`, ...)."""
    domain = {"gke": "container-engine-robot.iam.gserviceaccount.com",
              "artifactregistry": "gcp-sa-artifactregistry.iam.gserviceaccount.com",
              "storage": "gs-project-accounts.iam.gserviceaccount.com"}[service]
    return f"service-{project_number}@{domain}"


def customer_key(name: str, project: str, location: str, key: str,
                 agents: Sequence[str], opts: pulumi.ResourceOptions,
                 ) -> tuple[gcp.kms.CryptoKey, list[gcp.kms.CryptoKeyIAMMember]]:
    """A key `key` in a new key ring at `location` named after `name`, granted to `agents` only."""
    key_ring = gcp.kms.KeyRing(name, gcp.kms.KeyRingArgs(location=location, project=project),
                               # What the provider does anyway on delete, said where it is read.
                               opts=pulumi.ResourceOptions.merge(
                                   opts, pulumi.ResourceOptions(retain_on_delete=True)))
    crypto_key = gcp.kms.CryptoKey(name, gcp.kms.CryptoKeyArgs(
        name=key, key_ring=key_ring.id, rotation_period=ROTATION_PERIOD), opts=opts)
    grants = [
        gcp.kms.CryptoKeyIAMMember(f"{name}-{agent.split('@')[1].split('.')[0]}",
                                   gcp.kms.CryptoKeyIAMMemberArgs(
                                       crypto_key_id=crypto_key.id, role=ENCRYPTER,
                                       member=f"serviceAccount:{agent}"), opts=opts)
        for agent in agents
    ]
    return crypto_key, grants


__all__ = ["ENCRYPTER", "ROTATION_PERIOD", "customer_key", "service_agent"]
