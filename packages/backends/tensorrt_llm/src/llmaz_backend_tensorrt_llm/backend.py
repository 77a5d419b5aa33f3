"""TensorRT-LLM: ``trtllm-serve`` from NVIDIA's Triton TensorRT-LLM image."""

from __future__ import annotations

from typing import ClassVar

from llmaz.api import RecommendedConfig, ResourceRequirements
from llmaz.api.conventions import MODEL_PATH
from llmaz.plugins import Backend, placeholder


class TensorRTLLMBackend(Backend):
    """``trtllm-serve`` with its OpenAI-compatible API on port 8080.

    ``trtllm-serve`` reports iteration statistics as JSON, not Prometheus text, so there is no
    drain hook and no metrics endpoint is declared.
    """

    name: ClassVar[str] = "tensorrt-llm"
    engine: ClassVar[str] = "TensorRT-LLM"
    image: ClassVar[str] = "nvcr.io/nvidia/tritonserver"
    version: ClassVar[str] = "25.03-trtllm-python-py3"
    docs_url: ClassVar[str] = "https://nvidia.github.io/TensorRT-LLM/commands/trtllm-serve.html"
    tensor_parallel_flag: ClassVar[str | None] = "--tp_size"
    metrics_path: ClassVar[str | None] = None

    def command(self) -> list[str]:
        return ["trtllm-serve"]

    def recommended_configs(self) -> list[RecommendedConfig]:
        return [
            RecommendedConfig(
                name="default",
                args=[placeholder(MODEL_PATH), "--host", "0.0.0.0", "--port", str(self.port)],
                resources=ResourceRequirements(
                    limits={"cpu": 4, "memory": "16Gi"}, requests={"cpu": 4, "memory": "16Gi"}
                ),
                shared_memory_size="2Gi",
            )
        ]
