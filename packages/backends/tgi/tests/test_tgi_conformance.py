from llmaz.testing.conformance import BackendConformanceTests
from llmaz_backend_tgi import TGIBackend


class TestTGIBackendConformance(BackendConformanceTests):
    backend_class = TGIBackend
    entry_point = "tgi"
