"""Turn the `rtip:platform` config value into a StackSpec, or a SpecError listing every problem.

The same function serves the Pulumi program (value from `pulumi.Config`) and the offline CLI
(value read from the stack file), so both reject the same input with the same messages.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from stacks.checks import Problem, check
from stacks.schema import CONFIG_KEY, StackSpec


class SpecError(Exception):
    """A stack that must not be planned; `problems` point into the stack file."""

    def __init__(self, source: str, problems: Sequence[Problem]) -> None:
        self.source = source
        self.problems = list(problems)
        super().__init__(self.render())

    def render(self) -> str:
        lines = [f"{self.source}: {len(self.problems)} problem(s) in {CONFIG_KEY}:"]
        lines += [f"  {self.source}: {_join(CONFIG_KEY, p.path)}: {p.message}" for p in self.problems]
        return "\n".join(lines)


def _join(root: str, path: str) -> str:
    if not path:
        return root
    return f"{root}{path}" if path.startswith("[") else f"{root}.{path}"


def load_spec(raw: Any, source: str) -> StackSpec:
    """Validate shape and types, then the cross-field and catalog checks."""
    if raw is None:
        raise SpecError(source, [Problem("", f"missing; set {CONFIG_KEY} to a mapping")])
    if not isinstance(raw, dict):
        raise SpecError(source, [Problem("", f"expected a mapping, got {type(raw).__name__}")])
    try:
        spec = StackSpec.model_validate(raw)
    except ValidationError as err:
        raise SpecError(source, [_problem(e) for e in err.errors()]) from None
    problems = check(spec)
    if problems:
        raise SpecError(source, problems)
    return spec


def _problem(error: Any) -> Problem:
    path, model = _path(error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        allowed = ", ".join(model.model_fields) if model else ""
        return Problem(path, f"unknown key; expected one of: {allowed}")
    if kind == "missing":
        return Problem(path, "required key is missing")
    got = error.get("input")
    shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
    return Problem(path, f"{error['msg'][0].lower()}{error['msg'][1:]} (got {shown})")


def _path(loc: Sequence[Any]) -> tuple[str, type[BaseModel] | None]:
    """A key path like `regions[0].gpu_pools[1].sharing.layout`, dropping the discriminator tags
    pydantic inserts for tagged unions, and the model that owns the last key."""
    parts: list[str] = []
    tp: Any = StackSpec
    owner: type[BaseModel] | None = StackSpec
    for item in loc:
        tp = _unwrap(tp)
        if isinstance(item, int):
            parts.append(f"[{item}]")
            args = typing.get_args(tp)
            tp = args[0] if args else Any
            continue
        members = _union_members(tp)
        if members and item in members:  # a discriminator tag, not a key
            tp = members[item]
            continue
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            owner = tp
            field = tp.model_fields.get(item)
            tp = field.annotation if field else Any
        else:
            owner = None
            tp = Any
        parts.append(("." if parts else "") + str(item))
    last = _unwrap(tp)
    if isinstance(last, type) and issubclass(last, BaseModel):
        owner = last
    return "".join(parts), owner


def _unwrap(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    args = typing.get_args(tp)
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return _unwrap(non_none[0])
    return tp


def _union_members(tp: Any) -> dict[str, type[BaseModel]]:
    if not (isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union):
        return {}
    members: dict[str, type[BaseModel]] = {}
    for arg in typing.get_args(tp):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            for name in ("cloud", "mode"):
                field = arg.model_fields.get(name)
                if field is not None:
                    for tag in typing.get_args(field.annotation):
                        members[tag] = arg
    return members


__all__ = ["SpecError", "load_spec"]
