"""Entry point ``llmaz: sglang``: registers :class:`~llmaz_backend_sglang.backend.SGLangBackend`."""

from __future__ import annotations

from llmaz.plugins import BackendRegistry, hookimpl
from llmaz_backend_sglang.backend import SGLangBackend

LLMAZ_PLUGIN_API = "1"


@hookimpl
def llmaz_register_backends(register: BackendRegistry) -> None:
    register.add(SGLangBackend)
