"""The rtip Pulumi program: the same code runs under `pulumi up` and under `rtip plan`.

The stack is validated (the secret config values it names too: stacks.secrets) and planned once
(stacks.plan.load_plan), before any resource is registered; the platform is built from that
plan, and the offline engine reads the very same `plan` value back from this module's namespace.
"""

import pulumi

from components.platform import Platform
from components.secrets import secret_state, secret_value
from stacks.loader import SpecError
from stacks.plan import load_plan
from stacks.schema import CONFIG_NAMESPACE

try:
    plan = load_plan(pulumi.Config(CONFIG_NAMESPACE).get_object("platform"), f"stack {pulumi.get_stack()}",
                     secrets=secret_state, reveal=secret_value)
except SpecError as err:
    # RunError prints the message without a Python traceback.
    raise pulumi.RunError(str(err)) from None

platform = Platform(f"rtip-{plan.spec.environment}", plan)
pulumi.export("clusters", {c.name: {"cloud": str(c.cloud), "region": c.region,
                                    "endpoint": c.endpoint} for c in platform.clusters})
# Where each region's cluster pulls images and weights from: its own region's copy.
pulumi.export("stores", {region: {"cloud": str(s.cloud), "imageRegistry": s.image_registry,
                                  "weights": s.weights_uri} for region, s in platform.stores.items()})
