"""Entry point ``llmaz: tensorrt-llm``: registers the TensorRT-LLM backend."""

from __future__ import annotations

from llmaz.plugins import BackendRegistry, hookimpl
from llmaz_backend_tensorrt_llm.backend import TensorRTLLMBackend

LLMAZ_PLUGIN_API = "1"


@hookimpl
def llmaz_register_backends(register: BackendRegistry) -> None:
    register.add(TensorRTLLMBackend)
