"""Entry point ``llmaz: tgi``: registers :class:`~llmaz_backend_tgi.backend.TGIBackend`."""

from __future__ import annotations

from llmaz.plugins import BackendRegistry, hookimpl
from llmaz_backend_tgi.backend import TGIBackend

LLMAZ_PLUGIN_API = "1"


@hookimpl
def llmaz_register_backends(register: BackendRegistry) -> None:
    register.add(TGIBackend)
