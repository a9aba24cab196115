"""The code's shape: every module imports on its own, stays small, and dependencies point one way."""

from __future__ import annotations

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rtip.stackfile import PROJECT_DIR

PACKAGES = ("serving", "stacks", "components", "rtip", "policies")
# serving <- stacks <- components <- rtip: a package may import only those to its left.
ALLOWED = {
    "serving": {"serving"},
    "stacks": {"serving", "stacks"},
    "components": {"serving", "stacks", "components"},
    "rtip": {"serving", "stacks", "components", "rtip", "policies"},
    "policies": {"serving", "policies"},
}
MAX_LINES = 400


def modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (PROJECT_DIR / pkg).rglob("*.py")
                  if (PROJECT_DIR / pkg).is_dir())


def dotted(path: Path) -> str:
    parts = list(path.relative_to(PROJECT_DIR).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_alone(name: str) -> tuple[str, str] | None:
    result = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True,
                            cwd=PROJECT_DIR, timeout=300)
    return (name, (result.stderr.strip().splitlines() or ["?"])[-1]) if result.returncode else None


def test_every_module_imports_on_its_own() -> None:
    # Each module first thing in a fresh interpreter: an import cycle, or a module that only works
    # after another was imported, fails here. Interpreters run side by side to keep this quick.
    with ThreadPoolExecutor(max_workers=4) as pool:
        # A package's __main__ is a program (the policy pack's starts its gRPC server), not a module.
        names = [dotted(p) for p in modules() if p.name != "__main__.py"]
        failed = [f for f in pool.map(_import_alone, names) if f]
    assert not failed, failed


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PROJECT_DIR)))
def test_modules_stay_small_and_import_one_way(path: Path) -> None:
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_LINES, f"{path} has more than {MAX_LINES} lines: split it"
    package = path.relative_to(PROJECT_DIR).parts[0]
    for node in ast.walk(ast.parse(text)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        for name in names:
            top = name.split(".")[0]
            if top in PACKAGES:
                assert top in ALLOWED[package], f"{path}: {package} must not import {name}"
