"""Entry point ``llmaz: karpenter``: registers the Karpenter hints autoscaler."""

from __future__ import annotations

from llmaz.plugins import AutoscalerRegistry, hookimpl
from llmaz_autoscaler_karpenter.autoscaler import KarpenterAutoscaler

LLMAZ_PLUGIN_API = "1"


@hookimpl
def llmaz_register_autoscalers(register: AutoscalerRegistry) -> None:
    register.add(KarpenterAutoscaler)
