"""The loader against a Hugging Face Hub STAND-IN on loopback (tests/loader/standins.py).

Every test goes through ``llmaz.loader.main.main(env)`` with the environment the renderer gives the
init container, so the env contract, the exit status and the termination message are tested too.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
from conftest import REPO, hub_env, termination_message
from huggingface_hub import close_session
from standins import AuthProxyStandIn, HubStandIn, Repo, generate_model, tree

from llmaz.loader import layout, transfer
from llmaz.loader.main import main


def test_downloads_the_whole_repository_and_skips_it_the_second_time(hub: HubStandIn, models: Path) -> None:
    env = hub_env(hub, models)
    assert main(env) == 0
    target = env["MODEL_LOCAL_PATH"]
    assert tree(target) == hub.repos[REPO].files
    marker = json.loads(Path(layout.marker_path(target)).read_text())
    assert marker["files"]["config.json"].startswith("git-sha1:")
    assert marker["files"]["model-00001-of-00002.safetensors"].startswith("sha256:")
    assert not Path(layout.partial_dir(target)).exists()

    gets = sum(hub.gets.values())
    assert main(env) == 0  # a restarted pod: the marker says done, nothing is fetched
    assert sum(hub.gets.values()) == gets


def test_single_filename_lands_at_the_path_the_engine_reads(hub: HubStandIn, models: Path) -> None:
    name = "model-00002-of-00002.safetensors"
    env = hub_env(hub, models, MODEL_FILENAME=name, MODEL_LOCAL_PATH=str(models / name))
    assert main(env) == 0
    assert (models / name).read_bytes() == hub.repos[REPO].files[name]
    assert set(hub.gets) == {name}


def test_allow_and_ignore_patterns(hub: HubStandIn, models: Path) -> None:
    env = hub_env(
        hub, models, MODEL_ALLOW_PATTERNS="*.json,*.safetensors", MODEL_IGNORE_PATTERNS="tokenizer*"
    )
    assert main(env) == 0
    assert sorted(tree(env["MODEL_LOCAL_PATH"])) == [  # "*" spans folders, as in huggingface_hub
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "original/params.json",
    ]


def test_connection_cut_mid_file_resumes_and_the_bytes_are_identical(hub: HubStandIn, models: Path) -> None:
    shard = "model-00001-of-00002.safetensors"
    hub.cut_after[shard] = [1_000_000, 2_000_000]  # two cuts, each further in
    env = hub_env(hub, models)
    assert main(env) == 0
    assert tree(env["MODEL_LOCAL_PATH"])[shard] == hub.repos[REPO].files[shard]
    # Each retry asked only for the bytes still missing.
    resumed = [offset for path, offset in hub.ranges if path == shard]
    assert resumed == [1_000_000, 3_000_000]


def test_partial_file_left_by_a_killed_pod_is_resumed(hub: HubStandIn, models: Path) -> None:
    shard = "model-00002-of-00002.safetensors"
    env = hub_env(hub, models)
    partial = Path(layout.partial_dir(env["MODEL_LOCAL_PATH"])) / shard
    partial.parent.mkdir(parents=True)
    partial.write_bytes(hub.repos[REPO].files[shard][:1_500_000])
    assert main(env) == 0
    assert tree(env["MODEL_LOCAL_PATH"])[shard] == hub.repos[REPO].files[shard]
    assert (shard, 1_500_000) in hub.ranges


def test_401_names_the_secret_to_set(hub: HubStandIn, models: Path) -> None:
    hub.repos["meta-llama/Llama-3-8B"] = Repo(files=generate_model(1), private=True)
    env = hub_env(hub, models, repo="meta-llama/Llama-3-8B")
    assert main(env) == 1
    assert termination_message(models) == (
        "401 from Hugging Face for meta-llama/Llama-3-8B: set secret modelhub-secret (key HF_TOKEN) "
        "with a token that can read it"
    )
    assert not Path(env["MODEL_LOCAL_PATH"]).exists()

    env["HF_TOKEN"] = HubStandIn.token  # the secret is set: the same pod spec now succeeds
    assert main(env) == 0
    assert tree(env["MODEL_LOCAL_PATH"]) == hub.repos["meta-llama/Llama-3-8B"].files


def test_token_from_a_file_with_a_trailing_newline_works(hub: HubStandIn, models: Path) -> None:
    """``kubectl create secret generic modelhub-secret --from-file=HF_TOKEN=token.txt`` keeps the
    file's final newline; the loader strips it instead of sending it in the Authorization header."""
    hub.repos["org/private"] = Repo(files=generate_model(3, shards=1), private=True)
    env = hub_env(hub, models, repo="org/private", HF_TOKEN=HubStandIn.token + "\n")
    assert main(env) == 0
    assert tree(env["MODEL_LOCAL_PATH"]) == hub.repos["org/private"].files


def test_no_message_ever_contains_the_token(
    hub: HubStandIn, models: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A token no stripping can repair (a newline inside it) makes the HTTP client reject the header
    and quote it; neither the logs nor the termination message (the Playground's ModelLoadFailed
    condition, readable by anyone who can read Playgrounds) may show any part of it."""
    token = "hf_firstHalfOfIt\nhf_secondHalfOfIt"
    caplog.set_level(logging.INFO)
    assert main(hub_env(hub, models, HF_TOKEN=token, LOADER_RETRIES="1")) == 1
    message = termination_message(models)
    for piece in ("hf_firstHalfOfIt", "hf_secondHalfOfIt"):
        assert piece not in message
        assert piece not in caplog.text
    assert "<redacted>" in message
    assert message.startswith(f"listing Hugging Face {REPO}@main: ")


def test_rejected_token(hub: HubStandIn, models: Path) -> None:
    assert main(hub_env(hub, models, HUGGING_FACE_HUB_TOKEN="hf_wrong")) == 1
    assert termination_message(models) == (
        f"401 from Hugging Face for {REPO}: the token in secret modelhub-secret was rejected"
    )


def test_gated_repository(hub: HubStandIn, models: Path) -> None:
    hub.repos["org/gated"] = Repo(files=generate_model(2), gated=True)
    assert main(hub_env(hub, models, repo="org/gated")) == 1
    assert termination_message(models).startswith("403 from Hugging Face for org/gated: gated repository")


def test_gated_files_fail_at_once_with_the_gated_explanation(hub: HubStandIn, models: Path) -> None:
    """On the real Hub a gated repository's listing is public and the 403 comes with the files."""
    hub.repos["org/gated"] = Repo(files=generate_model(2), gated_files=True)
    assert main(hub_env(hub, models, repo="org/gated", LOADER_PARALLEL_FILES="1")) == 1
    assert termination_message(models) == (
        "403 from Hugging Face for org/gated: gated repository; accept its terms with the account "
        "whose token is in secret modelhub-secret"
    )
    assert set(hub.resolve_requests.values()) == {1}  # not retried as if the network had failed


def test_file_gone_after_the_listing_is_a_404_not_retried(hub: HubStandIn, models: Path) -> None:
    shard = "model-00001-of-00002.safetensors"
    hub.vanished.add(shard)
    assert main(hub_env(hub, models, LOADER_PARALLEL_FILES="1")) == 1
    assert termination_message(models) == (
        f"404 from Hugging Face for {REPO}/{shard}: file not found at revision 'main'"
    )
    assert hub.resolve_requests[shard] == 1


def test_404_repository(hub: HubStandIn, models: Path) -> None:
    env = hub_env(hub, models, repo="org/missing", HF_TOKEN=HubStandIn.token)
    assert main(env) == 1
    assert termination_message(models) == (
        "404 from Hugging Face for org/missing: repository not found, or the token in secret "
        "modelhub-secret cannot read it"
    )


def test_404_filename(hub: HubStandIn, models: Path) -> None:
    env = hub_env(hub, models, MODEL_FILENAME="model-q4.gguf", MODEL_LOCAL_PATH=str(models / "model-q4.gguf"))
    assert main(env) == 1
    assert termination_message(models) == (
        f"404 from Hugging Face for {REPO}: file 'model-q4.gguf' not found at revision 'main'"
    )


def test_wrong_revision(hub: HubStandIn, models: Path) -> None:
    assert main(hub_env(hub, models, REVISION="v9.9")) == 1
    assert termination_message(models) == f"404 from Hugging Face for {REPO}: revision 'v9.9' not found"


def test_corrupt_file_is_detected_and_never_put_in_place(hub: HubStandIn, models: Path) -> None:
    shard = "model-00002-of-00002.safetensors"
    hub.corrupt.add(shard)
    env = hub_env(hub, models, LOADER_RETRIES="2")
    assert main(env) == 1
    message = termination_message(models)
    assert message.startswith(f"Hugging Face {REPO}@main: {shard}: {shard}: sha256 ")
    assert "does not match the published" in message
    assert message.endswith("(gave up after 2 retries)")
    assert hub.gets[shard] == 3
    assert not (Path(env["MODEL_LOCAL_PATH"]) / shard).exists()
    assert not Path(layout.marker_path(env["MODEL_LOCAL_PATH"])).exists()
    # The hashing threads of the failed attempts were stopped, not left behind.
    assert [t.name for t in threading.enumerate() if t.name.startswith("hash-")] == []


def test_size_only_verification_is_an_explicit_opt_out(hub: HubStandIn, models: Path) -> None:
    """LOADER_VERIFY=size skips hashing: a same-size corruption then goes unnoticed, by choice."""
    hub.corrupt.add("config.json")
    assert main(hub_env(hub, models, LOADER_VERIFY="size")) == 0


def test_corrupt_small_file_is_detected_by_its_git_blob_id(hub: HubStandIn, models: Path) -> None:
    hub.corrupt.add("config.json")
    assert main(hub_env(hub, models, LOADER_RETRIES="0")) == 1
    assert "config.json: git blob id" in termination_message(models)


def test_a_new_revision_fetches_only_the_files_that_changed(hub: HubStandIn, models: Path) -> None:
    env = hub_env(hub, models)
    assert main(env) == 0
    repo = hub.repos[REPO]
    repo.files = {**repo.files, "config.json": b'{"model_type": "llama", "v": 2}'}
    repo.revisions["v2"] = "b" * 40
    hub.gets.clear()
    assert main({**env, "REVISION": "v2"}) == 0
    assert hub.gets == {"config.json": 1}
    assert tree(env["MODEL_LOCAL_PATH"]) == repo.files


def test_lfs_files_follow_the_cdn_redirect_without_the_token(hub: HubStandIn, models: Path) -> None:
    hub.repos["org/private"] = Repo(files=generate_model(3), private=True)
    hub.cdn_redirects = True
    shard = "model-00001-of-00002.safetensors"
    hub.cut_after[shard] = [500_000]  # and a cut on the CDN leg resumes there too
    env = hub_env(hub, models, repo="org/private", HF_TOKEN=HubStandIn.token)
    assert main(env) == 0
    assert tree(env["MODEL_LOCAL_PATH"]) == hub.repos["org/private"].files
    lfs = [n for n, b in hub.repos["org/private"].files.items() if len(b) >= 1024]
    assert len(hub.cdn_authorization) == len(lfs) + 1  # every LFS file, the cut one twice
    assert set(hub.cdn_authorization) == {None}
    assert (shard, 500_000) in hub.ranges


def test_proxy_with_credentials_authenticates_the_file_downloads(
    hub: HubStandIn, models: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``HTTP_PROXY=http://user:password@proxy:3128``, the usual corporate form: the file list went
    through (huggingface_hub authenticates) but every file body got 407 until the loader's own
    transfer sent Proxy-Authorization too."""
    proxy = AuthProxyStandIn(int(hub.url.rsplit(":", 1)[1]), "svc-llmaz", "p@ss:w0rd/x")
    try:
        url = f"http://svc-llmaz:p%40ss%3Aw0rd%2Fx@127.0.0.1:{proxy.port}"
        for name in ("HTTP_PROXY", "http_proxy"):
            monkeypatch.setenv(name, url)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        # a host only the proxy can reach
        env = hub_env(hub, models, HF_ENDPOINT="http://hub.stand-in.invalid", HTTP_PROXY=url)
        caplog.set_level(logging.INFO)
        close_session()  # huggingface_hub reads the proxy variables when it creates its client
        assert main(env) == 0
        assert tree(env["MODEL_LOCAL_PATH"]) == hub.repos[REPO].files
        resolves = [auth for _, target, auth in proxy.seen if "/resolve/" in target]
        assert len(resolves) == len(hub.repos[REPO].files)
        assert set(resolves) == {proxy.expected}
        assert "p@ss:w0rd/x" not in caplog.text
    finally:
        proxy.close()
        close_session()


def test_https_through_a_proxy_with_credentials_authenticates_the_connect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxy = AuthProxyStandIn(1, "svc-llmaz", "s3cret-pass")
    try:
        monkeypatch.setenv("HTTPS_PROXY", f"http://svc-llmaz:s3cret-pass@127.0.0.1:{proxy.port}")
        monkeypatch.setenv("https_proxy", f"http://svc-llmaz:s3cret-pass@127.0.0.1:{proxy.port}")
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        with pytest.raises(OSError, match="502"), transfer.get("https://hub.stand-in.invalid/f", {}, 5):
            pass  # the stand-in has no TLS server behind it: 502 once the CONNECT is authenticated
        assert proxy.seen == [("CONNECT", "hub.stand-in.invalid:443", proxy.expected)]
    finally:
        proxy.close()


def test_files_verified_before_a_failure_are_not_fetched_again(hub: HubStandIn, models: Path) -> None:
    """A pod killed (or failed) mid-model leaves no completion marker; the files it had already
    verified and put in place must not be downloaded again by the next pod."""
    first, second = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    hub.vanished.add(second)  # the first pod fails on the second shard, after the first one
    env = hub_env(hub, models, LOADER_PARALLEL_FILES="1")
    assert main(env) == 1
    assert (Path(env["MODEL_LOCAL_PATH"]) / first).exists()
    hub.vanished.clear()
    assert main(env) == 0
    assert tree(env["MODEL_LOCAL_PATH"]) == hub.repos[REPO].files
    assert hub.gets[first] == 1  # fetched by the first pod only
    partial = Path(layout.partial_dir(env["MODEL_LOCAL_PATH"]))
    assert not partial.with_name(partial.name + ".verified").exists()  # the marker took over


def test_a_file_cut_more_often_than_the_retries_allow_still_loads_while_it_makes_progress(
    hub: HubStandIn, models: Path
) -> None:
    """An object store's client ends a request after 120 s, so a large file on a slow link is cut
    again and again, each time further in. The retries count attempts in a row that moved
    nothing: four cuts with one retry allowed still load the file, resumed each time."""
    shard = "model-00001-of-00002.safetensors"
    hub.cut_after[shard] = [500_000, 500_000, 500_000, 500_000]
    env = hub_env(hub, models, LOADER_RETRIES="1")
    assert main(env) == 0
    assert tree(env["MODEL_LOCAL_PATH"])[shard] == hub.repos[REPO].files[shard]
    assert [offset for path, offset in hub.ranges if path == shard] == [
        500_000,
        1_000_000,
        1_500_000,
        2_000_000,
    ]
