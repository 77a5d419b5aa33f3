"""Entry point ``llmaz: devkit``: mounts ``llmaz demo`` (only in the repository's workspace)."""

from __future__ import annotations

from llmaz.plugins import CommandRegistry, hookimpl

LLMAZ_PLUGIN_API = "1"


@hookimpl
def llmaz_register_commands(register: CommandRegistry) -> None:
    from llmaz_devkit.demo import demo

    register.add("demo", demo)
