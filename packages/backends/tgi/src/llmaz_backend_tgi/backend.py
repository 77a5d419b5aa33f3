"""Hugging Face text-generation-inference: the image's ``text-generation-launcher`` entrypoint."""

from __future__ import annotations

from typing import ClassVar

from llmaz.api import RecommendedConfig, ResourceRequirements
from llmaz.api.conventions import MODEL_PATH
from llmaz.plugins import Backend, EngineMetrics, placeholder


class TGIBackend(Backend):
    """TGI's router on port 8080 (Messages API = OpenAI chat completions), metrics on ``/metrics``."""

    name: ClassVar[str] = "tgi"
    engine: ClassVar[str] = "text-generation-inference"
    image: ClassVar[str] = "ghcr.io/huggingface/text-generation-inference"
    version: ClassVar[str] = "3.3.5"
    docs_url: ClassVar[str] = "https://huggingface.co/docs/text-generation-inference/reference/launcher"
    tensor_parallel_flag: ClassVar[str | None] = "--num-shard"
    drain_metrics: ClassVar[tuple[str, ...]] = ("tgi_batch_current_size", "tgi_queue_size")
    key_metrics: ClassVar[EngineMetrics | None] = EngineMetrics(
        requests_running="tgi_batch_current_size",
        requests_waiting="tgi_queue_size",
        generation_tokens="tgi_request_generated_tokens_sum",
    )
    """From TGI's metrics reference: no TTFT histogram or KV-cache ratio; generated tokens are the
    ``_sum`` of the ``tgi_request_generated_tokens`` histogram, a counter."""

    def recommended_configs(self) -> list[RecommendedConfig]:
        return [
            RecommendedConfig(
                name="default",
                args=[
                    "--model-id",
                    placeholder(MODEL_PATH),
                    "--hostname",
                    "0.0.0.0",
                    "--port",
                    str(self.port),
                ],
                resources=ResourceRequirements(
                    limits={"cpu": 4, "memory": "8Gi"}, requests={"cpu": 4, "memory": "8Gi"}
                ),
                shared_memory_size="1Gi",
            )
        ]
