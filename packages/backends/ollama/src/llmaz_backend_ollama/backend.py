"""Ollama: ``ollama serve`` plus a pull of the model named by an ``ollama://<tag>`` OpenModel."""

from __future__ import annotations

from typing import Any, ClassVar

from llmaz.api import EnvVar, RecommendedConfig, ResourceRequirements
from llmaz.api.conventions import MODEL_NAME
from llmaz.plugins import Backend, placeholder

READY_FILE = "/tmp/llmaz-model-ready"


class OllamaBackend(Backend):
    """Ollama's API (OpenAI-compatible under ``/v1``) on port 8080.

    The OpenAI model id is the Ollama tag, which is what ``{{ .ModelName }}`` holds for an
    ``ollama://<tag>`` OpenModel, so no flag is needed. Ollama exports no Prometheus metrics, so
    there is no drain hook; readiness waits until the model has been pulled.
    """

    name: ClassVar[str] = "ollama"
    engine: ClassVar[str] = "Ollama"
    image: ClassVar[str] = "ollama/ollama"
    version: ClassVar[str] = "0.6.5"
    docs_url: ClassVar[str] = "https://github.com/ollama/ollama/blob/main/docs/faq.md"
    metrics_path: ClassVar[str | None] = None
    health_path: ClassVar[str] = "/api/version"

    def command(self) -> list[str]:
        return ["/bin/sh", "-c"]

    def envs(self) -> list[EnvVar]:
        return [
            EnvVar(name="OLLAMA_HOST", value=f"0.0.0.0:{self.port}"),
            EnvVar(name="OLLAMA_KEEP_ALIVE", value="-1"),
        ]

    def recommended_configs(self) -> list[RecommendedConfig]:
        script = " ".join(
            [
                f"rm -f {READY_FILE};",
                "ollama serve & server=$!;",
                "until ollama list >/dev/null 2>&1; do sleep 1; done;",
                f"ollama pull {placeholder(MODEL_NAME)} && touch {READY_FILE};",
                "wait $server",
            ]
        )
        return [
            RecommendedConfig(
                name="default",
                args=[script],
                resources=ResourceRequirements(
                    limits={"cpu": 2, "memory": "4Gi"}, requests={"cpu": 2, "memory": "4Gi"}
                ),
            )
        ]

    def readiness_probe(self) -> dict[str, Any]:
        return {
            "exec": {"command": ["/bin/sh", "-c", f"test -f {READY_FILE}"]},
            "initialDelaySeconds": 5,
            "periodSeconds": 5,
            "failureThreshold": 3,
        }
