"""The llmaz plugin SDK.

A plugin is a module published under the entry-point group ``llmaz`` that declares
``LLMAZ_PLUGIN_API`` and implements registration hooks (see :mod:`llmaz.plugins.hookspecs`) with
:data:`hookimpl`, registering :class:`Backend` and/or :class:`Autoscaler` subclasses and ``llmaz``
commands.
"""

from llmaz.plugins.autoscaler import (
    ANNOTATION_AUTOSCALER,
    Autoscaler,
    AutoscalingInput,
    AutoscalingOutput,
    AutoscalingProblem,
    NodeAffinityHints,
)
from llmaz.plugins.backend import (
    BACKEND_RUNTIME_LABELS,
    DEFAULT_CONFIG,
    KNOWN_VARIABLES,
    MULTI_HOST_CONFIG,
    SPECULATIVE_CONFIG,
    Backend,
    MultiHostRecipe,
    placeholder,
)
from llmaz.plugins.hookspecs import hookimpl
from llmaz.plugins.manager import (
    ENTRY_POINT_GROUP,
    PLUGIN_API_VERSION,
    PluginInfo,
    PluginLoadError,
    PluginManager,
)
from llmaz.plugins.metrics import EngineMetrics
from llmaz.plugins.registry import AutoscalerRegistry, BackendRegistry, CommandRegistry, RegistrationError

__all__ = [
    "ANNOTATION_AUTOSCALER",
    "BACKEND_RUNTIME_LABELS",
    "DEFAULT_CONFIG",
    "ENTRY_POINT_GROUP",
    "KNOWN_VARIABLES",
    "MULTI_HOST_CONFIG",
    "PLUGIN_API_VERSION",
    "SPECULATIVE_CONFIG",
    "Autoscaler",
    "AutoscalerRegistry",
    "AutoscalingInput",
    "AutoscalingOutput",
    "AutoscalingProblem",
    "Backend",
    "BackendRegistry",
    "CommandRegistry",
    "EngineMetrics",
    "MultiHostRecipe",
    "NodeAffinityHints",
    "PluginInfo",
    "PluginLoadError",
    "PluginManager",
    "RegistrationError",
    "hookimpl",
    "placeholder",
]
