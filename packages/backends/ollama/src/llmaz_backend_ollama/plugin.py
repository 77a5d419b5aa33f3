"""Entry point ``llmaz: ollama``: registers :class:`~llmaz_backend_ollama.backend.OllamaBackend`."""

from __future__ import annotations

from llmaz.plugins import BackendRegistry, hookimpl
from llmaz_backend_ollama.backend import OllamaBackend

LLMAZ_PLUGIN_API = "1"


@hookimpl
def llmaz_register_backends(register: BackendRegistry) -> None:
    register.add(OllamaBackend)
