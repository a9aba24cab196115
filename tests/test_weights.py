"""`rtip models publish/status` against a real S3 API: moto's server on 127.0.0.1, two buckets
standing for the weights stores of two regions."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import boto3
import pytest
import yaml
from moto.server import ThreadedMotoServer

from rtip import weights
from rtip.cli import main
from stacks.loader import load_spec
from stacks.naming import weights_bucket
from tests.conftest import only_regions, stack_doc

REGIONS = ("us-east-1", "us-west-2")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server():
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def spec():
    doc = stack_doc("prod")["config"]["rtip:platform"]
    only_regions(doc, [r for r in doc["regions"] if r["cloud"] == "aws"])
    return load_spec(doc, "test")


@pytest.fixture
def s3(s3_server, spec, monkeypatch):
    monkeypatch.setenv(weights.ENDPOINT_ENV, s3_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    clients = {r: boto3.client("s3", region_name=r, endpoint_url=s3_server) for r in REGIONS}
    for region, c in clients.items():
        bucket = weights_bucket(spec, next(x for x in spec.regions if x.region == region))
        existing = [b["Name"] for b in c.list_buckets()["Buckets"]]
        if bucket in existing:
            for obj in c.list_objects_v2(Bucket=bucket).get("Contents", []):
                c.delete_object(Bucket=bucket, Key=obj["Key"])
        else:
            kwargs = {} if region == "us-east-1" else {
                "CreateBucketConfiguration": {"LocationConstraint": region}}
            c.create_bucket(Bucket=bucket, **kwargs)
    return clients


def model_dir(tmp_path: Path, shards: int = 2, shard_bytes: int = 9 * 1024 * 1024) -> Path:
    """A small checkpoint shaped like a real one; shards pass the multipart threshold."""
    folder = tmp_path / "model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (folder / "tokenizer.json").write_text("{}")
    names = [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    for i, name in enumerate(names):
        (folder / name).write_bytes(bytes([i + 1]) * shard_bytes)
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {f"layer.{i}": n for i, n in enumerate(names)}}))
    return folder


def buckets(spec):
    return {r.region: weights_bucket(spec, r) for r in spec.regions}


def replicate(s3, spec, only: int | None = None) -> None:
    """Stand in for S3 replication: copy the primary's objects to the second region's bucket."""
    b = buckets(spec)
    keys = [o["Key"] for o in s3[REGIONS[0]].list_objects_v2(Bucket=b[REGIONS[0]])["Contents"]]
    for key in sorted(keys)[:only]:
        obj = s3[REGIONS[0]].get_object(Bucket=b[REGIONS[0]], Key=key)
        s3[REGIONS[1]].put_object(Bucket=b[REGIONS[1]], Key=key, Body=obj["Body"].read(),
                                  Metadata=obj.get("Metadata", {}))


def test_publish_then_replicate_then_ready(tmp_path, s3, spec) -> None:
    folder = model_dir(tmp_path)
    result = weights.publish(spec, "llama-8b", folder)
    assert result.files == 5 and result.previous is None and not result.unchanged
    b = buckets(spec)
    keys = {o["Key"] for o in s3[REGIONS[0]].list_objects_v2(Bucket=b[REGIONS[0]])["Contents"]}
    assert f"models/llama-8b/{result.version}/manifest.json" in keys
    assert "models/llama-8b/current.json" in keys
    manifest = json.loads(s3[REGIONS[0]].get_object(
        Bucket=b[REGIONS[0]], Key=f"models/llama-8b/{result.version}/manifest.json")["Body"].read())
    assert {f["path"] for f in manifest["files"]} == {p.name for p in folder.iterdir()}

    st = weights.status(spec, "llama-8b")
    assert [r.state for r in st.regions] == ["ready", "replicating"]
    assert st.regions[1].replicated == 0
    replicate(s3, spec, only=3)
    assert weights.status(spec, "llama-8b").regions[1].state == "replicating"
    replicate(s3, spec)
    st = weights.status(spec, "llama-8b")
    assert [r.state for r in st.regions] == ["ready", "ready"]
    # The same files publish as the same version and change nothing.
    assert weights.publish(spec, "llama-8b", folder).unchanged


def test_status_reports_a_corrupted_replica(tmp_path, s3, spec) -> None:
    result = weights.publish(spec, "llama-8b", model_dir(tmp_path))
    replicate(s3, spec)
    b = buckets(spec)
    key = f"models/llama-8b/{result.version}/model-00001-of-00002.safetensors"
    s3[REGIONS[1]].put_object(Bucket=b[REGIONS[1]], Key=key, Body=b"truncated",
                              Metadata={"sha256": "0" * 64})
    region = weights.status(spec, "llama-8b").regions[1]
    assert region.state == "mismatch"
    assert "model-00001-of-00002.safetensors" in region.problems[0]


def current(s3, spec) -> str | None:
    b = buckets(spec)[REGIONS[0]]
    try:
        return json.loads(s3[REGIONS[0]].get_object(
            Bucket=b, Key="models/llama-8b/current.json")["Body"].read())["version"]
    except s3[REGIONS[0]].exceptions.NoSuchKey:
        return None


def test_interrupted_upload_leaves_previous_version(tmp_path, s3, spec, monkeypatch) -> None:
    first = weights.publish(spec, "llama-8b", model_dir(tmp_path)).version
    second = model_dir(tmp_path / "v2")
    (second / "tokenizer.json").write_text('{"v": 2}')
    real = weights.client
    calls = {"parts": 0}

    def flaky(region):
        c = real(region)

        def cut(**kwargs):
            calls["parts"] += 1
            if calls["parts"] >= 2:
                raise ConnectionResetError("connection reset by peer")
        c.meta.events.register("before-send.s3.UploadPart", cut)
        return c

    with pytest.raises(weights.WeightsError, match=r"upload interrupted at .*published version"):
        weights.publish(spec, "llama-8b", second, s3_factory=flaky)
    assert current(s3, spec) == first
    assert weights.status(spec, "llama-8b").version == first


def test_missing_shard_is_refused_before_upload(tmp_path, s3, spec) -> None:
    folder = model_dir(tmp_path)
    (folder / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(weights.WeightsError, match=r"missing file.*model-00002-of-00002"):
        weights.publish(spec, "llama-8b", folder)
    assert current(s3, spec) is None


def test_file_changing_during_upload_is_a_checksum_mismatch(tmp_path, s3, spec, monkeypatch) -> None:
    first = weights.publish(spec, "llama-8b", model_dir(tmp_path)).version
    folder = model_dir(tmp_path / "v2", shards=1, shard_bytes=1024)
    real_scan = weights.scan

    def scan_then_change(path):
        entries = real_scan(path)
        (path / "config.json").write_text('{"changed": true}')  # a writer still at work
        return entries
    monkeypatch.setattr(weights, "scan", scan_then_change)
    with pytest.raises(weights.WeightsError, match=r"config\.json: checksum mismatch"):
        weights.publish(spec, "llama-8b", folder)
    assert current(s3, spec) == first


def test_cli_publish_and_status(tmp_path, s3, spec, capsys) -> None:
    stack = tmp_path / "Pulumi.w.yaml"
    stack.write_text(yaml.safe_dump({"config": {"rtip:platform": json.loads(spec.model_dump_json())}}))
    assert main(["models", "publish", str(stack), "llama-8b", "--from", str(model_dir(tmp_path))]) == 0
    assert "published" in capsys.readouterr().out
    assert main(["models", "status", str(stack), "llama-8b", "--json"]) == 3  # one region behind
    doc = json.loads(capsys.readouterr().out)
    assert [r["state"] for r in doc[0]["regions"]] == ["ready", "replicating"]
    replicate(s3, spec)
    assert main(["models", "status", str(stack), "llama-8b"]) == 0
    assert "ready" in capsys.readouterr().out
    assert main(["models", "publish", str(stack), "nope", "--from", str(tmp_path)]) == 2
    assert "not in this stack" in capsys.readouterr().err
