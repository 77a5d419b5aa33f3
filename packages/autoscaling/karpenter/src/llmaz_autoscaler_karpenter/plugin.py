"""Entry point ``llmaz: karpenter``: registers the Karpenter hints autoscaler and ``llmaz karpenter``."""

from __future__ import annotations

from llmaz.plugins import AutoscalerRegistry, CommandRegistry, hookimpl
from llmaz_autoscaler_karpenter.autoscaler import KarpenterAutoscaler

LLMAZ_PLUGIN_API = "1"


@hookimpl
def llmaz_register_autoscalers(register: AutoscalerRegistry) -> None:
    register.add(KarpenterAutoscaler)


@hookimpl
def llmaz_register_commands(register: CommandRegistry) -> None:
    from llmaz_autoscaler_karpenter.cli import app

    register.add("karpenter", app)
