"""Entry point ``llmaz: hpa``: registers :class:`~llmaz_autoscaler_hpa.autoscaler.HPAAutoscaler`."""

from __future__ import annotations

from llmaz.plugins import AutoscalerRegistry, hookimpl
from llmaz_autoscaler_hpa.autoscaler import HPAAutoscaler

LLMAZ_PLUGIN_API = "1"


@hookimpl
def llmaz_register_autoscalers(register: AutoscalerRegistry) -> None:
    register.add(HPAAutoscaler)
