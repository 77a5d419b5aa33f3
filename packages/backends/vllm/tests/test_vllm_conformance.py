from llmaz.testing.conformance import BackendConformanceTests
from llmaz_backend_vllm import VLLMBackend


class TestVLLMBackendConformance(BackendConformanceTests):
    backend_class = VLLMBackend
    entry_point = "vllm"
