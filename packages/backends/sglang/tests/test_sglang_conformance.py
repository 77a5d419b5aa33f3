from llmaz.testing.conformance import BackendConformanceTests
from llmaz_backend_sglang import SGLangBackend


class TestSGLangBackendConformance(BackendConformanceTests):
    backend_class = SGLangBackend
    entry_point = "sglang"
