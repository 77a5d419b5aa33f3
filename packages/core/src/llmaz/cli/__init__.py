"""The ``llmaz`` command line.

Every command, core or plugin, is added through one mechanism: a ``llmaz_register_commands(register)``
function that calls ``register.add(name, typer_app_or_function)``. The core command modules listed in
:data:`CORE_COMMAND_MODULES` each define it (adding a core command is one line there); plugins
implement the same function as the pluggy hook of that name (:mod:`llmaz.plugins.hookspecs`) and are
listed by ``llmaz plugins list``. :func:`mount` attaches them all to :data:`app`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import typer

from llmaz.plugins.registry import CommandRegistry

__all__ = ["CORE_COMMAND_MODULES", "app", "main", "mount"]

CORE_COMMAND_MODULES: tuple[str, ...] = (
    "llmaz.cli.version",
    "llmaz.cli.crds",
    "llmaz.cli.render",
    "llmaz.cli.load_model",
    "llmaz.cli.plugins",
    "llmaz.operator.cli",
)
"""Modules of the core commands, each with a ``llmaz_register_commands(register)`` function."""

app = typer.Typer(
    name="llmaz",
    help="Serve large language models on Kubernetes.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Serve large language models on Kubernetes."""


_mounted: set[int] = set()


def _attach(target: typer.Typer, name: str, command: Callable[..., Any]) -> None:
    if isinstance(command, typer.Typer):
        target.add_typer(command, name=name)
    else:
        target.command(name)(command)


def mount(target: typer.Typer = app) -> None:
    """Attach the core commands, then every plugin's, to ``target`` (once per app).

    A plugin command named like a core command is not attached; a warning says which plugin tried.
    """
    if id(target) in _mounted:
        return
    _mounted.add(id(target))
    core = CommandRegistry()
    for module in CORE_COMMAND_MODULES:
        importlib.import_module(module).llmaz_register_commands(register=core)
    for name, command in core.items.items():
        _attach(target, name, command)

    from llmaz.plugins.manager import PluginManager

    # only their commands are needed here, so no offline CEL rules: `llmaz operator run` starts
    # through this, and the CEL interpreter is ~11 MB of the operator's memory (issue 15); the
    # commands that use the backends (render, plugins) load them with the rules checked
    plugins = PluginManager.from_environment(check_rules=False)
    for name, command in sorted(plugins.commands.items()):
        if name in core.items:
            owner = plugins.owner_of_command(name)
            who = owner.describe() if owner else "a plugin"
            typer.echo(f"warning: {who} registers command {name!r}, a core command; ignored", err=True)
            continue
        _attach(target, name, command)


_register = mount
"""Former name of :func:`mount` (tests and older callers)."""


def main() -> None:
    mount()
    app()
