from llmaz.testing.conformance import BackendConformanceTests
from llmaz_backend_llamacpp import LlamaCppBackend


class TestLlamaCppBackendConformance(BackendConformanceTests):
    backend_class = LlamaCppBackend
    entry_point = "llamacpp"
