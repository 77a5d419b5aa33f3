"""llmaz backend plugin for the llama.cpp server."""

from llmaz_backend_llamacpp.backend import LlamaCppBackend

__all__ = ["LlamaCppBackend"]
