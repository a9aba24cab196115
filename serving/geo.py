"""Regions and availability zones the toolkit accepts, per cloud.

Zone letters: AWS EC2 "Regions and Zones", GCP "Regions and zones", Azure "Azure regions with
availability zone support" (zones are numbered 1-3 in every zoned Azure region). The tables list
regions that offer the GPU families in `hardware.py`; add a region by adding its row.
"""

from __future__ import annotations

from serving.hardware import Cloud

_AWS_ZONES = {
    "us-east-1": "abcdef",
    "us-east-2": "abc",
    "us-west-2": "abcd",
    "eu-west-1": "abc",
    "eu-central-1": "abc",
    "eu-north-1": "abc",
    "ap-northeast-1": "acd",
    "ap-southeast-2": "abc",
}
_GCP_ZONES = {
    "us-central1": "abcf",
    "us-east4": "abc",
    "us-west1": "abc",
    "europe-west4": "abc",
    "asia-southeast1": "abc",
}
_AZURE_LOCATIONS = ("eastus", "eastus2", "westus3", "southcentralus", "westeurope",
                    "swedencentral", "uksouth")

ZONES: dict[Cloud, dict[str, tuple[str, ...]]] = {
    Cloud.AWS: {r: tuple(f"{r}{c}" for c in letters) for r, letters in _AWS_ZONES.items()},
    Cloud.GCP: {r: tuple(f"{r}-{c}" for c in letters) for r, letters in _GCP_ZONES.items()},
    Cloud.AZURE: {r: ("1", "2", "3") for r in _AZURE_LOCATIONS},
}


def zones_of(cloud: Cloud, region: str) -> tuple[str, ...] | None:
    return ZONES[cloud].get(region)


__all__ = ["ZONES", "zones_of"]
