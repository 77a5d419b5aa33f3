from syrupy.assertion import SnapshotAssertion

from llmaz_backend_tensorrt_llm import TensorRTLLMBackend


def test_backend_runtime(snapshot: SnapshotAssertion) -> None:
    assert TensorRTLLMBackend().backend_runtime().to_manifest() == snapshot
