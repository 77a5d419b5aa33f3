from llmaz.testing.conformance import AutoscalerConformanceTests
from llmaz_autoscaler_hpa import HPAAutoscaler


class TestHPAConformance(AutoscalerConformanceTests):
    autoscaler_class = HPAAutoscaler
