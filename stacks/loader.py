"""Turn the `rtip:platform` config value into a StackSpec, or a SpecError listing every problem.

The same function serves the Pulumi program (value from `pulumi.Config`) and the offline CLI
(value read from the stack file), so both reject the same input with the same messages. Messages
are plain words: pydantic's errors are rewritten here (`_plain`), never shown as regexes or class
names; a value of the wrong kind says what YAML read (a number where text is expected gets a hint
to quote it).
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from stacks.checks import Problem, check
from stacks.schema import CONFIG_KEY, PATTERN_WORDS, StackSpec
from stacks.secrets import SecretState, secret_problems, webhook_problems

KEY_MARK = "[key]"  # pydantic's last loc item when a mapping's key, not its value, is wrong


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


def load_spec(raw: Any, source: str, secrets: Callable[[str], SecretState] | None = None,
              reveal: Callable[[str], str | None] | None = None) -> StackSpec:
    """Validate shape and types, then the cross-field and catalog checks and (given `secrets`, the
    state of a config key) the secrets the stack names, and (given `reveal`, a secret's clear
    value where the runtime holds it) the webhook URLs: one run reports them all, a missing
    secret beside a cross-field problem too. A value of the wrong shape stops before the rest,
    since what it names cannot be read."""
    if raw is None:
        raise SpecError(source, [Problem("", f"missing; set {CONFIG_KEY} to a mapping")])
    if not isinstance(raw, dict):
        raise SpecError(source, [Problem("", f"expected a mapping, got {type(raw).__name__}")])
    try:
        spec = StackSpec.model_validate(raw)
    except ValidationError as err:
        raise SpecError(source, [_problem(e) for e in err.errors()]) from None
    problems = check(spec)
    if secrets is not None:
        problems += secret_problems(spec, secrets)
    if reveal is not None:
        problems += webhook_problems(spec, reveal)
    if problems:
        raise SpecError(source, problems)
    return spec


def _problem(error: Any) -> Problem:
    loc = list(error["loc"])
    is_key = bool(loc) and loc[-1] == KEY_MARK
    if is_key:
        loc.pop()
    path, owner, tp = _path(loc)
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        key = str(ctx.get("discriminator", "")).strip("'")
        tags = ", ".join(_union_members(_unwrap(tp)))
        path = f"{path}.{key}" if path else key
        if kind == "union_tag_not_found":
            return Problem(path, f"required key is missing; expected one of: {tags}")
        return Problem(path, f"unknown {key} {ctx.get('tag')!r}; expected one of: {tags}")
    field = path.rsplit(".", 1)[-1]
    if kind == "extra_forbidden":
        allowed = list(owner.model_fields) if owner else []
        close = difflib.get_close_matches(field, allowed, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        elsewhere = _sibling_clouds(owner, field)
        if elsewhere:
            hint = f" here: it is a key of {', '.join(elsewhere)} regions only"
        return Problem(path, f"unknown key{hint}; expected one of: {', '.join(allowed)}")
    if kind == "missing":
        return Problem(path, "required key is missing")
    message = _plain(kind, ctx, error.get("input"), _optional(owner, field), error["msg"])
    return Problem(path, f"as a key: {message}" if is_key else message)


def _sibling_clouds(owner: Any, field: str) -> list[str]:
    """The clouds whose member of `owner`'s union (a region per cloud) has `field`: `zones_down`
    on a GCP region is an AWS key, not a typo."""
    if owner is None:
        return []
    found = []
    for base in owner.__bases__:
        for sibling in base.__subclasses__():
            cloud = getattr(sibling, "model_fields", {}).get("cloud")
            if sibling is not owner and field in sibling.model_fields and cloud is not None:
                found.extend(str(v) for v in get_args(cloud.annotation))
    return sorted(found)


def _shown(value: Any) -> str:
    """A value as the stack file wrote it: YAML spellings for booleans, null and non-finite numbers."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def _kind_of(value: Any) -> str:
    """What YAML made of a value, for `expected X, got <this>`."""
    if isinstance(value, bool):
        return f"the boolean {_shown(value)}"
    if isinstance(value, (int, float)):
        return f"the number {_shown(value)}"
    if isinstance(value, str):
        return f"the text {value!r}"
    return _shown(value)


def _quote_hint(value: Any) -> str:
    if isinstance(value, bool):
        return ("; YAML reads unquoted true/false/yes/no/on/off as booleans: put the value in quotes")
    if isinstance(value, float):
        return (f"; put the value in quotes, e.g. \"{value}\" (unquoted, YAML reads digits as a number "
                "and drops trailing zeros: 1.30 becomes 1.3)")
    if isinstance(value, int):
        return f"; put the value in quotes: \"{value}\""
    return ""


def _plain(kind: str, ctx: dict[str, Any], got: Any, optional: bool, msg: str) -> str:
    """One pydantic error type in plain words."""
    limits = {"greater_than_equal": ("at least", "ge"), "greater_than": ("more than", "gt"),
              "less_than_equal": ("at most", "le"), "less_than": ("less than", "lt")}
    if kind in limits:
        words, key = limits[kind]
        limit = ctx[key]
        if isinstance(limit, float) and limit.is_integer():
            limit = int(limit)
        return f"must be {words} {_shown(limit)} (got {_shown(got)})"
    if kind == "string_pattern_mismatch":
        words = PATTERN_WORDS.get(str(ctx.get("pattern")), "does not have the expected form")
        return f"{words} (got {_shown(got)})"
    if kind == "string_type":
        return f"expected text, got {_kind_of(got)}{_quote_hint(got)}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        hint = "; remove the quotes" if isinstance(got, str) and got.strip().isdigit() else ""
        if isinstance(got, float) and got.is_integer():
            hint = f"; write {int(got)}"
        return f"expected a whole number, got {_kind_of(got)}{hint}"
    if kind in ("float_type", "float_parsing"):
        hint = "; remove the quotes" if isinstance(got, str) and _is_number(got) else ""
        return f"expected a number, got {_kind_of(got)}{hint}"
    if kind == "finite_number":
        return f"expected a finite number, got {_shown(got)}"
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false, got {_kind_of(got)}"
    if kind in ("literal_error", "enum"):
        return f"expected {ctx.get('expected')} (got {_shown(got)})"
    if kind == "too_short":
        least = int(ctx.get("min_length", 1))
        what = "must not be empty" if least == 1 else f"needs at least {least} items"
        return what + ("; leave the key out for the default" if optional and least == 1 else "")
    if kind == "string_too_short":
        return "must not be empty"
    if kind in ("list_type", "tuple_type", "set_type"):
        return f"expected a list ([a, b] or one '- item' line each), got {_kind_of(got)}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected a mapping (key: value), got {_kind_of(got)}"
    if kind.startswith("network_"):  # stacks.schema's own words
        return msg if kind == "network_host_bits" else f"{msg} (got {_kind_of(got)})"
    return f"{msg[0].lower()}{msg[1:]} (got {_shown(got)})"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _optional(owner: type[BaseModel] | None, field: str) -> bool:
    """Whether leaving the key out is allowed (it has a default)."""
    info = owner.model_fields.get(field) if owner else None
    return info is not None and not info.is_required()


def _path(loc: Sequence[Any]) -> tuple[str, type[BaseModel] | None, Any]:
    """A key path like `regions[0].gpu_pools[1].sharing.layout`, dropping the discriminator tags
    pydantic inserts for tagged unions; the model that owns the last key; the last key's type."""
    parts: list[str] = []
    tp: Any = StackSpec
    owner: type[BaseModel] | None = StackSpec
    for item in loc:
        tp = _unwrap(tp)
        if typing.get_origin(tp) is dict:
            parts.append(f".{item}" if _plain_key(item) else f'["{item}"]')
            tp = typing.get_args(tp)[1]
            owner = None
            continue
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
    return "".join(parts).lstrip("."), owner, tp


def _plain_key(key: object) -> bool:
    return isinstance(key, str) and key.replace("-", "").replace("_", "").isalnum()


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
