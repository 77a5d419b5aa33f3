from syrupy.assertion import SnapshotAssertion

from llmaz_backend_sglang import SGLangBackend


def test_backend_runtime(snapshot: SnapshotAssertion) -> None:
    assert SGLangBackend().backend_runtime().to_manifest() == snapshot


def test_multi_host_recipe(snapshot: SnapshotAssertion) -> None:
    recipe = SGLangBackend().multi_host_recipe()
    assert recipe is not None
    assert recipe.model_dump() == snapshot
