"""``llmaz_register_commands``: plugins add ``llmaz`` commands through the same pluggy manager, with
the same error reporting as backends and autoscalers."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest
import typer
from typer.testing import CliRunner

from llmaz.cli import CORE_COMMAND_MODULES, mount
from llmaz.plugins import CommandRegistry, PluginManager, RegistrationError
from llmaz.plugins.manager import PluginManager as Manager
from llmaz.testing.plugins import make_plugin_manager, make_plugin_module


def hello(name: str = "world") -> None:
    """Say hello."""
    typer.echo(f"hello {name}")


group = typer.Typer(name="tools", no_args_is_help=True)


@group.command("ping")
def ping() -> None:
    typer.echo("pong")


def test_a_plugin_command_is_collected_and_listed() -> None:
    pm = make_plugin_manager(make_plugin_module("greeter", commands={"hello": hello, "tools": group}))
    assert pm.errors == []
    assert pm.commands == {"hello": hello, "tools": group}
    (info,) = pm.plugins
    assert (info.kind, info.commands) == ("commands", ["hello", "tools"])
    assert pm.owner_of_command("hello") is info


def test_two_plugins_with_one_command_name_skip_the_second() -> None:
    pm = make_plugin_manager(
        make_plugin_module("first", commands={"hello": hello}),
        make_plugin_module("second", commands={"hello": ping}),
    )
    assert [str(e) for e in pm.errors] == [
        "plugin 'second' skipped at collect: command 'hello' is already registered by plugin 'first'"
    ]
    assert pm.commands == {"hello": hello}


@pytest.mark.parametrize(
    ("name", "command", "message"),
    [
        ("Hello", hello, "command name 'Hello' must be lowercase"),
        ("hello", "not callable", "is neither a typer.Typer nor a function"),
    ],
)
def test_bad_registrations_name_the_plugin(name: str, command: object, message: str) -> None:
    pm = make_plugin_manager(make_plugin_module("odd", commands={name: command}))  # type: ignore[dict-item]
    (error,) = pm.errors
    assert str(error).startswith("plugin 'odd' skipped at collect: ")
    assert message in str(error)
    assert pm.commands == {}


def test_registry_refuses_a_name_twice() -> None:
    registry = CommandRegistry()
    registry.add("hello", hello)
    with pytest.raises(RegistrationError, match="registered twice"):
        registry.add("hello", hello)


def test_a_plugin_with_a_newer_api_is_skipped_with_its_commands() -> None:
    pm = make_plugin_manager(make_plugin_module("future", commands={"hello": hello}, api="99"))
    assert "supports plugin API '99'" in str(pm.errors[0])
    assert pm.commands == {}


def _app_with(monkeypatch: pytest.MonkeyPatch, *plugins: object) -> typer.Typer:
    """A fresh ``llmaz`` app whose plugin manager holds ``plugins`` only (no entry points)."""
    monkeypatch.setattr(
        Manager,
        "from_environment",
        classmethod(lambda cls, environ=None, check_rules=True: make_plugin_manager(*plugins)),
    )
    target = typer.Typer(no_args_is_help=True)

    @target.callback()
    def _root() -> None:
        """test app"""

    mount(target)
    return target


def test_plugin_commands_are_mounted_like_core_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app_with(monkeypatch, make_plugin_module("greeter", commands={"hello": hello, "tools": group}))
    runner = CliRunner()
    assert runner.invoke(app, ["hello", "--name", "llmaz"]).stdout == "hello llmaz\n"
    assert runner.invoke(app, ["tools", "ping"]).stdout == "pong\n"
    assert runner.invoke(app, ["version"]).exit_code == 0  # a core command, mounted the same way


def test_a_plugin_cannot_replace_a_core_command(monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app_with(monkeypatch, make_plugin_module("hijack", commands={"render": hello}))
    result = CliRunner().invoke(app, ["render", "--help"])
    assert result.exit_code == 0
    assert "--filename" in result.stdout  # still the core render


def test_every_core_command_module_registers_through_the_same_function() -> None:
    registry = CommandRegistry()
    import importlib

    for module in CORE_COMMAND_MODULES:
        register: Callable[..., None] = importlib.import_module(module).llmaz_register_commands
        register(register=registry)
    assert set(registry.items) == {
        "version",
        "crds",
        "render",
        "plugins",
        "backends",
        "operator",
        "load-model",
    }


def test_installed_plugins_provide_demo_and_karpenter() -> None:
    pm = PluginManager.from_environment(environ={})
    assert {"demo", "karpenter"} <= set(pm.commands)
    owner = pm.owner_of_command("karpenter")
    assert owner is not None
    assert owner.kind == "autoscaler+commands"


MAIN = """
import sys
import llmaz.cli
sys.argv = ["llmaz", *sys.argv[1:]]
code = 0
try:
    llmaz.cli.main()
except SystemExit as end:
    code = end.code
print(code, sorted(m for m in ("llmaz_devkit.demo", "llmaz_autoscaler_karpenter.cli") if m in sys.modules))
"""


@pytest.mark.parametrize(
    ("args", "commands_imported", "shown"),
    [
        (["version"], [], "0."),
        (["operator", "run", "--help"], [], "--kubeconfig"),
        (["--help"], ["llmaz_autoscaler_karpenter.cli", "llmaz_devkit.demo"], "karpenter"),
        (["karpenter", "--help"], ["llmaz_autoscaler_karpenter.cli", "llmaz_devkit.demo"], "Usage"),
    ],
)
def test_a_core_command_runs_without_the_plugins_commands(
    args: list[str], commands_imported: list[str], shown: str
) -> None:
    """``llmaz version`` or ``llmaz operator run`` never imports what the plugins' commands need
    (in the operator that was memory kept for nothing, issue 15); ``llmaz --help`` lists the plugins'
    commands and they still run. Both plugins are installed in this workspace; a fresh interpreter
    per command line."""
    out = subprocess.run(
        [sys.executable, "-c", MAIN, *args], capture_output=True, text=True, check=True
    ).stdout.strip()
    *output, last = out.splitlines()
    assert last == f"0 {commands_imported}"
    assert shown in "\n".join(output)
