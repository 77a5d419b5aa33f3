"""SGLang: ``python3 -m sglang.launch_server`` (OpenAI-compatible API)."""

from __future__ import annotations

from typing import ClassVar

from llmaz.api import RecommendedConfig, ResourceRequirements
from llmaz.api.conventions import DRAFT_MODEL_PATH, MODEL_PATH
from llmaz.plugins import (
    MULTI_HOST_CONFIG,
    SPECULATIVE_CONFIG,
    Backend,
    EngineMetrics,
    MultiHostRecipe,
    placeholder,
)

SERVER = ["python3", "-m", "sglang.launch_server"]
DIST_INIT_PORT = 20000


class SGLangBackend(Backend):
    """SGLang's HTTP server on port 8080 with Prometheus metrics enabled."""

    name: ClassVar[str] = "sglang"
    engine: ClassVar[str] = "SGLang"
    image: ClassVar[str] = "lmsysorg/sglang"
    version: ClassVar[str] = "v0.5.19-cu129"
    docs_url: ClassVar[str] = "https://docs.sglang.ai/advanced_features/server_arguments.html"
    tensor_parallel_flag: ClassVar[str | None] = "--tp-size"
    # "--tp" works only as argparse's abbreviation of --tp-size (SGLang declares no such option)
    tensor_parallel_aliases: ClassVar[tuple[str, ...]] = ("--tp", "--tensor-parallel-size")
    model_name_flag: ClassVar[str | None] = "--served-model-name"
    readiness_path: ClassVar[str | None] = "/health_generate"
    drain_metrics: ClassVar[tuple[str, ...]] = ("sglang:num_running_reqs", "sglang:num_queue_reqs")
    key_metrics: ClassVar[EngineMetrics | None] = EngineMetrics(
        requests_running="sglang:num_running_reqs",
        requests_waiting="sglang:num_queue_reqs",
        time_to_first_token="sglang:time_to_first_token_seconds",
        generation_tokens="sglang:generation_tokens_total",
        kv_cache_usage="sglang:token_usage",
    )
    """From SGLang's production-metrics docs (``--enable-metrics``); ``token_usage`` is KV-cache use."""
    supports_speculative_decoding: ClassVar[bool] = True
    supports_multi_host: ClassVar[bool] = True

    def command(self) -> list[str]:
        return list(SERVER)

    def _serve_args(self) -> list[str]:
        return [
            "--model-path",
            placeholder(MODEL_PATH),
            *self.model_name_args(),
            "--host",
            "0.0.0.0",
            "--port",
            str(self.port),
            "--enable-metrics",
        ]

    def _distributed_args(self) -> list[str]:
        return [
            "--tp-size",
            placeholder("TP"),
            "--dist-init-addr",
            f"$(LWS_LEADER_ADDRESS):{DIST_INIT_PORT}",
            "--nnodes",
            "$(LWS_GROUP_SIZE)",
            "--node-rank",
            "$(LWS_WORKER_INDEX)",
        ]

    def recommended_configs(self) -> list[RecommendedConfig]:
        resources = ResourceRequirements(
            limits={"cpu": 4, "memory": "8Gi"}, requests={"cpu": 4, "memory": "8Gi"}
        )
        return [
            RecommendedConfig(
                name="default", args=self._serve_args(), resources=resources, shared_memory_size="2Gi"
            ),
            RecommendedConfig(
                name=SPECULATIVE_CONFIG,
                args=[
                    *self._serve_args(),
                    "--speculative-algorithm",
                    "STANDALONE",
                    "--speculative-draft-model-path",
                    placeholder(DRAFT_MODEL_PATH),
                    "--speculative-num-steps",
                    "3",
                    "--speculative-eagle-topk",
                    "1",
                    "--speculative-num-draft-tokens",
                    "4",
                ],
                resources=resources,
                shared_memory_size="2Gi",
            ),
            RecommendedConfig(
                name=MULTI_HOST_CONFIG,
                args=[*self._serve_args(), *self._distributed_args()],
                resources=resources,
                shared_memory_size="2Gi",
            ),
        ]

    def multi_host_recipe(self) -> MultiHostRecipe:
        args = [*self._serve_args(), *self._distributed_args()]
        return MultiHostRecipe(
            leader_command=list(SERVER),
            leader_args=args,
            worker_command=list(SERVER),
            worker_args=list(args),
            worker_serves_http=False,
            tensor_parallel_spans_group=True,
        )
