"""llmaz autoscaler plugin: a KEDA ScaledObject on engine metrics through Prometheus."""

from llmaz_autoscaler_keda.autoscaler import KEDAAutoscaler, build_scaled_object

__all__ = ["KEDAAutoscaler", "build_scaled_object"]
