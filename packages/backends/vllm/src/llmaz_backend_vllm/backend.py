"""vLLM: the OpenAI-compatible server started by ``vllm serve``."""

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

SERVER = ["vllm", "serve"]
"""``vllm serve MODEL``: ``python3 -m vllm.entrypoints.openai.api_server`` is deprecated upstream."""
RAY_PORT = 6379


class VLLMBackend(Backend):
    """vLLM with its OpenAI-compatible API server on port 8080."""

    name: ClassVar[str] = "vllm"
    engine: ClassVar[str] = "vLLM"
    image: ClassVar[str] = "vllm/vllm-openai"
    version: ClassVar[str] = "v0.25.0"
    docs_url: ClassVar[str] = "https://docs.vllm.ai/en/stable/cli/serve.html"
    model_name_flag: ClassVar[str | None] = "--served-model-name"
    drain_metrics: ClassVar[tuple[str, ...]] = ("vllm:num_requests_running", "vllm:num_requests_waiting")
    tensor_parallel_flag: ClassVar[str | None] = "--tensor-parallel-size"
    tensor_parallel_aliases: ClassVar[tuple[str, ...]] = ("-tp",)
    key_metrics: ClassVar[EngineMetrics | None] = EngineMetrics(
        requests_running="vllm:num_requests_running",
        requests_waiting="vllm:num_requests_waiting",
        time_to_first_token="vllm:time_to_first_token_seconds",
        generation_tokens="vllm:generation_tokens_total",
        kv_cache_usage="vllm:kv_cache_usage_perc",
        lora_info="vllm:lora_requests_info",
        cache_info="vllm:cache_config_info",
    )
    """From vLLM's production-metrics docs; ``kv_cache_usage_perc`` replaced ``gpu_cache_usage_perc``.
    Every name is defined in ``vllm/v1/metrics/loggers.py`` of v0.25.0 (read by hand)."""
    supports_speculative_decoding: ClassVar[bool] = True
    supports_multi_host: ClassVar[bool] = True

    def command(self) -> list[str]:
        return list(SERVER)

    def _serve_args(self) -> list[str]:
        return [
            placeholder(MODEL_PATH),
            *self.model_name_args(),
            "--host",
            "0.0.0.0",
            "--port",
            str(self.port),
        ]

    def _parallel_args(self) -> list[str]:
        return [
            "--tensor-parallel-size",
            placeholder("TP"),
            "--pipeline-parallel-size",
            placeholder("PP"),
            "--distributed-executor-backend",
            "ray",
        ]

    def recommended_configs(self) -> list[RecommendedConfig]:
        small = ResourceRequirements(limits={"cpu": 4, "memory": "8Gi"}, requests={"cpu": 4, "memory": "8Gi"})
        # An explicit method: without it vLLM releases before draft-model support (<= 0.13) raised
        # NotImplementedError, and the method name documents what llmaz's `role: draft` claim means.
        speculative = (
            '{"method": "draft_model", "model": "'
            + placeholder(DRAFT_MODEL_PATH)
            + '", "num_speculative_tokens": 5}'
        )
        return [
            RecommendedConfig(
                name="default", args=self._serve_args(), resources=small, shared_memory_size="2Gi"
            ),
            RecommendedConfig(
                name=SPECULATIVE_CONFIG,
                args=[*self._serve_args(), "--speculative-config", speculative],
                resources=ResourceRequirements(
                    limits={"cpu": 8, "memory": "16Gi"}, requests={"cpu": 4, "memory": "8Gi"}
                ),
                shared_memory_size="2Gi",
            ),
            RecommendedConfig(
                name=MULTI_HOST_CONFIG,
                args=[*self._serve_args(), *self._parallel_args()],
                resources=small,
                shared_memory_size="2Gi",
            ),
        ]

    def multi_host_recipe(self) -> MultiHostRecipe:
        wait_for_workers = (
            'python3 -c \'import ray, sys; ray.init(address="auto", logging_level="ERROR"); '
            'alive = sum(1 for n in ray.nodes() if n["Alive"]); '
            "sys.exit(0 if alive >= int(sys.argv[1]) else 1)' $(LWS_GROUP_SIZE)"
        )
        leader = " ".join(
            [
                f"ray start --head --port={RAY_PORT} &&",
                "tries=0;",
                f"until {wait_for_workers}; do",
                "tries=$((tries+1));",
                'if [ "$tries" -ge 60 ]; then echo "ray: workers did not join" >&2; exit 1; fi;',
                "sleep 5;",
                "done;",
                "exec",
                *SERVER,
                *self._serve_args(),
                *self._parallel_args(),
                '"$@"',
            ]
        )
        return MultiHostRecipe(
            leader_command=["/bin/sh", "-c"],
            # after the script, sh takes the next word as $0 and the rest as "$@": the Playground's
            # own args (spec.backendRuntimeConfig.args), appended by the renderer, reach the server
            leader_args=[leader, "vllm-leader"],
            worker_command=["/bin/sh", "-c"],
            worker_args=[f"ray start --address=$(LWS_LEADER_ADDRESS):{RAY_PORT} --block"],
            worker_serves_http=False,
            group_size_param="PP",
        )
