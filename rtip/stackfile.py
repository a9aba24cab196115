"""Read a stack's configuration the way the Pulumi CLI does: Pulumi.yaml defaults, then the stack file.

`secure:` values cannot be decrypted offline (the CLI holds the key); they become secret
placeholders, so the program sees a secret where the real run would, and nothing leaks.

A key written twice in one mapping is an error with both lines (a plain YAML reader keeps the last
value silently). `json_schema()` is the stack file's JSON Schema, which `rtip schema` prints.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from stacks.schema import CONFIG_KEY, CONFIG_NAMESPACE, StackSpec
from stacks.secrets import offline_placeholder

PROJECT_DIR = Path(__file__).resolve().parents[1]
STACK_TOP_KEYS = {"config", "secretsprovider", "encryptedkey", "encryptionsalt", "environment"}


class StackFileError(Exception):
    """A stack file that cannot be read; every line names the file."""

    def __init__(self, source: str, messages: list[str]) -> None:
        self.source = source
        self.messages = messages
        super().__init__("\n".join(f"{source}: {m}" for m in messages))


@dataclass(frozen=True)
class StackConfig:
    stack: str
    source: str  # the path as the user should read it
    project: str
    values: dict[str, Any]  # full key -> plain value (objects as parsed YAML)
    secret_keys: frozenset[str] = field(default_factory=frozenset)

    @property
    def platform(self) -> Any:
        return self.values.get(CONFIG_KEY)

    def for_engine(self) -> dict[str, str]:
        """Config as the language host hands it to the program: strings, objects as JSON."""
        return {k: v if isinstance(v, str) else json.dumps(v) for k, v in self.values.items()}


def resolve(stack: str, project_dir: Path = PROJECT_DIR) -> tuple[str, Path]:
    """A stack name (`dev`) or a path to any `Pulumi.<name>.yaml` -> (name, path)."""
    candidate = Path(stack)
    if candidate.suffix in (".yaml", ".yml") or "/" in stack:
        name = candidate.name
        if not (name.startswith("Pulumi.") and name.count(".") >= 2):
            raise StackFileError(stack, ["expected a file named Pulumi.<stack>.yaml"])
        return name[len("Pulumi."):].rsplit(".", 1)[0], candidate
    return stack, project_dir / "stacks" / f"Pulumi.{stack}.yaml"


def _read_yaml(path: Path, source: str) -> Any:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise StackFileError(source, ["no such stack file"]) from None
    except OSError as err:
        raise StackFileError(source, [f"cannot read: {err.strerror}"]) from None
    try:
        return _parse(text, source)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise StackFileError(source, [f"{where}not valid YAML: {err.problem}"]) from None
    except yaml.YAMLError as err:
        raise StackFileError(source, [f"not valid YAML: {err}"]) from None


def _parse(text: str, source: str) -> Any:
    """`yaml.safe_load`, but a key written twice in a mapping is a StackFileError."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        duplicates = list(_duplicate_keys(node, ""))
        if duplicates:
            raise StackFileError(source, duplicates)
        return loader.construct_document(node)
    finally:
        loader.dispose()


MERGE_TAG = "tag:yaml.org,2002:merge"


def _duplicate_keys(node: Node, path: str) -> Iterator[str]:
    """`path.key: line L, column C: ...` for every key repeated in a mapping, at any depth."""
    if isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            yield from _duplicate_keys(item, f"{path}[{i}]")
        return
    if not isinstance(node, MappingNode):
        return
    first: dict[tuple[str, str], Node] = {}
    for key, value in node.value:
        if key.tag == MERGE_TAG:  # `<<: *anchor`: merged keys may be overridden, by design
            continue
        name = key.value if isinstance(key, ScalarNode) else "(complex key)"
        at = f"{path}.{name}" if path else str(name)
        if isinstance(key, ScalarNode):
            seen = first.setdefault((key.tag, key.value), key)
            if seen is not key:
                mark = key.start_mark
                yield (f"{at}: line {mark.line + 1}, column {mark.column + 1}: key {name!r} is written "
                       f"twice in this mapping (first on line {seen.start_mark.line + 1}); YAML "
                       "readers disagree on which one counts: write it once")
        yield from _duplicate_keys(value, at)


def _project_defaults(project_dir: Path) -> tuple[str, dict[str, Any]]:
    doc = _read_yaml(project_dir / "Pulumi.yaml", "Pulumi.yaml") or {}
    name = doc.get("name", CONFIG_NAMESPACE)
    values: dict[str, Any] = {}
    for key, decl in (doc.get("config") or {}).items():
        full = key if ":" in key else f"{name}:{key}"
        if isinstance(decl, dict) and "default" in decl:
            values[full] = decl["default"]
        elif isinstance(decl, dict) and "value" in decl:
            values[full] = decl["value"]
        elif not isinstance(decl, dict):
            values[full] = decl
    return name, values


def load(stack: str, project_dir: Path = PROJECT_DIR) -> StackConfig:
    name, path = resolve(stack, project_dir)
    source = str(path)
    project, values = _project_defaults(project_dir)
    declared = set(values)
    doc = _read_yaml(path, source)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise StackFileError(source, [f"expected a mapping with a `config:` key, got {type(doc).__name__}"])
    problems = [f"{k}: unknown top-level key; expected one of: {', '.join(sorted(STACK_TOP_KEYS))}"
                for k in doc if k not in STACK_TOP_KEYS]
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        problems.append(f"config: expected a mapping, got {type(config).__name__}")
        config = {}
    secrets: set[str] = set()
    for key, value in config.items():
        if not isinstance(key, str) or key.count(":") != 1:
            problems.append(f"config.{key}: keys are `namespace:name`, e.g. {CONFIG_KEY}")
            continue
        is_secure = isinstance(value, dict) and set(value) == {"secure"}
        if key.startswith(f"{project}:") and key not in declared and key != CONFIG_KEY \
                and not is_secure:
            problems.append(f"config.{key}: unknown key; expected {CONFIG_KEY}, a key declared in "
                            "Pulumi.yaml, or a `secure:` value")
            continue
        if is_secure:
            secrets.add(key)
            values[key] = offline_placeholder(key)
        else:
            values[key] = value
    if problems:
        raise StackFileError(source, problems)
    return StackConfig(stack=name, source=source, project=project, values=values,
                       secret_keys=frozenset(secrets))


SCHEMA_PATH = PROJECT_DIR / "stacks" / "stack.schema.json"
# A stack file's first line, relative to the file, so editors validate and complete it.
SCHEMA_COMMENT = "# yaml-language-server: $schema=./stack.schema.json"


def json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of a stack file: `config` holds `rtip:platform` (the StackSpec,
    with every field's description), other keys of this project only as `secure:` values, keys of
    other namespaces (`aws:region` ...) as any value. The cross-field and catalog checks of
    `stacks.checks` are not in it: `rtip plan` runs those."""
    platform = StackSpec.model_json_schema(ref_template="#/$defs/{model}")
    defs: dict[str, Any] = platform.pop("$defs", {})
    defs["StackSpec"] = platform
    defs["Secure"] = {
        "type": "object", "title": "Secure", "additionalProperties": False, "required": ["secure"],
        "properties": {"secure": {"type": "string", "minLength": 1}},
        "description": "A secret, encrypted by `pulumi config set --secret KEY VALUE`.",
    }
    own = CONFIG_NAMESPACE
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "rtip stack file (stacks/Pulumi.<stack>.yaml)",
        "description": f"A Pulumi stack file of the {own} project; all of the platform lives under "
                       f"config.{CONFIG_KEY}. Generated by `rtip schema`.",
        "type": "object",
        "additionalProperties": False,
        "required": ["config"],
        "properties": {
            "config": {
                "type": "object",
                "description": f"Stack configuration; keys are namespace:name. {CONFIG_KEY} holds "
                               "the platform; other keys of this project are secrets.",
                "required": [CONFIG_KEY],
                "properties": {CONFIG_KEY: {"$ref": "#/$defs/StackSpec"}},
                "patternProperties": {
                    f"^{own}:(?!platform$)[^:]+$": {"$ref": "#/$defs/Secure"},
                    f"^(?!{own}:)[^:]+:[^:]+$": {},
                },
                "additionalProperties": False,
            },
            "secretsprovider": {"type": "string", "description": "Pulumi's secrets provider URL."},
            "encryptedkey": {"type": "string", "description": "The stack's encrypted data key."},
            "encryptionsalt": {"type": "string", "description": "Salt of the passphrase provider."},
            "environment": {"type": "array", "items": {"type": "string"},
                            "description": "Pulumi ESC environments imported into the stack."},
        },
        "$defs": defs,
    }


__all__ = ["PROJECT_DIR", "SCHEMA_COMMENT", "SCHEMA_PATH", "StackConfig", "StackFileError", "json_schema",
           "load", "resolve"]
