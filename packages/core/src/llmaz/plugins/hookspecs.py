"""Every hook of the llmaz plugin API, declared in one place.

The hooks are *registration* hooks: each receives a typed registry and calls ``register.add(...)``
once per object it contributes. Per-engine behaviour lives on the registered objects
(:class:`~llmaz.plugins.backend.Backend`, :class:`~llmaz.plugins.autoscaler.Autoscaler`), never in
further hooks, so the host looks plugins up by name instead of asking each one "is this yours?".

A plugin module implements one or both hooks with :data:`hookimpl`::

    from llmaz.plugins import BackendRegistry, hookimpl

    LLMAZ_PLUGIN_API = "1"


    @hookimpl
    def llmaz_register_backends(register: BackendRegistry) -> None:
        register.add(MyBackend)

Hooks are only ever called with keyword arguments, through
:class:`~llmaz.plugins.manager.PluginManager`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from llmaz.plugins.registry import AutoscalerRegistry, BackendRegistry, CommandRegistry

PROJECT_NAME = "llmaz"
"""pluggy project name; also the entry-point group plugins are published under."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
"""Marks hook specifications. Used only in this module."""

hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Marks a plugin's hook implementations: ``@hookimpl def llmaz_register_backends(register): ...``."""


@hookspec
def llmaz_register_backends(register: BackendRegistry) -> None:
    """Register inference-engine backends.

    :param register: the registry to add to. Call ``register.add(MyBackend)`` once per backend, with
        a :class:`~llmaz.plugins.backend.Backend` subclass (instantiated without arguments) or an
        instance.

    Semantics: called once per plugin when the plugin manager collects plugins (at operator start-up
    and for each CLI invocation). Every implementation is called; the return value is ignored.
    A backend name must be unique across all plugins: a second registration of the same name is an
    error attributed to the plugin that made it, and that plugin is skipped as a whole. An exception
    raised here, or a backend whose :meth:`~llmaz.plugins.backend.Backend.backend_runtime` fails
    validation, likewise skips only this plugin. The operator validates against the schema only
    (the API server enforces the CRD's CEL rules when the operator applies the BackendRuntime and
    refuses one that breaks them: logged, that BackendRuntime not applied); ``llmaz render`` and
    ``llmaz plugins`` also evaluate the CEL rules offline. Must not do I/O.

    .. versionadded:: plugin API 1
    """


@hookspec
def llmaz_register_autoscalers(register: AutoscalerRegistry) -> None:
    """Register autoscaler implementations (``hpa``, ``karpenter``, ``keda``, ...).

    :param register: the registry to add to. Call ``register.add(MyAutoscaler)`` once per autoscaler,
        with an :class:`~llmaz.plugins.autoscaler.Autoscaler` subclass (instantiated without
        arguments) or an instance.

    Semantics: as :func:`llmaz_register_backends` — called once per plugin at collection, every
    implementation runs, names are unique across plugins, and any failure skips only the offending
    plugin with one error naming it. Every registered autoscaler is consulted for every Playground;
    an autoscaler that has nothing to do returns an empty
    :class:`~llmaz.plugins.autoscaler.AutoscalingOutput`. Must not do I/O.

    .. versionadded:: plugin API 1
    """


@hookspec
def llmaz_register_commands(register: CommandRegistry) -> None:
    """Add commands to the ``llmaz`` command line.

    :param register: the registry to add to. Call ``register.add("name", app_or_function)`` once per
        command: a ``typer.Typer`` becomes a command group (``llmaz karpenter nodepools``), a function
        a single command.

    Semantics: as the other registration hooks — called once per plugin at collection, every
    implementation runs, a name must be unique across plugins and must not be a core command's, and
    a failure skips only the offending plugin (``llmaz plugins list`` shows it with the reason).
    Not called by the operator, nor when a core command runs (``llmaz operator run``,
    ``llmaz render``); called for ``llmaz --help`` and for every other command line, so import the
    command module inside the implementation if it is costly. Must not do I/O.

    .. versionadded:: plugin API 1 (llmaz 0.1)
    """
