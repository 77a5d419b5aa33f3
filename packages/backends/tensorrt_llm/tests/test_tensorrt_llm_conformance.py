from llmaz.testing.conformance import BackendConformanceTests
from llmaz_backend_tensorrt_llm import TensorRTLLMBackend


class TestTensorRTLLMBackendConformance(BackendConformanceTests):
    backend_class = TensorRTLLMBackend
    entry_point = "tensorrt-llm"
