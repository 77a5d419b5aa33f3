"""The loader against an S3 STAND-IN on loopback: moto in server mode; OSS through the same
stand-in, addressed by bucket sub-domain as OSS requires (see :func:`oss_route`).

moto cannot live in the workspace environment (botocore pins ``python-dateutil<3``, the Kubernetes
client needs 3.x), so it runs from its own locked-version tool environment built by uv, as a separate
process, which is also how a real object store is reached: over HTTP on a port.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import obstore
import pytest
from obstore.store import S3Store
from standins import CuttingProxy, generate_model, tree

from llmaz.api import OpenModel
from llmaz.loader import layout
from llmaz.loader.engine import LoadError, Options, RemoteFile, TransientError, load
from llmaz.loader.main import main
from llmaz.loader.objstore import ObjectStoreSource
from llmaz.render.sources import resolve_source
from llmaz_devkit.repo import uv_binary

MOTO = "moto[server]==5.2.5"
BUCKET = "models"
PREFIX = "qwen/Qwen2-0.5B-Instruct"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MotoServer:
    """STAND-IN for S3: moto's server mode on a loopback port."""

    def __init__(self, **env: str) -> None:
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [
                uv_binary(),
                "tool",
                "run",
                "--quiet",
                "--from",
                MOTO,
                "moto_server",
                "-H",
                "127.0.0.1",
                "-p",
                str(self.port),
            ],
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 180  # the first run builds moto's tool environment
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                pytest.fail(f"moto server exited: {err[-2000:]}")
            try:
                urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        self.close()
        pytest.fail("moto server did not start within 180 s")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="module")
def s3() -> Iterator[tuple[MotoServer, dict[str, bytes]]]:
    server = MotoServer()
    try:
        urllib.request.urlopen(urllib.request.Request(f"{server.url}/{BUCKET}", method="PUT")).close()
        store = S3Store(
            BUCKET,
            endpoint=server.url,
            region="us-east-1",
            access_key_id="test",
            secret_access_key="test",
            client_options={"allow_http": True},
        )
        files = generate_model(seed=7)
        for name, data in files.items():
            obstore.put(store, f"{PREFIX}/{name}", data)
        obstore.put(store, "gguf/qwen2-0_5b-instruct-q4_0.gguf", files["model-00001-of-00002.safetensors"])
        yield server, files
    finally:
        server.close()


def _env(endpoint: str, models: Path, path: str = PREFIX, **extra: str) -> dict[str, str]:
    env = {
        "MODEL_SOURCE_TYPE": "objstore",
        "PROVIDER": "S3",
        "BUCKET": BUCKET,
        "MODEL_PATH": path,
        "MODEL_LOCAL_PATH": layout.objstore_local_path(path, model_dir=str(models)),
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "LOADER_BACKOFF_SECONDS": "0.01",
        "LOADER_TERMINATION_LOG": str(models.parent / "termination-log"),
    }
    env.update(extra)
    return env


def _message(models: Path) -> str:
    return (models.parent / "termination-log").read_text().strip()


def test_folder_download_and_skip_on_restart(s3: tuple[MotoServer, dict[str, bytes]], models: Path) -> None:
    server, files = s3
    env = _env(server.url, models)
    assert main(env) == 0
    assert env["MODEL_LOCAL_PATH"].endswith("/models--Qwen2-0.5B-Instruct")
    assert tree(env["MODEL_LOCAL_PATH"]) == files
    marker = json.loads(Path(layout.marker_path(env["MODEL_LOCAL_PATH"])).read_text())
    assert marker["source"] == f"s3://{BUCKET}/{PREFIX}"
    # A restarted pod finds the marker and needs the store no more (port 9 answers nothing).
    assert main({**env, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}) == 0


def test_gguf_path_is_one_file(s3: tuple[MotoServer, dict[str, bytes]], models: Path) -> None:
    server, files = s3
    env = _env(server.url, models, path="gguf/qwen2-0_5b-instruct-q4_0.gguf")
    assert main(env) == 0
    assert Path(env["MODEL_LOCAL_PATH"]).read_bytes() == files["model-00001-of-00002.safetensors"]
    assert env["MODEL_LOCAL_PATH"] == str(models / "qwen2-0_5b-instruct-q4_0.gguf")


def test_gcs_reads_through_the_s3_api_with_the_aws_keys(
    s3: tuple[MotoServer, dict[str, bytes]], models: Path
) -> None:
    server, files = s3
    assert main(_env(server.url, models, PROVIDER="GCS")) == 0
    assert tree(str(models / "models--Qwen2-0.5B-Instruct")) == files


def test_connection_cut_mid_file_resumes(s3: tuple[MotoServer, dict[str, bytes]], models: Path) -> None:
    server, files = s3
    proxy = CuttingProxy(server.port, after_bytes=1_200_000, cuts=3)
    try:
        env = _env(proxy.url, models, LOADER_PARALLEL_FILES="1")
        assert main(env) == 0
        assert proxy.cut_count == 3
        assert tree(env["MODEL_LOCAL_PATH"]) == files
    finally:
        proxy.close()


def test_keys_from_files_with_a_trailing_newline_work(
    s3: tuple[MotoServer, dict[str, bytes]], models: Path
) -> None:
    """Keys in a Secret made with ``--from-file`` end in a newline; obstore panicked on the header
    (exit 1 without a termination message) until the loader stripped them."""
    server, files = s3
    env = _env(server.url, models, AWS_ACCESS_KEY_ID="test\n", AWS_SECRET_ACCESS_KEY="test\n")
    assert main(env) == 0
    assert tree(env["MODEL_LOCAL_PATH"]) == files


def test_a_panic_in_obstore_still_writes_the_termination_message(models: Path) -> None:
    """A newline inside a key (no strip can repair it) makes obstore panic while signing, before any
    connection; pyo3's PanicException derives from BaseException, not Exception. The pod must still
    exit 1 with a one-line cause instead of a bare traceback and an empty ModelLoadFailed."""
    env = _env("http://127.0.0.1:9", models, path="m/x.gguf", AWS_ACCESS_KEY_ID="AKIA\nINSIDE")
    assert main(env) == 1
    message = _message(models)
    assert message.startswith("model loader crashed: PanicException: ")
    assert "InvalidHeaderValue" in message
    assert "INSIDE" not in message


def test_404_path(s3: tuple[MotoServer, dict[str, bytes]], models: Path) -> None:
    server, _ = s3
    assert main(_env(server.url, models, path="absent/model")) == 1
    assert _message(models) == f"404 from S3 for s3://{BUCKET}/absent/model: no objects under this path"
    assert main(_env(server.url, models, path="absent/model.gguf")) == 1
    assert _message(models) == f"404 from S3 for s3://{BUCKET}/absent/model.gguf: no such object or bucket"


def test_unknown_keys_name_the_secret(models: Path) -> None:
    """moto with authentication on (INITIAL_NO_AUTH_ACTION_COUNT=0) rejects keys it does not know."""
    server = MotoServer(INITIAL_NO_AUTH_ACTION_COUNT="0")
    try:
        assert main(_env(server.url, models)) == 1
    finally:
        server.close()
    message = _message(models)
    assert message == f"401 from S3 for s3://{BUCKET}/{PREFIX}: set secret aws-access-secret with valid keys"


def test_oss_uses_virtual_hosted_requests_and_the_oss_keys() -> None:
    """The store settings for a real OSS endpoint (https, internal endpoint, region from its name)."""
    source = ObjectStoreSource(
        provider="OSS",
        bucket="llmaz-models",
        path="Qwen2-7B",
        endpoint="oss-cn-beijing-internal.aliyuncs.com",
        env={"OSS_ACCESS_KEY_ID": "id", "OSS_ACCESS_KEY_SECRET": "secret"},
    )
    config = source.store().config
    assert config["endpoint"] == "https://llmaz-models.oss-cn-beijing-internal.aliyuncs.com"
    assert str(config["virtual_hosted_style_request"]).lower() == "true"
    assert config["access_key_id"] == "id"
    assert config["region"] == "cn-beijing"
    assert source.describe() == "oss://llmaz-models.oss-cn-beijing-internal.aliyuncs.com/Qwen2-7B"


OSS_ENDPOINT = "oss-cn-hangzhou.aliyuncs.com"


def _oss_env(models: Path, path: str = PREFIX) -> dict[str, str]:
    """The loader environment the renderer gives an ``oss://`` model, plus the credentials its
    Secret holds. ENDPOINT gets ``http://``: the S3 stand-in speaks plain HTTP (with the renderer's
    bare endpoint the loader uses https, as OSS requires)."""
    model = OpenModel.model_validate(
        {
            "apiVersion": "llmaz.io/v1alpha1",
            "kind": "OpenModel",
            "metadata": {"name": "qwen"},
            "spec": {"familyName": "qwen2", "source": {"uri": f"oss://{BUCKET}.{OSS_ENDPOINT}/{path}"}},
        }
    )
    env = {e["name"]: e["value"] for e in resolve_source(model, 0, field="spec").loader_inputs()}
    assert env[layout.ENV_ENDPOINT] == OSS_ENDPOINT
    return {
        **env,
        layout.ENV_ENDPOINT: f"http://{OSS_ENDPOINT}",
        layout.ENV_LOCAL_PATH: layout.objstore_local_path(path, model_dir=str(models)),
        "OSS_ACCESS_KEY_ID": "test",
        "OSS_ACCESS_KEY_SECRET": "test",
        "LOADER_BACKOFF_SECONDS": "0.01",
        "LOADER_TERMINATION_LOG": str(models.parent / "termination-log"),
        "LOADER_PARALLEL_FILES": "1",
    }


@pytest.fixture
def oss_route(
    s3: tuple[MotoServer, dict[str, bytes]], monkeypatch: pytest.MonkeyPatch
) -> Iterator[CuttingProxy]:
    """OSS is addressed by bucket sub-domain (``<bucket>.oss-cn-hangzhou.aliyuncs.com``), which does
    not resolve on loopback. The loader's HTTP client honours ``HTTP_PROXY`` (as it would a corporate
    proxy), so a TCP proxy on loopback STANDS IN for DNS: every request reaches moto with its
    virtual-hosted ``Host`` header, and moto serves the bucket named by the sub-domain."""
    server, _ = s3
    proxy = CuttingProxy(server.port)
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("http_proxy", proxy.url)
    try:
        yield proxy
    finally:
        proxy.close()


def test_oss_end_to_end_by_bucket_subdomain_with_cuts_resumed(
    s3: tuple[MotoServer, dict[str, bytes]], oss_route: CuttingProxy, models: Path
) -> None:
    _, files = s3
    oss_route.after_bytes, oss_route.cuts = 1_200_000, 2
    env = _oss_env(models)
    assert main(env) == 0
    assert oss_route.cut_count == 2  # two connections lost mid-file, both resumed
    assert tree(env[layout.ENV_LOCAL_PATH]) == files
    marker = json.loads(Path(layout.marker_path(env[layout.ENV_LOCAL_PATH])).read_text())
    assert marker["source"] == f"oss://{BUCKET}.{OSS_ENDPOINT}/{PREFIX}"


def test_oss_missing_path_names_the_oss_uri(
    s3: tuple[MotoServer, dict[str, bytes]], oss_route: CuttingProxy, models: Path
) -> None:
    assert main(_oss_env(models, path="absent/model")) == 1
    message = _message(models)
    assert (
        message == f"404 from OSS for oss://{BUCKET}.{OSS_ENDPOINT}/absent/model: no objects under this path"
    )


class _MemoryObjectStore(ObjectStoreSource):
    """STAND-IN for S3: the source's own code over obstore's in-memory store, whose ETags change
    with each put like S3's; ``cut_after`` ends the next read of a file after that many bytes (the
    pod is killed mid-file)."""

    def __init__(self, memory: object, cut_after: int | None = None) -> None:
        super().__init__(provider="S3", bucket="models", path="qwen")
        self._store = memory
        self.cut_after = cut_after

    def read(self, file: RemoteFile, offset: int) -> Iterator[bytes]:
        sent = 0
        for chunk in super().read(file, offset):
            if self.cut_after is not None and sent + len(chunk) > self.cut_after:
                yield chunk[: self.cut_after - sent]
                raise TransientError("connection lost")
            sent += len(chunk)
            yield chunk


def test_a_partial_file_of_a_replaced_object_is_not_spliced(models: Path) -> None:
    """A pod killed mid-file; the object is uploaded again (same size, new bytes) before the
    restart. The restarted loader must not resume the old prefix with the new object's rest."""
    from obstore.store import MemoryStore

    old = hashlib.sha256(b"old").digest() * 60_000  # 1.92 MB
    new = hashlib.sha256(b"new").digest() * 60_000
    memory = MemoryStore()
    obstore.put(memory, "qwen/model.safetensors", old)
    local = str(models / "models--qwen")
    with pytest.raises(LoadError, match="gave up after 0 retries"):
        load(_MemoryObjectStore(memory, cut_after=700_000), local, Options(retries=0))
    assert (Path(layout.partial_dir(local)) / "model.safetensors").stat().st_size == 700_000

    obstore.put(memory, "qwen/model.safetensors", new)  # replaced before the pod restarts
    result = load(_MemoryObjectStore(memory), local, Options(retries=0))
    assert Path(local, "model.safetensors").read_bytes() == new
    assert result.bytes_downloaded == len(new)  # the stale prefix was dropped, all of it fetched


def test_a_partial_file_of_the_same_object_is_resumed(models: Path) -> None:
    from obstore.store import MemoryStore

    data = hashlib.sha256(b"same").digest() * 60_000
    memory = MemoryStore()
    obstore.put(memory, "qwen/model.safetensors", data)
    local = str(models / "models--qwen")
    with pytest.raises(LoadError):
        load(_MemoryObjectStore(memory, cut_after=700_000), local, Options(retries=0))
    result = load(_MemoryObjectStore(memory), local, Options(retries=0))
    assert Path(local, "model.safetensors").read_bytes() == data
    assert result.bytes_downloaded == len(data) - 700_000
