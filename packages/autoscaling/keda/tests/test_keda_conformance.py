from __future__ import annotations

import dataclasses

from llmaz.api import Playground
from llmaz.plugins import ANNOTATION_AUTOSCALER, AutoscalingInput, EngineMetrics
from llmaz.testing.conformance import AutoscalerConformanceTests, sample_autoscaling_inputs
from llmaz_autoscaler_keda import KEDAAutoscaler


def _choosing_keda(inp: AutoscalingInput) -> AutoscalingInput:
    manifest = inp.playground.to_manifest()
    manifest["metadata"]["annotations"] = {ANNOTATION_AUTOSCALER: "keda"}
    return dataclasses.replace(
        inp,
        playground=Playground.from_manifest(manifest),
        engine_metrics=EngineMetrics(requests_waiting="engine_waiting"),
    )


class TestKEDAConformance(AutoscalerConformanceTests):
    autoscaler_class = KEDAAutoscaler

    def inputs(self) -> list[AutoscalingInput]:
        # the samples as they are (KEDA not chosen) and the same Playgrounds choosing KEDA
        samples = sample_autoscaling_inputs()
        return samples + [_choosing_keda(inp) for inp in samples]

    def test_keda_inputs_render_scaled_objects(self) -> None:
        rendered = [KEDAAutoscaler().render(inp).objects for inp in self.inputs()]
        assert any(objs and objs[0]["kind"] == "ScaledObject" for objs in rendered)
