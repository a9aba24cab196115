"""The stack's SLO tiers: the built-in table with the stack's `tiers:` added or overridden."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace

from serving.tiers import TIERS, TierSpec
from stacks.schema import ModelSpec, StackSpec, TierDefinition

# What a tier the stack adds gets for the fields it leaves out: the standard tier's values, and
# no time-slicing (a new tier has not said it tolerates the wider tail).
NEW_TIER_DEFAULTS = replace(TIERS["standard"], allows_time_slicing=False, anchor="")


def _missing(name: str, tier: TierDefinition) -> list[str]:
    return [] if name in TIERS else [f for f in ("ttft_ms", "tpot_ms") if getattr(tier, f) is None]


def tier_problems(spec: StackSpec) -> Iterator[tuple[str, str]]:
    """(key path, message) for tiers the stack defines incompletely."""
    for name, tier in spec.tiers.items():
        for field in _missing(name, tier):
            yield (f"tiers.{name}.{field}", f"tier {name!r} is new (not one of "
                   f"{', '.join(sorted(TIERS))}), so it needs its {field}")


def resolve_tiers(spec: StackSpec) -> dict[str, TierSpec]:
    """Every tier a model of the stack may name, with the stack's definitions applied."""
    table = dict(TIERS)
    for name, tier in spec.tiers.items():
        base = TIERS.get(name, NEW_TIER_DEFAULTS)
        given = {k: v for k, v in tier.model_dump().items() if v is not None}
        anchor = base.anchor if name in TIERS and not given else f"stack-defined tier {name}"
        table[name] = replace(base, tier=name, anchor=anchor, **given)
    return table


def tier_of(spec: StackSpec, model: ModelSpec) -> str:
    return model.tier or spec.default_tier


def known(tiers: Mapping[str, TierSpec]) -> str:
    return ", ".join(sorted(tiers))


__all__ = ["NEW_TIER_DEFAULTS", "known", "resolve_tiers", "tier_of", "tier_problems"]
