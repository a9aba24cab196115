"""The rtip Pulumi program: the same code runs under `pulumi up` and under `rtip plan`."""

import pulumi

from components.platform import Platform
from stacks.loader import SpecError, load_spec
from stacks.schema import CONFIG_NAMESPACE

config = pulumi.Config(CONFIG_NAMESPACE)
try:
    spec = load_spec(config.get_object("platform"), f"stack {pulumi.get_stack()}")
except SpecError as err:
    # RunError prints the message without a Python traceback.
    raise pulumi.RunError(str(err)) from None

platform = Platform(f"rtip-{spec.environment}", spec)
pulumi.export("clusters", {c.name: {"cloud": str(c.cloud), "region": c.region,
                                    "endpoint": c.endpoint} for c in platform.clusters})
pulumi.export("unbuiltRegions", platform.unbuilt)
# Where each region's cluster pulls images and weights from: its own region's copy.
pulumi.export("stores", {region: {"cloud": str(s.cloud), "imageRegistry": s.image_registry,
                                  "weights": s.weights_uri} for region, s in platform.stores.items()})
