"""Every policy of the pack, through the analyzer the Pulumi CLI uses: a resource that passes and
one that fails. The records are built by hand so each case shows exactly what the rule reads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.pack import policies
from rtip.check import analyze, environment_config
from rtip.offline import Record, Resource
from tests.conftest import record_of

PROVIDER = "urn:pulumi:t::rtip::pulumi:providers:aws::p"
STRICT = environment_config("prod")


def res(
    type_: str,
    name: str,
    inputs: dict[str, Any],
    outputs: dict[str, Any] | None = None,
    parent: str | None = None,
    deps: tuple[str, ...] = (),
) -> Resource:
    return Resource(
        type=type_,
        name=name,
        urn=f"urn:pulumi:t::rtip::{type_}::{name}",
        parent=parent,
        provider=None,
        dependencies=deps,
        inputs=inputs,
        outputs=outputs if outputs is not None else {**inputs, "id": name},
        custom=True,
    )


def found(*resources: Resource, config: dict[str, Any] = STRICT) -> set[tuple[str, str]]:
    record = Record(stack="t", resources=list(resources))
    return {(v.policy, v.urn.rsplit("::", 1)[-1]) for v in analyze(record, config)}


def flags(policy: str, *resources: Resource) -> set[str]:
    return {name for p, name in found(*resources) if p == policy}


EKS = "aws:eks/cluster:Cluster"


def eks(name: str, public: bool, cidrs: list[str] | None = None, key: bool = True) -> Resource:
    inputs: dict[str, Any] = {
        "vpcConfig": {"endpointPublicAccess": public, **({"publicAccessCidrs": cidrs} if cidrs else {})}
    }
    if key:
        inputs["encryptionConfig"] = {"resources": ["secrets"], "provider": {"keyArn": "arn:k"}}
    return res(EKS, name, inputs)


def test_every_policy_of_the_pack_is_exercised_here() -> None:
    tested = {
        "cluster-api-not-public",
        "secrets-customer-key",
        "no-public-node-ips",
        "eks-no-public-node-ips",
        "eks-imdsv2-one-hop",
        "gpu-pools-tainted",
        "registries-hardened",
        "object-stores-hardened",
        "s3-buckets-hardened",
        "iam-no-wildcards",
        "iam-trust-scoped",
        "iam-no-broad-managed-policies",
        "model-servers-hardened",
        "namespaces-pod-security",
        "namespaces-default-deny",
        "inference-services-survive-disruption",
        "helm-pinned",
        "images-pinned-own-registry",
        "providers-pinned",
        "routes-behind-auth-and-limits",
        "request-logs-redacted",  # tests/test_policies_logs.py
    }
    assert {p.name for p in policies()} == tested


def test_cluster_api() -> None:
    assert flags(
        "cluster-api-not-public",
        eks("private", False),
        eks("listed", True, ["203.0.113.0/24"]),
        eks("world", True, ["0.0.0.0/0"]),
    ) == {"listed", "world"}  # prod requires private
    dev = found(
        eks("listed", True, ["203.0.113.0/24"]),
        eks("world", True, ["0.0.0.0/0"]),
        config=environment_config("dev"),
    )
    assert {n for p, n in dev if p == "cluster-api-not-public"} == {"world"}  # never 0.0.0.0/0


def test_secrets_key() -> None:
    assert flags("secrets-customer-key", eks("keyed", False), eks("plain", False, key=False)) == {"plain"}
    gke = res(
        "gcp:container/cluster:Cluster",
        "g",
        {"privateClusterConfig": {"enablePrivateEndpoint": True, "enablePrivateNodes": True}},
    )
    aks = res(
        "azure-native:containerservice:ManagedCluster",
        "a",
        {
            "apiServerAccessProfile": {"enablePrivateCluster": True},
            "securityProfile": {"azureKeyVaultKms": {"enabled": True}},
        },
    )
    assert flags("secrets-customer-key", gke, aks) == {"g"}


def test_node_ips_imds_and_taints() -> None:
    lt_ok = res(
        "aws:ec2/launchTemplate:LaunchTemplate",
        "lt",
        {"metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1}},
        outputs={"id": "lt-1", "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1}},
    )
    lt_bad = res(
        "aws:ec2/launchTemplate:LaunchTemplate",
        "lt2",
        {},
        outputs={"id": "lt-2", "metadataOptions": {"httpTokens": "optional", "httpPutResponseHopLimit": 2}},
    )
    public = res(
        "aws:ec2/subnet:Subnet", "pub", {}, outputs={"id": "subnet-pub", "mapPublicIpOnLaunch": True}
    )
    private = res("aws:ec2/subnet:Subnet", "priv", {}, outputs={"id": "subnet-priv"})
    gpu_taint = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    good = res(
        "aws:eks/nodeGroup:NodeGroup",
        "good",
        {
            "instanceTypes": ["p5.48xlarge"],
            "taints": gpu_taint,
            "launchTemplate": {"id": "lt-1"},
            "subnetIds": ["subnet-priv"],
        },
    )
    no_lt = res(
        "aws:eks/nodeGroup:NodeGroup", "nolt", {"instanceTypes": ["m7i.xlarge"], "subnetIds": ["subnet-pub"]}
    )
    weak = res(
        "aws:eks/nodeGroup:NodeGroup",
        "weak",
        {"instanceTypes": ["p5.48xlarge"], "launchTemplate": {"id": "lt-2"}, "subnetIds": ["subnet-priv"]},
    )
    all_ = (lt_ok, lt_bad, public, private, good, no_lt, weak)
    assert flags("eks-imdsv2-one-hop", *all_) == {"nolt", "weak"}
    assert flags("eks-no-public-node-ips", *all_) == {"nolt"}
    assert flags("gpu-pools-tainted", *all_) == {"weak"}  # a GPU shape without the taint
    aks_pub = res(
        "azure-native:containerservice:AgentPool",
        "ap",
        {
            "vmSize": "Standard_ND96isr_MI300X_v5",
            "enableNodePublicIP": True,
            "nodeTaints": ["amd.com/gpu=true:NoSchedule"],
        },
    )
    assert flags("no-public-node-ips", aks_pub) == {"ap"} and not flags("gpu-pools-tainted", aks_pub)


def test_registries_and_object_stores() -> None:
    ecr_ok = res(
        "aws:ecr/repository:Repository",
        "ok",
        {
            "imageTagMutability": "IMMUTABLE",
            "imageScanningConfiguration": {"scanOnPush": True},
            "encryptionConfigurations": [{"encryptionType": "KMS"}],
        },
    )
    ecr_bad = res("aws:ecr/repository:Repository", "bad", {"imageTagMutability": "MUTABLE"})
    acr_anon = res(
        "azure-native:containerregistry:Registry",
        "acr",
        {"adminUserEnabled": False, "anonymousPullEnabled": True, "encryption": {"status": "enabled"},
         "publicNetworkAccess": "Disabled"},
    )
    private = {"adminUserEnabled": False, "anonymousPullEnabled": False, "encryption": {"status": "enabled"}}
    acr_closed = res("azure-native:containerregistry:Registry", "closed",
                     private | {"publicNetworkAccess": "Disabled"})
    acr_firewalled = res("azure-native:containerregistry:Registry", "firewalled",
                         private | {"networkRuleSet": {"defaultAction": "Deny"}})
    acr_open = res("azure-native:containerregistry:Registry", "open",
                   private | {"networkRuleSet": {"defaultAction": "Allow"}})
    acr_default = res("azure-native:containerregistry:Registry", "default", private)
    assert flags("registries-hardened", ecr_ok, ecr_bad, acr_anon, acr_closed, acr_firewalled, acr_open,
                 acr_default) == {"bad", "acr", "open", "default"}
    gcs_ok = res(
        "gcp:storage/bucket:Bucket",
        "gok",
        {
            "publicAccessPrevention": "enforced",
            "uniformBucketLevelAccess": True,
            "versioning": {"enabled": True},
            "encryption": {"defaultKmsKeyName": "k"},
        },
    )
    blob_ok = {
        "enableHttpsTrafficOnly": True,
        "minimumTlsVersion": "TLS1_2",
        "allowBlobPublicAccess": False,
        "allowSharedKeyAccess": False,
        "encryption": {"keySource": "Microsoft.Keyvault"},
        "publicNetworkAccess": "Disabled",
    }
    blob_http = res("azure-native:storage:StorageAccount", "blob",
                    blob_ok | {"enableHttpsTrafficOnly": False})
    blob_private = res("azure-native:storage:StorageAccount", "private", blob_ok)
    open_net = {k: v for k, v in blob_ok.items() if k != "publicNetworkAccess"}
    blob_open = res("azure-native:storage:StorageAccount", "open", open_net)
    blob_firewalled = res("azure-native:storage:StorageAccount", "firewalled",
                          open_net | {"networkRuleSet": {"defaultAction": "Deny", "bypass": "None"}})
    assert flags("object-stores-hardened", gcs_ok, blob_http, blob_private, blob_open,
                 blob_firewalled) == {"blob", "open"}


def _s3(name: str, tls_only: bool) -> list[Resource]:
    arn = f"arn:aws:s3:::{name}"
    parts = [
        res("aws:s3/bucket:Bucket", name, {"bucket": name}, outputs={"id": name, "bucket": name, "arn": arn}),
        res(
            "aws:s3/bucketVersioning:BucketVersioning",
            f"{name}-v",
            {"bucket": name, "versioningConfiguration": {"status": "Enabled"}},
        ),
        res(
            "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
            f"{name}-pab",
            {
                "bucket": name,
                "blockPublicAcls": True,
                "blockPublicPolicy": True,
                "ignorePublicAcls": True,
                "restrictPublicBuckets": True,
            },
        ),
        res(
            "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
            f"{name}-sse",
            {"bucket": name},
        ),
    ]
    if tls_only:
        policy = {
            "Statement": [
                {
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [arn, f"{arn}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            ]
        }
        parts.append(
            res(
                "aws:s3/bucketPolicy:BucketPolicy",
                f"{name}-tls",
                {"bucket": name, "policy": json.dumps(policy)},
            )
        )
    return parts


def test_s3_buckets() -> None:
    assert flags("s3-buckets-hardened", *_s3("good", True), *_s3("plain", False)) == {"plain"}


def _policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def test_iam() -> None:
    narrow = res(
        "aws:iam/rolePolicy:RolePolicy",
        "narrow",
        {
            "policy": _policy(
                {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::b/*"]},
                {"Effect": "Allow", "Action": ["ec2:DescribeInstances"], "Resource": "*"},
            )
        },
    )
    star = res(
        "aws:iam/rolePolicy:RolePolicy",
        "star",
        {"policy": _policy({"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::b"})},
    )
    anywhere = res(
        "aws:iam/policy:Policy",
        "anywhere",
        {"policy": _policy({"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "*"})},
    )
    assert flags("iam-no-wildcards", narrow, star, anywhere) == {"star", "anywhere"}
    scoped = res(
        "aws:iam/role:Role",
        "scoped",
        {
            "assumeRolePolicy": _policy(
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "pods.eks.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                    "Condition": {"StringEquals": {"aws:SourceAccount": "123456789012"}},
                }
            )
        },
    )
    open_ = res(
        "aws:iam/role:Role",
        "open",
        {
            "assumeRolePolicy": _policy(
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "pods.eks.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            )
        },
    )
    ec2 = res(
        "aws:iam/role:Role",
        "ec2",
        {
            "assumeRolePolicy": _policy(
                {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
            )
        },
    )
    assert flags("iam-trust-scoped", scoped, open_, ec2) == {"open"}
    cni = res(
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
        "cni",
        {"policyArn": "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"},
    )
    worker = res(
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
        "worker",
        {"policyArn": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"},
    )
    assert flags("iam-no-broad-managed-policies", cni, worker) == {"cni"}


ISVC = "kubernetes:serving.kserve.io/v1beta1:InferenceService"


def _isvc(name: str, hardened: bool, gpu: str = "nvidia.com/gpu") -> Resource:
    amounts = {"cpu": "4", "memory": "16Gi", gpu: "1"}
    ctx = (
        {"allowPrivilegeEscalation": False, "runAsNonRoot": True}
        if hardened
        else {"allowPrivilegeEscalation": True}
    )
    return res(
        ISVC,
        name,
        {
            "metadata": {"name": name, "namespace": "m"},
            "spec": {
                "predictor": {
                    "labels": {"rtip.dev/model": name},
                    "automountServiceAccountToken": not hardened,
                    "minReplicas": 3,
                    "model": {"resources": {"requests": amounts, "limits": amounts}, "securityContext": ctx},
                }
            },
        },
        parent="urn:pulumi:t::rtip::rtip:aws:Cluster::c",
    )


def test_model_servers() -> None:
    amd = _isvc("amd", True, gpu="amd.com/gpu")
    amd.inputs["spec"]["predictor"]["model"]["securityContext"].pop("runAsNonRoot")
    assert flags("model-servers-hardened", _isvc("good", True), _isvc("bad", False), amd) == {"bad"}


def test_namespaces_and_disruption() -> None:
    cluster = res("rtip:aws:Cluster", "c", {"zones": ["a", "b", "c"]})
    cluster = Resource(**{**vars(cluster), "custom": False})
    labelled = res(
        "kubernetes:core/v1:Namespace",
        "ns-ok",
        {"metadata": {"name": "m", "labels": {"pod-security.kubernetes.io/enforce": "baseline"}}},
        parent=cluster.urn,
    )
    bare = res("kubernetes:core/v1:Namespace", "ns-bare", {"metadata": {"name": "other"}}, parent=cluster.urn)
    deny = res(
        "kubernetes:networking.k8s.io/v1:NetworkPolicy",
        "deny",
        {"metadata": {"namespace": "m"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}},
        parent=cluster.urn,
    )
    assert flags("namespaces-pod-security", labelled, bare) == {"ns-bare"}
    assert flags("namespaces-default-deny", labelled, bare, deny) == {"ns-bare"}
    covered, floor_low = _isvc("covered", True), _isvc("low", True)
    pdb = res(
        "kubernetes:policy/v1:PodDisruptionBudget",
        "pdb",
        {
            "metadata": {"namespace": "m"},
            "spec": {"selector": {"matchLabels": {"rtip.dev/model": "covered"}}},
        },
        parent=covered.parent,
    )
    pdb_low = res(
        "kubernetes:policy/v1:PodDisruptionBudget",
        "pdb2",
        {"metadata": {"namespace": "m"}, "spec": {"selector": {"matchLabels": {"rtip.dev/model": "low"}}}},
        parent=floor_low.parent,
    )
    scaled = res(
        "kubernetes:keda.sh/v1alpha1:ScaledObject",
        "so",
        {"metadata": {"name": "low"}, "spec": {"minReplicaCount": 2}},
        parent=floor_low.parent,
    )
    lonely = _isvc("lonely", True)
    assert flags(
        "inference-services-survive-disruption", cluster, covered, pdb, floor_low, pdb_low, scaled, lonely
    ) == {"low", "lonely"}  # 2 replicas for 3 zones; no PDB


def test_supply_chain() -> None:
    pinned = res(
        "kubernetes:helm.sh/v3:Release",
        "ok",
        {
            "chart": "keda",
            "version": "2.20.2",
            "repositoryOpts": {"repo": "https://kedacore.github.io/charts"},
        },
    )
    loose = res(
        "kubernetes:helm.sh/v3:Release",
        "loose",
        {
            "chart": "keda",
            "version": "~2.20",
            "repositoryOpts": {"repo": "https://kedacore.github.io/charts"},
        },
    )
    stranger = res(
        "kubernetes:helm.sh/v3:Release",
        "stranger",
        {"chart": "x", "version": "1.0.0", "repositoryOpts": {"repo": "https://example.com/charts"}},
    )
    assert flags("helm-pinned", pinned, loose, stranger) == {"loose", "stranger"}
    own = res(
        "kubernetes:serving.kserve.io/v1alpha1:ClusterServingRuntime",
        "own",
        {
            "spec": {
                "containers": [
                    {
                        "image": ("123456789012.dkr.ecr.us-east-1.amazonaws.com/"
                                  "docker-hub/vllm/vllm-openai:v0.11.0")
                    }
                ]
            }
        },
    )
    hub = res(
        "kubernetes:serving.kserve.io/v1alpha1:ClusterServingRuntime",
        "hub",
        {"spec": {"containers": [{"image": "docker.io/vllm/vllm-openai:v0.11.0"}]}},
    )
    assert flags("images-pinned-own-registry", own, hub) == {"hub"}
    aws_pinned = res("pulumi:providers:aws", "a1", {"region": "us-east-1", "allowedAccountIds": ["1"]})
    aws_loose = res("pulumi:providers:aws", "a2", {"region": "us-east-1"})
    assert flags("providers-pinned", aws_pinned, aws_loose) == {"a2"}


def test_enforcement_follows_the_environment() -> None:
    world = eks("world", True, ["0.0.0.0/0"])
    record = Record(stack="t", resources=[world])
    assert {v.enforcement for v in analyze(record, environment_config("dev"))} == {"advisory"}
    assert {v.enforcement for v in analyze(record, environment_config("prod"))} == {"mandatory"}


def test_rtip_check_exit_codes(capsys) -> None:
    from rtip.cli import main

    assert main(["check", "dev", "--json"]) == 0  # dev: advisory only
    doc = json.loads(capsys.readouterr().out)
    # dev may be clean; what it reports is advisory only.
    assert {v["enforcement"] for v in doc["violations"]} <= {"advisory"}
    assert all(v["remediation"] for v in doc["violations"])
    assert main(["check", "nope"]) == 2


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_shipped_stacks_go_through_the_pack(stack) -> None:
    record = record_of(stack)
    violations = analyze(record, environment_config(record.plan.spec.environment))
    urns = {r.urn for r in record.resources}
    assert all(v.urn in urns for v in violations)
    # What `rtip check` exits 1 on: a shipped stack must plan with none.
    assert [(v.policy, v.urn, v.message) for v in violations if v.enforcement == "mandatory"] == []


def test_environment_configs_follow_the_posture_table() -> None:
    # The pack imports no posture at run time (the CLI reads static JSON): the files must agree with
    # serving/posture.py row by row, and with the README's levels (advisory only in dev).
    from serving.posture import POSTURES

    for env, row in POSTURES.items():
        config = environment_config(str(env))
        assert config["all"] == ("advisory" if str(env) == "dev" else "mandatory")
        assert config["cluster-api-not-public"]["requirePrivateApi"] is row.private_api
        assert config["secrets-customer-key"]["requireSecretsKey"] is row.secrets_customer_key
        assert config["registries-hardened"]["requireStoreKeys"] is row.stores_customer_key
        assert config["object-stores-hardened"]["requireStoreKeys"] is row.stores_customer_key
        assert config["inference-services-survive-disruption"]["requireZoneFloor"] is (row.min_zones > 1)
        # The "request logs redacted outside dev": required wherever the row is not dev's.
        assert config["request-logs-redacted"]["requireRedaction"] is (env != "dev")
