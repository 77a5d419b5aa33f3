"""One home per fact: the names and defaults of :mod:`llmaz.api.conventions` are spelled out nowhere
else in the published packages (core and the plugin packages import them), and the YAML writer and
the repository lookup each exist once."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmaz.api import conventions

ROOT = Path(__file__).resolve().parents[4]
HOME = Path(conventions.__file__).resolve()
SOURCES = sorted(
    p
    for pattern in (
        "packages/core/src/**/*.py",
        "packages/backends/*/src/**/*.py",
        "packages/autoscaling/*/src/**/*.py",
    )
    for p in ROOT.glob(pattern)
)

# Values short or common enough to mean something else elsewhere ("llmaz" is also the pluggy project
# and entry-point group; "TP"/"PP" the flavor params that feed the variables of the same name;
# "vllm" the vLLM plugin's own name, "default" a namespace).
AMBIGUOUS = {
    conventions.MANAGER,
    conventions.TP,
    conventions.PP,
    conventions.DEFAULT_CONFIG,
    conventions.DEFAULT_BACKEND,
}
FACTS = {
    name: value
    for name, value in vars(conventions).items()
    if name.isupper() and isinstance(value, str) and value not in AMBIGUOUS
}


def _string_constants(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_facts_are_only_defined_in_conventions() -> None:
    assert len(FACTS) >= 12
    assert len(SOURCES) > 40
    found = [
        f"{path.relative_to(ROOT)}:{line}: {value!r} (import {name} from llmaz.api.conventions)"
        for path in SOURCES
        if path.resolve() != HOME
        for line, value in _string_constants(path)
        for name, fact in FACTS.items()
        if value == fact
    ]
    assert found == []


@pytest.mark.parametrize(
    ("what", "pattern"),
    [
        ("the placeholder regex", re.escape(conventions.PLACEHOLDER.pattern)),
        ("the DNS-label regex", re.escape(conventions.DNS_LABEL_PATTERN)),
        ("a YAML dumper", r"class \w+\(yaml\.SafeDumper\)"),
        ("a repository-root lookup", r"def \w*repo_root\w*\("),
    ],
)
def test_one_definition_of(what: str, pattern: str) -> None:
    homes = [p for p in SOURCES if re.search(pattern, p.read_text())]
    assert len(homes) <= 1, f"{what} is defined in {len(homes)} places: {homes}"


def test_render_and_the_conformance_kit_agree_on_the_template_variables() -> None:
    from llmaz.plugins import KNOWN_VARIABLES as PLUGINS_KNOWN
    from llmaz.render.templating import KNOWN_VARIABLES as RENDER_KNOWN

    assert PLUGINS_KNOWN is RENDER_KNOWN is conventions.KNOWN_VARIABLES
    assert conventions.INSTANCE_TYPE in conventions.KNOWN_VARIABLES


def test_every_llmaz_exception_has_one_root() -> None:
    import llmaz
    from llmaz.plugins import PluginLoadError, RegistrationError
    from llmaz.render import RenderError, RenderErrors
    from llmaz.render import errors as render_errors

    typed = [v for v in vars(render_errors).values() if isinstance(v, type) and issubclass(v, Exception)]
    assert RenderErrors in typed
    for cls in [*typed, RegistrationError, PluginLoadError]:
        assert issubclass(cls, llmaz.LlmazError), cls
    error = PluginLoadError("p", None, None, "import", "boom")
    assert isinstance(error, Exception)
    assert str(error) == error.args[0] == "plugin 'p' skipped at import: boom"
    assert issubclass(RenderError, llmaz.LlmazError)
