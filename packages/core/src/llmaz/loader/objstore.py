"""S3, GCS and Alibaba OSS sources, all through their S3-compatible APIs with ``obstore``.

One library for the three stores, with no Python dependencies of its own (``s3fs``/``boto3`` pin
``python-dateutil<3``, which the Kubernetes client in the same image cannot use):

* **S3**: the standard AWS variables apply (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
  ``AWS_REGION``, ``AWS_ENDPOINT_URL`` for S3-compatible stores such as MinIO, web identity tokens).
* **GCS**: the XML API at ``https://storage.googleapis.com`` with HMAC keys, passed in the AWS
  variables from secret ``aws-access-secret`` (what the renderer injects for ``gcs://``).
* **OSS**: ``https://<bucket>.<endpoint>`` (virtual-hosted style, as OSS requires) with
  ``OSS_ACCESS_KEY_ID``/``OSS_ACCESS_KEY_SECRET``; the region is the endpoint's first label unless
  ``OSS_REGION`` says otherwise.

Objects carry no checksum every store computes the same way (an ETag is an MD5 only for some
uploads), so sizes are verified, and a resumed read is made conditional on the ETag seen when
listing: an object replaced mid-download is fetched again instead of being spliced.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import obstore
from obstore import exceptions as oexc
from obstore.store import S3Store

from llmaz.loader import layout
from llmaz.loader.engine import CHUNK, LoadError, RemoteFile, TransientError

_NAMES = {"S3": "S3", "GCS": "GCS", "OSS": "OSS"}
_SECRETS = {"S3": layout.AWS_SECRET, "GCS": layout.AWS_SECRET, "OSS": layout.OSS_SECRET}
GCS_S3_ENDPOINT = "https://storage.googleapis.com"


@dataclass
class ObjectStoreSource:
    provider: str
    """``S3``, ``GCS`` or ``OSS`` (what the renderer passes in ``PROVIDER``)."""
    bucket: str
    path: str
    endpoint: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    _store: Any = None

    def __post_init__(self) -> None:
        self.provider = self.provider.upper()
        if self.provider not in _NAMES:
            raise LoadError(f"{layout.ENV_PROVIDER}={self.provider!r}: expected one of S3, GCS, OSS")
        if not self.bucket:
            raise LoadError(f"{layout.ENV_BUCKET} is empty: the {self.provider} bucket to read from")
        if not self.path.strip("/"):
            raise LoadError(f"{layout.ENV_MODEL_PATH} is empty: the object path of the model")
        self.path = self.path.strip("/")

    @property
    def single_file(self) -> bool:
        return layout.is_single_file(self.path)

    def uri(self) -> str:
        scheme = self.provider.lower()
        # as the user wrote it in the OpenModel: an endpoint given with a scheme is named without it
        endpoint = (self.endpoint or "").partition("://")[2] or self.endpoint
        host = f"{self.bucket}.{endpoint}" if self.provider == "OSS" else self.bucket
        return f"{scheme}://{host}/{self.path}"

    def describe(self) -> str:
        return self.uri()

    def key(self) -> str:
        return layout.source_key(self.provider.lower(), self.endpoint or "", self.bucket, self.path)

    def store(self) -> Any:
        if self._store is None:
            self._store = self._make_store()
        return self._store

    def _make_store(self) -> Any:
        env = self.env
        endpoint: str | None
        options: dict[str, Any] = {}
        if self.provider == "OSS":
            if not self.endpoint:
                raise LoadError(
                    f"{layout.ENV_ENDPOINT} is empty: OSS needs the endpoint of the bucket's region"
                )
            scheme, sep, host = self.endpoint.partition("://")
            if not sep:
                scheme, host = "https", self.endpoint
            endpoint = f"{scheme}://{self.bucket}.{host}"
            region = env.get("OSS_REGION") or host.split(".", 1)[0].removeprefix("oss-").removesuffix(
                "-internal"
            )
            options.update(
                virtual_hosted_style_request=True,
                region=region,
                access_key_id=layout.credential(env, layout.ENV_OSS_KEY_ID),
                secret_access_key=layout.credential(env, layout.ENV_OSS_SECRET_KEY),
            )
        else:
            endpoint = self.endpoint or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
            if self.provider == "GCS" and not endpoint:
                endpoint = GCS_S3_ENDPOINT
            options.update(
                region=env.get("AWS_REGION")
                or env.get("AWS_DEFAULT_REGION")
                or ("auto" if self.provider == "GCS" else "us-east-1"),
                access_key_id=layout.credential(env, layout.ENV_AWS_KEY_ID),
                secret_access_key=layout.credential(env, layout.ENV_AWS_SECRET_KEY),
            )
            if session_token := layout.credential(env, layout.ENV_AWS_SESSION_TOKEN):
                options["token"] = session_token
        if endpoint:
            options["endpoint"] = endpoint
        if not options.get("access_key_id"):
            options.pop("access_key_id", None)
            options.pop("secret_access_key", None)
        client = {"allow_http": bool(endpoint and endpoint.startswith("http://")), "timeout": "120s"}
        try:
            return S3Store(
                self.bucket,
                client_options=client,  # type: ignore[arg-type]
                retry_config={"max_retries": 2},
                **options,
            )
        except (oexc.BaseError, ValueError) as err:
            raise LoadError(f"{self.describe()}: invalid store configuration: {err}") from err

    def list_files(self) -> list[RemoteFile]:
        store = self.store()
        try:
            if self.single_file:
                meta = obstore.head(store, self.path)
                name = layout.last_segment(self.path)
                return [RemoteFile(path=name, size=int(meta["size"]), version=meta.get("e_tag"))]
            prefix = self.path + "/"
            files: list[RemoteFile] = []
            for batch in obstore.list(store, prefix):
                for meta in batch:
                    rel = str(meta["path"])[len(prefix) :]
                    if not rel or rel.endswith("/"):
                        continue  # folder placeholder objects
                    files.append(RemoteFile(path=rel, size=int(meta["size"]), version=meta.get("e_tag")))
        except Exception as err:
            raise self.explain(err) from err
        if not files:
            raise LoadError(f"404 from {self.provider} for {self.uri()}: no objects under this path")
        return sorted(files, key=lambda f: f.path)

    def _key_of(self, file: RemoteFile) -> str:
        return self.path if self.single_file else f"{self.path}/{file.path}"

    def read(self, file: RemoteFile, offset: int) -> Iterator[bytes]:
        options: dict[str, Any] = {}
        if offset:
            options["range"] = {"offset": offset}
            if file.version:
                options["if_match"] = file.version
        try:
            result = obstore.get(self.store(), self._key_of(file), options=options or None)  # type: ignore[arg-type]
            for chunk in result.stream(min_chunk_size=CHUNK):
                yield bytes(chunk)
        except oexc.PreconditionError as err:
            raise LoadError(
                f"{self.uri()}/{file.path} changed on the server during the download; start the pod again"
            ) from err
        except Exception as err:
            raise self.explain(err, file.path) from err

    def explain(self, err: Exception, path: str | None = None) -> Exception:
        where = self.uri() if path is None or self.single_file else f"{self.uri()}/{path}"
        secret = _SECRETS[self.provider]
        text = str(err).splitlines()[0] if str(err) else type(err).__name__
        if isinstance(err, oexc.UnauthenticatedError):
            return LoadError(f"401 from {self.provider} for {where}: set secret {secret} with valid keys")
        if isinstance(err, oexc.PermissionDeniedError):
            return LoadError(
                f"403 from {self.provider} for {where}: the keys in secret {secret} cannot read it"
            )
        if isinstance(err, FileNotFoundError):  # obstore raises the built-in for a missing object
            return LoadError(f"404 from {self.provider} for {where}: no such object or bucket")
        lowered = str(err).lower()  # the S3 error code is in the response body, lines further down
        if any(
            code in lowered for code in ("invalidaccesskeyid", "signaturedoesnotmatch", "401 unauthorized")
        ):
            return LoadError(f"401 from {self.provider} for {where}: set secret {secret} with valid keys")
        if "accessdenied" in lowered or "403 forbidden" in lowered or isinstance(err, PermissionError):
            return LoadError(
                f"403 from {self.provider} for {where}: the keys in secret {secret} cannot read it"
            )
        if "nosuchbucket" in lowered:
            return LoadError(f"404 from {self.provider} for {where}: no such bucket")
        if isinstance(err, oexc.BaseError | OSError | TimeoutError):
            return TransientError(f"{self.provider} read failed: {text}")
        return err
