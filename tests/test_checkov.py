"""checkov (its own venv, FACTS.md section 8) over the rendered prod manifests.

Every failed check must be in ACCEPTED with the reason a production platform may keep it; any
other failure fails the test. `make test` installs checkov and sets RTIP_CHECKOV.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from rtip.cli import main

# check id -> why the platform keeps it (empty until a rendered object needs an exception).
ACCEPTED: dict[str, str] = {}


def checkov(folder: Path) -> list[dict]:
    binary = os.environ.get("RTIP_CHECKOV", ".venv-checkov/bin/checkov")
    if not Path(binary).exists():
        pytest.fail(f"checkov not found at {binary}: run `make test`, which installs it")
    done = subprocess.run([binary, "-d", str(folder), "--framework", "kubernetes", "-o", "json",
                           "--skip-download", "--quiet", "--compact"],
                          capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode in (0, 1), done.stderr  # 1 means some check failed
    reports = json.loads(done.stdout) if done.stdout.strip() else []
    return reports if isinstance(reports, list) else [reports]


def failed(reports: list[dict]) -> list[tuple[str, str]]:
    return [(f["check_id"], f["resource"]) for r in reports
            for f in r.get("results", {}).get("failed_checks", [])]


@pytest.fixture(scope="module")
def prod_manifests(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("prod")
    assert main(["plan", "prod", "--out", str(out)]) == 0
    return out


def test_prod_manifests_pass_checkov(prod_manifests, capsys) -> None:
    capsys.readouterr()
    reports = checkov(prod_manifests)
    scanned = sum(r.get("summary", {}).get("resource_count", 0) for r in reports)
    assert scanned > 0
    unexpected = [(c, res) for c, res in failed(reports) if c not in ACCEPTED]
    assert not unexpected, unexpected


def test_checkov_catches_an_unsafe_pod(tmp_path) -> None:
    # The gate must be able to fail: a privileged pod on a `latest` image with no limits.
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "vllm/vllm-openai:latest",
                                    "securityContext": {"privileged": True}}]}}
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod))
    ids = {c for c, _ in failed(checkov(tmp_path))}
    assert {"CKV_K8S_16", "CKV_K8S_14", "CKV_K8S_21"} <= ids  # privileged, latest tag, default ns
