"""Entry point ``llmaz: vllm``: registers :class:`~llmaz_backend_vllm.backend.VLLMBackend`."""

from __future__ import annotations

from llmaz.plugins import BackendRegistry, hookimpl
from llmaz_backend_vllm.backend import VLLMBackend

LLMAZ_PLUGIN_API = "1"


@hookimpl
def llmaz_register_backends(register: BackendRegistry) -> None:
    register.add(VLLMBackend)
