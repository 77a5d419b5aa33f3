"""What a backend declares about its Prometheus metrics, for monitors, dashboards and autoscalers.

Engine knowledge stays in the plugins: a :class:`~llmaz.plugins.backend.Backend` sets
:attr:`~llmaz.plugins.backend.Backend.key_metrics` to an :class:`EngineMetrics`, naming the series
its server exports. Dashboards, the KEDA autoscaler and the docs read them from there only.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["EngineMetrics"]


@dataclass(frozen=True)
class EngineMetrics:
    """Names of an engine's key Prometheus series; ``None`` where the engine exports no such series.

    :param requests_running: gauge of requests being processed now.
    :param requests_waiting: gauge of requests queued (the queue length autoscalers scale on).
    :param time_to_first_token: histogram base name of the time to first token in seconds (the
        ``_bucket``/``_sum``/``_count`` series are derived from it).
    :param generation_tokens: counter of generated tokens (``rate()`` of it is tokens per second).
    :param kv_cache_usage: gauge of the KV-cache use as a ratio between 0 and 1.
    :param lora_info: info gauge whose labels list the LoRA adapters loaded and waiting (the
        Inference Extension's endpoint picker routes adapter requests by it).
    :param cache_info: info gauge whose labels give the KV-cache configuration (the endpoint
        picker's prefix-cache scorer reads the block size from it).
    """

    requests_running: str | None = None
    requests_waiting: str | None = None
    time_to_first_token: str | None = None
    generation_tokens: str | None = None
    kv_cache_usage: str | None = None
    lora_info: str | None = None
    cache_info: str | None = None

    def series(self) -> set[str]:
        """Every series name a query may use, histogram suffixes included."""
        out: set[str] = set()
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if f.name == "time_to_first_token":
                out.update(f"{value}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
            else:
                out.add(value)
        return out
