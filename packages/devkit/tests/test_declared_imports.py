"""Every third-party module a published package imports comes from a distribution that package
declares (in its dependencies or one of its extras). An undeclared one is only there because
something else happened to pull it in: the loader imported ``httpx2`` (huggingface_hub's HTTP
client) without declaring it, so a huggingface_hub release that changed clients would have broken
``llmaz load-model`` with a ModuleNotFoundError. Imports only type checkers see are not counted."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from llmaz_devkit.repo import repo_root

ROOT = repo_root()
PUBLISHED = sorted(
    p.parent
    for p in (ROOT / "packages").glob("**/pyproject.toml")
    if "devkit" not in p.parts and ".venv" not in p.parts
)
PART_OF = {"pydantic-core": "pydantic"}
"""Distributions that come with another, which pins them exactly: ``pydantic_core`` is pydantic's
own core (its error and schema types are part of pydantic's API), and each pydantic release
requires one pydantic-core version, so a range of our own could only conflict with that pin."""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(pyproject: Path) -> set[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    specs = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        specs += extra
    return {_normal(re.split(r"[=<>!~\[; ]", spec, maxsplit=1)[0]) for spec in specs}


def _workspace_modules() -> dict[str, str]:
    """Top-level module -> distribution, for the workspace's own packages (installed editable,
    which ``packages_distributions`` does not map)."""
    found: dict[str, str] = {}
    for pyproject in (ROOT / "packages").glob("**/pyproject.toml"):
        name = _normal(tomllib.loads(pyproject.read_text())["project"]["name"])
        for module in (pyproject.parent / "src").iterdir():
            if module.is_dir() and (module / "__init__.py").exists():
                found[module.name] = name
    return found


def _runtime_imports(tree: ast.AST) -> Iterator[str]:
    """Top-level names of absolute imports, skipping ``if TYPE_CHECKING:`` blocks."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.If)
            and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
        ):
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


@pytest.mark.parametrize("package", PUBLISHED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_third_party_import_is_declared(package: Path) -> None:
    declared = _declared(package / "pyproject.toml")
    own = {p.name for p in (package / "src").iterdir() if p.is_dir() and not p.name.endswith(".egg-info")}
    providers = {module: [*dists] for module, dists in packages_distributions().items()}
    providers.update({module: [dist] for module, dist in _workspace_modules().items()})
    missing: dict[str, list[str]] = {}
    for source in sorted((package / "src").rglob("*.py")):
        for module in _runtime_imports(ast.parse(source.read_text())):
            if module in sys.stdlib_module_names or module in own or module == "__future__":
                continue
            dists = {PART_OF.get(_normal(d), _normal(d)) for d in providers.get(module, [])}
            assert dists, (
                f"{source.relative_to(ROOT)} imports {module}, which no installed distribution provides"
            )
            if not dists & declared:
                missing.setdefault(f"{module} ({', '.join(sorted(dists))})", []).append(
                    str(source.relative_to(ROOT))
                )
    assert not missing, f"imported but not declared in {package.name}/pyproject.toml: {missing}"
