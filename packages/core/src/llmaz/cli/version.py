"""``llmaz version``."""

from __future__ import annotations

import typer

from llmaz.plugins.registry import CommandRegistry


def version() -> None:
    """Print the llmaz version."""
    from llmaz import __version__

    typer.echo(__version__)


def llmaz_register_commands(register: CommandRegistry) -> None:
    register.add("version", version)
