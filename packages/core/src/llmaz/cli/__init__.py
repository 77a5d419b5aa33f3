"""The ``llmaz`` command line.

Every command, core or plugin, is added through one mechanism: a ``llmaz_register_commands(register)``
function that calls ``register.add(name, typer_app_or_function)``. The core command modules listed in
:data:`CORE_COMMAND_MODULES` each define it (adding a core command is one line there); plugins
implement the same function as the pluggy hook of that name (:mod:`llmaz.plugins.hookspecs`) and are
listed by ``llmaz plugins list``. :func:`mount` attaches them all to :data:`app`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import typer

from llmaz.plugins.registry import CommandRegistry

__all__ = ["CORE_COMMAND_MODULES", "app", "main", "mount", "runs_core_command"]

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
"""Apps with the core commands attached."""
_plugins_mounted: set[int] = set()
"""Apps with the plugins' commands attached too."""


def _attach(target: typer.Typer, name: str, command: Callable[..., Any]) -> None:
    if isinstance(command, typer.Typer):
        target.add_typer(command, name=name)
    else:
        target.command(name)(command)


def _core_commands() -> CommandRegistry:
    core = CommandRegistry()
    for module in CORE_COMMAND_MODULES:
        importlib.import_module(module).llmaz_register_commands(register=core)
    return core


def mount(target: typer.Typer = app, *, plugin_commands: bool = True) -> None:
    """Attach the core commands, then (with ``plugin_commands``) every plugin's, to ``target``
    (each once per app).

    A plugin command named like a core command is not attached; a warning says which plugin tried.
    """
    core = _core_commands()
    if id(target) not in _mounted:
        _mounted.add(id(target))
        for name, command in core.items.items():
            _attach(target, name, command)
    if not plugin_commands or id(target) in _plugins_mounted:
        return
    _plugins_mounted.add(id(target))

    from llmaz.plugins.manager import PluginManager

    # only their commands are needed here, so no offline CEL rules (~11 MB of memory); the
    # commands that use the backends (render, plugins) load them with the rules checked
    plugins = PluginManager.from_environment(check_rules=False)
    for name, command in sorted(plugins.commands.items()):
        if name in core.items:
            owner = plugins.owner_of_command(name)
            who = owner.describe() if owner else "a plugin"
            typer.echo(f"warning: {who} registers command {name!r}, a core command; ignored", err=True)
            continue
        _attach(target, name, command)


def runs_core_command(args: Sequence[str]) -> bool:
    """Whether the command line ``args`` (without the program name) runs a core command."""
    return bool(args) and args[0] in _core_commands().items


_register = mount
"""Former name of :func:`mount` (tests and older callers)."""


def main() -> None:
    """``llmaz``: a core command (``llmaz operator run``, ``llmaz render``, ...) runs without the
    plugins' commands: mounting them imports every plugin and what its commands need (``llmaz
    demo``: rich's live display), start-up time for every core command and, in ``llmaz operator
    run``, memory kept for the life of the process (issue 15). Anything else (``llmaz``, ``llmaz
    --help``, a plugin's command) mounts them all."""
    mount(plugin_commands=not runs_core_command(sys.argv[1:]))
    app()
