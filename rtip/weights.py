"""Publish model weights into a stack's S3 weights store and report their replication per region.

Layout under each bucket:
    models/<model>/<version>/<files...>       the weights, tokenizer and config, as uploaded
    models/<model>/<version>/manifest.json    every file with its size and sha256, written last
    models/<model>/current.json               which version clusters load; moved only after the
                                              manifest exists, so a half-upload is never current
A version is the first 16 hex digits of the sha256 over the sorted (path, sha256) pairs, so the
same files always publish as the same version.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import BotoCoreError, ClientError

from stacks.naming import model_prefix, weights_bucket, weights_regions
from stacks.schema import StackSpec

ENDPOINT_ENV = "RTIP_S3_ENDPOINT_URL"  # an S3-compatible endpoint (tests: moto on 127.0.0.1)
MANIFEST = "manifest.json"
CURRENT = "current.json"
CHUNK = 8 * 1024 * 1024
TRANSFER = TransferConfig(multipart_threshold=CHUNK, multipart_chunksize=CHUNK, max_concurrency=4)
FILE_WORKERS = 4


class WeightsError(Exception):
    """A publish or status problem the user can act on."""


@dataclass(frozen=True)
class FileEntry:
    path: str
    size: int
    sha256: str


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def scan(folder: Path) -> list[FileEntry]:
    """Every file of a model folder, after checking the folder is a complete checkpoint."""
    if not folder.is_dir():
        raise WeightsError(f"{folder}: no such folder")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    names = {p.relative_to(folder).as_posix() for p in files}
    if "config.json" not in names:
        raise WeightsError(f"{folder}: missing config.json; expected a Hugging Face model folder")
    if not any(n.endswith(".safetensors") for n in names):
        raise WeightsError(f"{folder}: no *.safetensors weights")
    index = folder / "model.safetensors.index.json"
    if index.exists():
        try:
            shards = set(json.loads(index.read_text())["weight_map"].values())
        except (ValueError, KeyError) as err:
            raise WeightsError(f"{index}: not a safetensors index ({err})") from None
        missing = sorted(shards - names)
        if missing:
            raise WeightsError(f"{folder}: missing file(s) named in model.safetensors.index.json: "
                               f"{', '.join(missing)}")
    return [FileEntry(p.relative_to(folder).as_posix(), p.stat().st_size, _sha256(p)) for p in files]


def version_of(entries: list[FileEntry]) -> str:
    digest = hashlib.sha256()
    for e in sorted(entries, key=lambda e: e.path):
        digest.update(f"{e.path}\0{e.sha256}\n".encode())
    return digest.hexdigest()[:16]


class _HashingReader:
    """Hashes what the upload actually reads, to catch a file that changed after it was scanned.

    The transfer may seek back and read a range again (to checksum a part before sending it);
    only bytes read at the frontier of what was already hashed extend the digest, so every byte
    counts once, as it was first read."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.digest = hashlib.sha256()
        self._hashed = 0

    def read(self, size: int = -1) -> bytes:
        at = self._f.tell()
        data = self._f.read(size)
        if at <= self._hashed < at + len(data):
            self.digest.update(data[self._hashed - at:])
            self._hashed = at + len(data)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


def client(region: str) -> Any:
    return boto3.client("s3", region_name=region, endpoint_url=os.environ.get(ENDPOINT_ENV) or None)


def _current(s3: Any, bucket: str, model: str) -> str | None:
    try:
        body = s3.get_object(Bucket=bucket, Key=f"{model_prefix(model)}/{CURRENT}")["Body"].read()
    except ClientError as err:
        if err.response["Error"]["Code"] in ("NoSuchKey", "404"):
            return None
        raise
    return json.loads(body)["version"]


@dataclass(frozen=True)
class PublishResult:
    model: str
    version: str
    bucket: str
    files: int
    bytes: int
    previous: str | None
    unchanged: bool


def publish(spec: StackSpec, model: str, folder: Path,
            s3_factory: Callable[[str], Any] = client) -> PublishResult:
    """Upload a model folder to the stack's primary weights bucket; replication copies it on."""
    if model not in {m.name for m in spec.models}:
        raise WeightsError(f"model {model!r} is not in this stack; expected one of: "
                           f"{', '.join(sorted(m.name for m in spec.models))}")
    regions = weights_regions(spec, "aws")
    if not regions:
        raise WeightsError("this stack has no AWS region: `models publish` writes to S3 weights stores")
    primary = regions[0]
    bucket = weights_bucket(spec, primary)
    s3 = s3_factory(primary.region)
    entries = scan(folder)
    version = version_of(entries)
    try:
        previous = _current(s3, bucket, model)
    except (ClientError, BotoCoreError) as err:
        raise WeightsError(f"cannot read s3://{bucket}: {err}") from None
    base = f"{model_prefix(model)}/{version}"
    if previous == version:
        return PublishResult(model, version, bucket, len(entries), sum(e.size for e in entries),
                             previous, unchanged=True)
    keep = f"the published version ({previous or 'none'}) is unchanged"

    def upload(entry: FileEntry) -> None:
        with (folder / entry.path).open("rb") as f:
            reader = _HashingReader(f)
            s3.upload_fileobj(reader, bucket, f"{base}/{entry.path}", Config=TRANSFER,
                              ExtraArgs={"Metadata": {"sha256": entry.sha256}})
        if reader.digest.hexdigest() != entry.sha256:
            raise WeightsError(f"{entry.path}: checksum mismatch: the file changed while it was "
                               f"uploading (scanned {entry.sha256[:12]}, sent "
                               f"{reader.digest.hexdigest()[:12]}); {keep}")
        head = s3.head_object(Bucket=bucket, Key=f"{base}/{entry.path}")
        if head["ContentLength"] != entry.size or head.get("Metadata", {}).get("sha256") != entry.sha256:
            raise WeightsError(f"{entry.path}: the stored object does not match the file "
                               f"(size {head['ContentLength']} vs {entry.size}); {keep}")

    with ThreadPoolExecutor(max_workers=FILE_WORKERS) as pool:
        futures = {pool.submit(upload, e): e for e in entries}
        for future in as_completed(futures):
            try:
                future.result()
            except WeightsError:
                raise
            except (ClientError, BotoCoreError, OSError) as err:
                raise WeightsError(f"upload interrupted at {futures[future].path}: {err}; "
                                   f"{keep}") from None
    manifest = {
        "model": model, "version": version, "created": datetime.now(UTC).isoformat(),
        "files": [e.__dict__ for e in entries],
    }
    try:
        s3.put_object(Bucket=bucket, Key=f"{base}/{MANIFEST}", Body=json.dumps(manifest, indent=2).encode(),
                      ContentType="application/json")
        s3.put_object(Bucket=bucket, Key=f"{model_prefix(model)}/{CURRENT}",
                      Body=json.dumps({"version": version, "manifest": f"{base}/{MANIFEST}"}).encode(),
                      ContentType="application/json")
    except (ClientError, BotoCoreError) as err:
        raise WeightsError(f"writing the manifest failed: {err}; {keep}") from None
    return PublishResult(model, version, bucket, len(entries), sum(e.size for e in entries), previous,
                         unchanged=False)


@dataclass(frozen=True)
class RegionStatus:
    region: str
    bucket: str
    files: int
    replicated: int
    problems: tuple[str, ...]

    @property
    def state(self) -> str:
        if self.problems:
            return "mismatch"
        return "ready" if self.replicated == self.files else "replicating"


@dataclass(frozen=True)
class ModelStatus:
    model: str
    version: str | None
    regions: tuple[RegionStatus, ...]


def _heads(s3: Any, bucket: str, base: str, files: list[dict[str, Any]]) -> Iterator[tuple[dict, Any]]:
    for f in files:
        try:
            yield f, s3.head_object(Bucket=bucket, Key=f"{base}/{f['path']}")
        except ClientError as err:
            if err.response["Error"]["Code"] not in ("404", "NoSuchKey", "NotFound"):
                raise
            yield f, None


def status(spec: StackSpec, model: str, s3_factory: Callable[[str], Any] = client) -> ModelStatus:
    """Per region: whether every file of the current manifest has arrived with its size and sha256."""
    regions = weights_regions(spec, "aws")
    if not regions:
        raise WeightsError("this stack has no AWS region with an S3 weights store")
    primary = regions[0]
    s3 = s3_factory(primary.region)
    bucket = weights_bucket(spec, primary)
    try:
        version = _current(s3, bucket, model)
    except (ClientError, BotoCoreError) as err:
        raise WeightsError(f"cannot read s3://{bucket}: {err}") from None
    if version is None:
        return ModelStatus(model, None, ())
    base = f"{model_prefix(model)}/{version}"
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=f"{base}/{MANIFEST}")["Body"].read())
    files = manifest["files"]
    out = []
    for region in regions:
        rs3 = s3 if region is primary else s3_factory(region.region)
        rbucket = weights_bucket(spec, region)
        arrived, problems = 0, []
        for f, head in _heads(rs3, rbucket, base, files):
            if head is None:
                continue
            got = head.get("Metadata", {}).get("sha256")
            if head["ContentLength"] != f["size"] or got != f["sha256"]:
                problems.append(f"{f['path']}: size {head['ContentLength']} sha256 {str(got)[:12]} "
                                f"!= manifest {f['size']} {f['sha256'][:12]}")
            else:
                arrived += 1
        out.append(RegionStatus(region.region, rbucket, len(files), arrived, tuple(problems)))
    return ModelStatus(model, version, tuple(out))


__all__ = ["ENDPOINT_ENV", "FileEntry", "ModelStatus", "PublishResult", "RegionStatus", "WeightsError",
           "publish", "scan", "status", "version_of"]
