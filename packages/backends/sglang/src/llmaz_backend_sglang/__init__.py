"""llmaz backend plugin for SGLang."""

from llmaz_backend_sglang.backend import SGLangBackend

__all__ = ["SGLangBackend"]
