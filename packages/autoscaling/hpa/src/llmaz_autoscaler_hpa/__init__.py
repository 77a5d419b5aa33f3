"""llmaz autoscaler plugin: a HorizontalPodAutoscaler per elastic Playground."""

from llmaz_autoscaler_hpa.autoscaler import HPAAutoscaler, build_hpa

__all__ = ["HPAAutoscaler", "build_hpa"]
