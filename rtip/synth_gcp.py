"""Synthesized outputs of Google Cloud resources for the offline engine (see rtip/synth.py).

IDs follow the provider's own formats (the `pulumi import` forms of each resource), so code that
parses them offline sees what it would see live.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from rtip.synth_base import SynthArgs, Synthesizer, digest, fake_ca

COMPUTE_API = "https://www.googleapis.com/compute/v1"
CONTAINER_API = "https://container.googleapis.com/v1"
# Resources name their project explicitly; this stands in only if one does not.
_FALLBACK_PROJECT = "rtip-offline"


def _project(a: SynthArgs) -> str:
    project = a.inputs.get("project")
    return project if isinstance(project, str) else _FALLBACK_PROJECT


def _ip(urn: str, first: int, second: int | None = None) -> str:
    b = hashlib.sha256(urn.encode()).digest()
    return f"{first}.{second if second is not None else b[0]}.{b[1]}.{max(b[2], 2)}"


def _with_self_link(path: Callable[[SynthArgs], str], api: str = COMPUTE_API,
                    extra: Callable[[SynthArgs], dict[str, Any]] | None = None) -> Synthesizer:
    def synth(a: SynthArgs) -> tuple[str, dict[str, Any]]:
        rid = path(a)
        return rid, {"selfLink": f"{api}/{rid}", **(extra(a) if extra else {})}
    return synth


def _subnetwork(a: SynthArgs) -> dict[str, Any]:
    first = str(a.inputs.get("ipCidrRange", "10.0.0.0/24")).split("/")[0].rsplit(".", 1)[0]
    return {"gatewayAddress": f"{first}.1", "fingerprint": digest(a.urn, 12),
            "creationTimestamp": "2025-01-01T00:00:00.000-08:00"}


def _router_nat(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    router = a.inputs.get("router", "router")
    return f"{_project(a)}/{a.region}/{router}/{a.physical}", {}


def _account(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    project = _project(a)
    email = f"{a.inputs.get('accountId', a.physical)}@{project}.iam.gserviceaccount.com"
    rid = f"projects/{project}/serviceAccounts/{email}"
    return rid, {"email": email, "name": rid, "member": f"serviceAccount:{email}",
                 "uniqueId": str(int(digest(a.urn, 15), 16))}


def _iam_member(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    rid = f"{_project(a)}/{a.inputs.get('role')}/{a.inputs.get('member')}"
    return rid, {"etag": "BwY" + digest(a.urn, 9)}


def _cluster(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    project, location = _project(a), a.inputs.get("location", a.region)
    rid = f"projects/{project}/locations/{location}/clusters/{a.physical}"
    private = dict(a.inputs.get("privateClusterConfig") or {})
    private_ip, public_ip = _ip(a.urn, 10, 255), _ip(a.urn, 34)
    endpoint = private_ip if private.get("enablePrivateEndpoint") else public_ip
    return rid, {
        "endpoint": endpoint,
        "selfLink": f"{CONTAINER_API}/{rid}",
        "masterAuth": {"clusterCaCertificate": fake_ca(a.urn),
                       "clientCertificateConfig": {"issueClientCertificate": False}},
        "privateClusterConfig": {**private, "privateEndpoint": private_ip,
                                 "publicEndpoint": None if private.get("enablePrivateEndpoint")
                                 else public_ip},
        "masterVersion": f"{a.inputs.get('minMasterVersion', '1.33')}.5-gke.1000",
        "labelFingerprint": digest(a.urn, 8),
    }


def _node_pool(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    project, location = _project(a), a.inputs.get("location", a.region)
    cluster = a.inputs.get("cluster", "cluster")
    rid = f"{project}/{location}/{cluster}/{a.physical}"
    zones = a.inputs.get("nodeLocations") or []
    groups = [f"{COMPUTE_API}/projects/{project}/zones/{z}/instanceGroupManagers/"
              f"gke-{cluster}-{a.physical}-{digest(a.urn + z, 8)}-grp" for z in zones]
    return rid, {"instanceGroupUrls": groups, "managedInstanceGroupUrls": groups}


STORAGE_API = "https://www.googleapis.com/storage/v1"


def _key_ring(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    # The `pulumi import` ID of google_kms_key_ring: projects/{project}/locations/{location}/keyRings/{name}.
    location = a.inputs.get("location", a.region)
    return f"projects/{_project(a)}/locations/{location}/keyRings/{a.physical}", {}


def _crypto_key(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    # A key lives under its ring's ID: {keyRing}/cryptoKeys/{name}.
    return f"{a.inputs.get('keyRing')}/cryptoKeys/{a.physical}", {}


def _member_of(parent_key: str) -> Synthesizer:
    def synth(a: SynthArgs) -> tuple[str, dict[str, Any]]:
        rid = f"{a.inputs.get(parent_key)}/{a.inputs.get('role')}/{a.inputs.get('member')}"
        return rid, {"etag": "BwY" + digest(a.urn, 9)}
    return synth


def _bucket(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    # A bucket's ID is its name; the API also reports a selfLink and the gs:// URL.
    return a.physical, {"selfLink": f"{STORAGE_API}/b/{a.physical}", "url": f"gs://{a.physical}",
                        "projectNumber": str(int(digest(a.urn, 11), 16))}


def _repository(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    # google_artifact_registry_repository: id projects/{p}/locations/{l}/repositories/{repository_id};
    # `name` is the repository ID itself.
    repo = a.inputs.get("repositoryId", a.physical)
    rid = f"projects/{_project(a)}/locations/{a.inputs.get('location', a.region)}/repositories/{repo}"
    return rid, {"name": repo, "createTime": "2025-01-01T00:00:00Z"}


GCP: dict[str, Synthesizer] = {
    "gcp:kms/keyRing:KeyRing": _key_ring,
    "gcp:kms/cryptoKey:CryptoKey": _crypto_key,
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": _member_of("cryptoKeyId"),
    "gcp:storage/bucket:Bucket": _bucket,
    "gcp:storage/bucketIAMMember:BucketIAMMember": _member_of("bucket"),
    "gcp:artifactregistry/repository:Repository": _repository,
    "gcp:serviceaccount/iAMMember:IAMMember": _member_of("serviceAccountId"),
    "gcp:compute/network:Network": _with_self_link(
        lambda a: f"projects/{_project(a)}/global/networks/{a.physical}",
        extra=lambda a: {"numericId": str(int(digest(a.urn, 15), 16))}),
    "gcp:compute/subnetwork:Subnetwork": _with_self_link(
        lambda a: f"projects/{_project(a)}/regions/{a.region}/subnetworks/{a.physical}",
        extra=_subnetwork),
    "gcp:compute/router:Router": _with_self_link(
        lambda a: f"projects/{_project(a)}/regions/{a.region}/routers/{a.physical}"),
    "gcp:compute/routerNat:RouterNat": _router_nat,
    "gcp:serviceaccount/account:Account": _account,
    "gcp:projects/iAMMember:IAMMember": _iam_member,
    "gcp:container/cluster:Cluster": _cluster,
    "gcp:container/nodePool:NodePool": _node_pool,
}

__all__ = ["GCP"]
