from llmaz.testing.conformance import BackendConformanceTests
from llmaz_backend_ollama import OllamaBackend


class TestOllamaBackendConformance(BackendConformanceTests):
    backend_class = OllamaBackend
    entry_point = "ollama"
