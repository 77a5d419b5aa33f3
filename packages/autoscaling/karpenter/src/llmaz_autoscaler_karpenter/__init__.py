"""llmaz autoscaler plugin: scheduling hints and NodePools for stock Karpenter."""

from llmaz_autoscaler_karpenter.autoscaler import KarpenterAutoscaler
from llmaz_autoscaler_karpenter.nodepools import NodeClassRef, nodepools_for_model

__all__ = ["KarpenterAutoscaler", "NodeClassRef", "nodepools_for_model"]
