"""Build plugin managers in tests: a fresh manager with autoload off, holding exactly the given plugins.

Use the function directly or the fixture (import it into a ``conftest.py``)::

    from llmaz.testing.plugins import plugin_manager_factory  # noqa: F401

    def test_mine(plugin_manager_factory):
        pm = plugin_manager_factory(my_plugin_module)
        assert pm.get_backend("mine")
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pytest

from llmaz.plugins import (
    PLUGIN_API_VERSION,
    Autoscaler,
    AutoscalerRegistry,
    Backend,
    BackendRegistry,
    CommandRegistry,
    PluginManager,
    hookimpl,
)

__all__ = ["make_plugin_manager", "make_plugin_module", "plugin_manager_factory"]

PluginSpec = object | tuple[str, object]


def make_plugin_manager(
    *plugins: PluginSpec, disabled: Iterable[str] = (), check_api: bool = True, trace: bool = False
) -> PluginManager:
    """A manager that loads no entry points, with ``plugins`` registered and collected.

    Each plugin is a module-like object, or a ``(name, object)`` pair to choose its plugin name.
    The environment is ignored (``environ={}``), so tests do not depend on the caller's shell.
    """
    manager = PluginManager(autoload=False, disabled=disabled, trace=trace, environ={})
    for spec in plugins:
        if isinstance(spec, tuple):
            name, obj = spec
        else:
            obj = spec
            name = getattr(spec, "__name__", None) or repr(spec)
        manager.register(obj, name=str(name), check_api=check_api)
    manager.collect()
    return manager


def make_plugin_module(
    name: str,
    *,
    backends: Sequence[type[Backend] | Backend] = (),
    autoscalers: Sequence[type[Autoscaler] | Autoscaler] = (),
    commands: Mapping[str, Callable[..., Any]] | None = None,
    api: object = PLUGIN_API_VERSION,
) -> types.ModuleType:
    """An in-memory plugin module registering ``backends``, ``autoscalers`` and ``commands`` (name ->
    ``typer.Typer`` or function); ``api=None`` leaves ``LLMAZ_PLUGIN_API`` undeclared."""
    module = types.ModuleType(name)
    if api is not None:
        module.LLMAZ_PLUGIN_API = api  # type: ignore[attr-defined]
    if backends:

        @hookimpl
        def llmaz_register_backends(register: BackendRegistry) -> None:
            for backend in backends:
                register.add(backend)

        module.llmaz_register_backends = llmaz_register_backends  # type: ignore[attr-defined]
    if autoscalers:

        @hookimpl
        def llmaz_register_autoscalers(register: AutoscalerRegistry) -> None:
            for autoscaler in autoscalers:
                register.add(autoscaler)

        module.llmaz_register_autoscalers = llmaz_register_autoscalers  # type: ignore[attr-defined]
    if commands:

        @hookimpl
        def llmaz_register_commands(register: CommandRegistry) -> None:
            for command_name, command in commands.items():
                register.add(command_name, command)

        module.llmaz_register_commands = llmaz_register_commands  # type: ignore[attr-defined]
    return module


@pytest.fixture
def plugin_manager_factory() -> Callable[..., PluginManager]:
    """The :func:`make_plugin_manager` function, as a fixture."""
    return make_plugin_manager
