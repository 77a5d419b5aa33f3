from llmaz.testing.conformance import BackendConformanceTests
from llmaz_backend_tensorrt_llm import TensorRTLLMBackend


class TestTensorRTLLMBackendConformance(BackendConformanceTests):
    backend_class = TensorRTLLMBackend
    entry_point = "tensorrt-llm"


def test_the_startup_probe_outlasts_an_engine_build() -> None:
    # trtllm-serve builds a TensorRT engine from a checkpoint before it answers (tens of minutes)
    from llmaz_backend_tensorrt_llm.backend import TensorRTLLMBackend

    probe = TensorRTLLMBackend().startup_probe()
    assert probe is not None
    assert probe["periodSeconds"] * probe["failureThreshold"] == 30 * 60
    assert probe["httpGet"]["port"] == 8080
