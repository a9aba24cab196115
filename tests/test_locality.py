"""Every cluster pulls images and weights from the copy in its own region."""

from __future__ import annotations

import pytest

from stacks.naming import weights_root
from tests.conftest import record_of, spec_of


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_region_has_its_own_store(stack) -> None:
    spec = spec_of(stack)
    stores = record_of(stack).outputs["stores"]
    assert set(stores) == {r.region for r in spec.regions}
    for region in spec.regions:
        store = stores[region.region]
        assert store["weights"] == weights_root(spec, region)
        registry = store["imageRegistry"]
        if region.cloud == "aws":
            assert registry.endswith(f".dkr.ecr.{region.region}.amazonaws.com/{spec.registries.name_prefix}")
        elif region.cloud == "gcp":
            assert registry.startswith(f"{region.region}-docker.pkg.dev/{region.project}/")
        else:
            # One ACR login server; Premium geo-replication serves each region from its replica.
            assert registry.endswith(".azurecr.io")


def test_aws_weights_are_regional_buckets() -> None:
    spec = spec_of("prod")
    stores = record_of("prod").outputs["stores"]
    aws = [r for r in spec.regions if r.cloud == "aws"]
    assert len({stores[r.region]["weights"] for r in aws}) == len(aws)
    for r in aws:
        assert r.region in stores[r.region]["weights"]
