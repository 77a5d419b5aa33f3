"""llama.cpp: the ``llama-server`` image (its entrypoint), OpenAI-compatible API."""

from __future__ import annotations

from typing import ClassVar

from llmaz.api import RecommendedConfig, ResourceRequirements
from llmaz.api.conventions import DRAFT_MODEL_PATH, MODEL_PATH
from llmaz.plugins import SPECULATIVE_CONFIG, Backend, EngineMetrics, placeholder


class LlamaCppBackend(Backend):
    """``llama-server`` on port 8080 with ``--metrics``; the model id is the OpenModel name (``--alias``)."""

    name: ClassVar[str] = "llamacpp"
    engine: ClassVar[str] = "llama.cpp"
    image: ClassVar[str] = "ghcr.io/ggml-org/llama.cpp"
    version: ClassVar[str] = "server"
    docs_url: ClassVar[str] = "https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md"
    model_name_flag: ClassVar[str | None] = "--alias"
    drain_metrics: ClassVar[tuple[str, ...]] = ("llamacpp:requests_processing", "llamacpp:requests_deferred")
    key_metrics: ClassVar[EngineMetrics | None] = EngineMetrics(
        requests_running="llamacpp:requests_processing",
        requests_waiting="llamacpp:requests_deferred",
        generation_tokens="llamacpp:tokens_predicted_total",
    )
    """From llama-server's ``--metrics`` docs; it exports no TTFT histogram and no KV-cache ratio."""
    supports_speculative_decoding: ClassVar[bool] = True

    def _serve_args(self) -> list[str]:
        return [
            "-m",
            placeholder(MODEL_PATH),
            *self.model_name_args(),
            "--host",
            "0.0.0.0",
            "--port",
            str(self.port),
            "--metrics",
        ]

    def recommended_configs(self) -> list[RecommendedConfig]:
        return [
            RecommendedConfig(
                name="default",
                args=self._serve_args(),
                resources=ResourceRequirements(
                    limits={"cpu": 2, "memory": "4Gi"}, requests={"cpu": 2, "memory": "4Gi"}
                ),
            ),
            RecommendedConfig(
                name=SPECULATIVE_CONFIG,
                args=[
                    *self._serve_args(),
                    # a plain draft model enables nothing by itself: the type says to use it
                    # (llama.cpp infers a type only for MTP/EAGLE3/DFlash drafts); the old
                    # --draft-max/--draft-min are refused by current builds, which then exit
                    "--spec-draft-model",
                    placeholder(DRAFT_MODEL_PATH),
                    "--spec-type",
                    "draft-simple",
                    "--spec-draft-n-max",
                    "16",
                    "--spec-draft-n-min",
                    "5",
                ],
            ),
        ]
