"""The policy pack: wiring only (rules are plain functions in policies/rules/, listed in pack.py).

`pulumi preview --policy-pack policies --policy-pack-config policies/config/<env>.json` runs it
against a real stack; `rtip check STACK` drives the same pack offline through its analyzer.
"""

import sys
from pathlib import Path

from pulumi_policy import EnforcementLevel, PolicyPack

# The CLI runs this file from the pack's folder; the rules import `policies` and `serving`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from policies.pack import PACK_NAME, policies

PolicyPack(name=PACK_NAME, enforcement_level=EnforcementLevel.ADVISORY, policies=policies())
