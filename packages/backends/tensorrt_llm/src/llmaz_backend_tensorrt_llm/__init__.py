"""llmaz backend plugin for TensorRT-LLM."""

from llmaz_backend_tensorrt_llm.backend import TensorRTLLMBackend

__all__ = ["TensorRTLLMBackend"]
