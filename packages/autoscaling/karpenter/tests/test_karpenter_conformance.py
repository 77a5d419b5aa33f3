from llmaz.testing.conformance import AutoscalerConformanceTests
from llmaz_autoscaler_karpenter import KarpenterAutoscaler


class TestKarpenterConformance(AutoscalerConformanceTests):
    autoscaler_class = KarpenterAutoscaler
