"""llmaz backend plugin for vLLM."""

from llmaz_backend_vllm.backend import VLLMBackend

__all__ = ["VLLMBackend"]
