from syrupy.assertion import SnapshotAssertion

from llmaz_backend_llamacpp import LlamaCppBackend


def test_backend_runtime(snapshot: SnapshotAssertion) -> None:
    assert LlamaCppBackend().backend_runtime().to_manifest() == snapshot
