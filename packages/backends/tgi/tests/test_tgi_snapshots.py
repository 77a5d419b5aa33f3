from syrupy.assertion import SnapshotAssertion

from llmaz_backend_tgi import TGIBackend


def test_backend_runtime(snapshot: SnapshotAssertion) -> None:
    assert TGIBackend().backend_runtime().to_manifest() == snapshot
