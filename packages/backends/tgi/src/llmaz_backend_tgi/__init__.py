"""llmaz backend plugin for Hugging Face text-generation-inference."""

from llmaz_backend_tgi.backend import TGIBackend

__all__ = ["TGIBackend"]
