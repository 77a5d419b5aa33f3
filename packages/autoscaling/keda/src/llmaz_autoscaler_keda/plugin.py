"""Entry point ``llmaz: keda``: registers :class:`~llmaz_autoscaler_keda.autoscaler.KEDAAutoscaler`."""

from __future__ import annotations

from llmaz.plugins import AutoscalerRegistry, hookimpl
from llmaz_autoscaler_keda.autoscaler import KEDAAutoscaler

LLMAZ_PLUGIN_API = "1"


@hookimpl
def llmaz_register_autoscalers(register: AutoscalerRegistry) -> None:
    register.add(KEDAAutoscaler)
