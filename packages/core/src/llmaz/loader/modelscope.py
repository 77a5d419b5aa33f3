"""ModelScope source, through the ``modelscope`` library.

ModelScope's own ``snapshot_download`` resumes partial files and checks each file's sha256 against
the hub's metadata; this module adds what the engine gives every source around it: the per-model
lock, the completion marker keyed by model and revision, and a one-line cause on failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmaz.loader import layout
from llmaz.loader.engine import LoadError, Options, Result, load_delegated

HUB = "ModelScope"


@dataclass
class ModelScopeSource:
    model_id: str
    revision: str = "master"
    allow_patterns: tuple[str, ...] = ()
    ignore_patterns: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"{HUB} {self.model_id}@{self.revision}"

    def key(self) -> str:
        return layout.source_key(
            "modelscope",
            self.model_id,
            self.revision,
            ",".join(self.allow_patterns),
            ",".join(self.ignore_patterns),
        )

    def load(self, local_path: str, options: Options) -> Result:
        def download() -> None:
            from modelscope import snapshot_download

            try:
                snapshot_download(
                    self.model_id,
                    revision=self.revision,
                    local_dir=local_path,
                    allow_patterns=list(self.allow_patterns) or None,
                    ignore_patterns=list(self.ignore_patterns) or None,
                )
            except Exception as err:
                text = str(err).splitlines()[0] if str(err) else type(err).__name__
                raise LoadError(f"{HUB} download of {self.model_id}@{self.revision} failed: {text}") from err

        return load_delegated(self.describe(), self.key(), local_path, options, download)
