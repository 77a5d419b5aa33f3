from syrupy.assertion import SnapshotAssertion

from llmaz_backend_ollama import OllamaBackend


def test_backend_runtime(snapshot: SnapshotAssertion) -> None:
    assert OllamaBackend().backend_runtime().to_manifest() == snapshot
