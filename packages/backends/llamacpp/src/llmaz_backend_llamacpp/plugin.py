"""Entry point ``llmaz: llamacpp``: registers :class:`~llmaz_backend_llamacpp.backend.LlamaCppBackend`."""

from __future__ import annotations

from llmaz.plugins import BackendRegistry, hookimpl
from llmaz_backend_llamacpp.backend import LlamaCppBackend

LLMAZ_PLUGIN_API = "1"


@hookimpl
def llmaz_register_backends(register: BackendRegistry) -> None:
    register.add(LlamaCppBackend)
