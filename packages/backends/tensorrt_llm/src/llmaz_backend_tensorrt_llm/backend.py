"""TensorRT-LLM: ``trtllm-serve`` from NVIDIA's Triton TensorRT-LLM image."""

from __future__ import annotations

from typing import Any, ClassVar

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

    STARTUP_MINUTES: ClassVar[int] = 30
    """``trtllm-serve`` given a Hugging Face checkpoint builds a TensorRT engine from it before it
    answers, which takes tens of minutes for large models: the default five minutes would have the
    kubelet restart the container mid-build, forever."""

    def command(self) -> list[str]:
        return ["trtllm-serve"]

    def startup_probe(self) -> dict[str, Any] | None:
        probe = super().startup_probe()
        if probe is None:
            return None
        return {**probe, "failureThreshold": self.STARTUP_MINUTES * 60 // int(probe["periodSeconds"])}

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
