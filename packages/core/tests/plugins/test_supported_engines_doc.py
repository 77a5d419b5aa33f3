"""docs/reference/supported-engines.md is generated from plugin metadata and must not drift.

Regenerate with ``.venv/bin/llmaz backends table > docs/reference/supported-engines.md`` or run this
test with ``LLMAZ_UPDATE_DOCS=1``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from llmaz.cli.catalog import hooks_markdown, supported_engines_markdown
from llmaz.plugins import PluginManager

PAGE = Path(__file__).resolve().parents[4] / "docs" / "reference" / "supported-engines.md"


def test_supported_engines_page_is_current() -> None:
    manager = PluginManager.from_environment(environ={})
    assert manager.errors == []
    expected = supported_engines_markdown(manager)
    if os.environ.get("LLMAZ_UPDATE_DOCS"):
        PAGE.write_text(expected)
    assert PAGE.read_text() == expected, (
        "docs/reference/supported-engines.md is stale: run "
        "`.venv/bin/llmaz backends table > docs/reference/supported-engines.md`"
    )


def test_every_backend_documents_its_flags() -> None:
    manager = PluginManager.from_environment(environ={})
    for name, backend in manager.backends.items():
        assert backend.docs_url.startswith("https://"), name
        assert backend.engine, name


HOOKS_PAGE = PAGE.parents[1] / "plugins" / "hooks.md"


def test_hooks_page_is_current() -> None:
    expected = hooks_markdown()
    if os.environ.get("LLMAZ_UPDATE_DOCS"):
        HOOKS_PAGE.write_text(expected)
    assert HOOKS_PAGE.read_text() == expected, (
        "docs/plugins/hooks.md is stale: run `.venv/bin/llmaz plugins hooks > docs/plugins/hooks.md`"
    )
    assert "## `llmaz_register_backends`" in expected
    assert "## `llmaz_register_autoscalers`" in expected


def test_hooks_page_is_markdown_not_restructuredtext() -> None:
    page = hooks_markdown()
    for rst in (":param ", ":class:", ":func:", ":meth:", ":data:", ".. versionadded::"):
        assert rst not in page, rst
    assert not re.search(r"(?<!`)``(?!`)", page), "an RST double-backtick literal is left"
    assert "- `register`: the registry to add to." in page
    assert "```python\nfrom llmaz.plugins import BackendRegistry, hookimpl" in page
    assert "## `llmaz_register_commands`" in page
