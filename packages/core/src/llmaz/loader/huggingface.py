"""Hugging Face Hub source, through ``huggingface_hub``.

The file list, sizes and checksums come from the model-info endpoint with blob metadata (sha256 for
LFS files, the git blob id for the others), at the revision resolved to a commit, so every file of
one download comes from the same commit even when the branch moves meanwhile. Bytes are streamed
from the ``resolve`` endpoint (URL, auth headers and error classification from ``huggingface_hub``:
``HF_ENDPOINT`` mirrors, the token from ``HF_TOKEN``/``HUGGING_FACE_HUB_TOKEN``; the body through
:mod:`llmaz.loader.transfer` for throughput) with a Range header when resuming.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from http.client import HTTPException

import httpx2
from huggingface_hub import HfApi, constants, hf_hub_url
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils._headers import build_hf_headers
from huggingface_hub.utils._http import hf_raise_for_status
from huggingface_hub.utils._paths import filter_repo_objects

from llmaz.loader import layout, transfer
from llmaz.loader.engine import LoadError, RemoteFile, TransientError

HUB = "Hugging Face"


@dataclass
class HuggingFaceSource:
    repo_id: str
    revision: str = "main"
    filename: str | None = None
    allow_patterns: tuple[str, ...] = ()
    ignore_patterns: tuple[str, ...] = ()
    token: str | None = None
    endpoint: str | None = None
    timeout_seconds: float = 60.0
    _commit: str | None = None

    @property
    def single_file(self) -> bool:
        return self.filename is not None

    @property
    def _endpoint(self) -> str:
        return (self.endpoint or constants.ENDPOINT).rstrip("/")

    def describe(self) -> str:
        what = f"{self.repo_id}/{self.filename}" if self.filename else self.repo_id
        return f"{HUB} {what}@{self.revision}"

    def key(self) -> str:
        return layout.source_key(
            "huggingface",
            self._endpoint,
            self.repo_id,
            self.revision,
            self.filename or "",
            ",".join(self.allow_patterns),
            ",".join(self.ignore_patterns),
        )

    def _headers(self) -> dict[str, str]:
        return build_hf_headers(token=self.token or False, library_name="llmaz-loader")

    def list_files(self) -> list[RemoteFile]:
        api = HfApi(endpoint=self._endpoint, token=self.token or False)
        try:
            info = api.model_info(
                self.repo_id, revision=self.revision, files_metadata=True, timeout=self.timeout_seconds
            )
        except Exception as err:
            raise self.explain(err) from err
        self._commit = info.sha or self.revision
        siblings = {sib.rfilename: sib for sib in info.siblings or []}
        if self.filename is not None:
            wanted = [self.filename] if self.filename in siblings else []
        else:  # the same pattern rules as huggingface_hub's snapshot_download
            wanted = list(
                filter_repo_objects(
                    siblings,
                    allow_patterns=list(self.allow_patterns) or None,
                    ignore_patterns=list(self.ignore_patterns) or None,
                )
            )
        files: list[RemoteFile] = []
        for name in wanted:
            sib = siblings[name]
            lfs = sib.lfs
            files.append(
                RemoteFile(
                    path=name,
                    size=lfs.size if lfs is not None else sib.size,
                    sha256=lfs.sha256 if lfs is not None else None,
                    git_sha1=None if lfs is not None else sib.blob_id,
                )
            )
        if self.filename is not None and not files:
            raise LoadError(
                f"404 from {HUB} for {self.repo_id}: file {self.filename!r} not found at revision "
                f"{self.revision!r}"
            )
        if not files:
            raise LoadError(
                f"{self.describe()}: no file matches allowPatterns {list(self.allow_patterns)} / "
                f"ignorePatterns {list(self.ignore_patterns)}"
            )
        return files

    def read(self, file: RemoteFile, offset: int) -> Iterator[bytes]:
        url = hf_hub_url(
            self.repo_id, file.path, revision=self._commit or self.revision, endpoint=self._endpoint
        )
        headers = self._headers()
        if offset:
            headers["Range"] = f"bytes={offset}-"
        try:
            with transfer.get(url, headers, self.timeout_seconds) as resp:
                if resp.status >= 400:
                    # Classified by huggingface_hub itself, from the status and the X-Error-* headers.
                    hf_raise_for_status(
                        httpx2.Response(
                            resp.status,
                            headers=resp.headers,
                            content=resp.raw.read(),
                            request=httpx2.Request("GET", resp.url),
                        )
                    )
                skip = offset if offset and resp.status == 200 else 0  # Range ignored: skip ahead
                for data in resp.chunks():
                    if skip:
                        if len(data) <= skip:
                            skip -= len(data)
                            continue
                        data, skip = data[skip:], 0  # noqa: PLW2901
                    yield data
        # HfHubHTTPError derives from OSError: a 401/403/404 is classified before a network failure.
        except HfHubHTTPError as err:
            raise self.explain(err, file.path) from err
        except (OSError, HTTPException) as err:
            raise TransientError(f"{type(err).__name__}: {err or 'connection lost'}") from err

    def explain(self, err: Exception, path: str | None = None) -> Exception:
        """A one-line cause for a failure, naming the secret to set where that is the fix."""
        secret = layout.HUB_SECRET
        where = self.repo_id if path is None else f"{self.repo_id}/{path}"
        if isinstance(err, RevisionNotFoundError):
            return LoadError(f"404 from {HUB} for {self.repo_id}: revision {self.revision!r} not found")
        if isinstance(err, EntryNotFoundError):
            return LoadError(f"404 from {HUB} for {where}: file not found at revision {self.revision!r}")
        if isinstance(err, GatedRepoError):
            return LoadError(
                f"403 from {HUB} for {self.repo_id}: gated repository; accept its terms with the account "
                f"whose token is in secret {secret}"
            )
        status = err.response.status_code if isinstance(err, HfHubHTTPError) and err.response else None
        if status == 401 or (isinstance(err, RepositoryNotFoundError) and self.token is None):
            return LoadError(
                f"{status or 401} from {HUB} for {self.repo_id}: set secret {secret} (key HF_TOKEN) "
                "with a token that can read it"
                if self.token is None
                else f"401 from {HUB} for {self.repo_id}: the token in secret {secret} was rejected"
            )
        if isinstance(err, RepositoryNotFoundError):
            return LoadError(
                f"404 from {HUB} for {self.repo_id}: repository not found, or the token in secret {secret} "
                "cannot read it"
            )
        if status == 403:
            return LoadError(f"403 from {HUB} for {where}: the token in secret {secret} has no access")
        if status is not None and (status >= 500 or status == 429):
            return TransientError(f"{status} from {HUB} for {where}")
        if status is not None:
            return LoadError(f"{status} from {HUB} for {where}: {str(err).splitlines()[0]}")
        if isinstance(err, httpx2.TransportError | OSError):
            return TransientError(f"cannot reach {HUB} at {self._endpoint} for {self.repo_id}: {err}")
        return err
