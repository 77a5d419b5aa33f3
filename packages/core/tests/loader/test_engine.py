"""What every source gets from the engine: disk checks, the shared-cache lock, progress, exit paths."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import REPO, hub_env, termination_message
from standins import HubStandIn, generate_model, tree

from llmaz.loader import layout
from llmaz.loader.engine import ChecksumError, LoadError, Options, Progress, RemoteFile, _Hasher, load
from llmaz.loader.huggingface import HuggingFaceSource
from llmaz.loader.main import main


def _statvfs(free_bytes: int):  # type: ignore[no-untyped-def]
    """Stand-in for os.statvfs reporting a nearly full volume (no tmpfs can be mounted unprivileged)."""
    return lambda _path: SimpleNamespace(f_bavail=free_bytes // 4096, f_frsize=4096)


def test_free_space_is_checked_before_any_download(hub: HubStandIn, models: Path) -> None:
    target = str(models / "models--x")
    source = HuggingFaceSource(REPO, endpoint=hub.url)
    options = Options(statvfs=_statvfs(2 << 20))  # type: ignore[arg-type]
    with pytest.raises(Exception, match=r"not enough disk space at .*models--x|not enough disk space") as err:
        load(source, target, options)
    assert "the model needs 6.00 MiB more, 2.00 MiB free; give the model volume more space" in str(err.value)
    assert hub.gets == {}


def test_disk_full_while_writing_is_reported(hub: HubStandIn, models: Path) -> None:
    """RLIMIT_FSIZE stands in for a full disk: writes past the limit fail with EFBIG."""
    env = hub_env(hub, models)
    script = textwrap.dedent(
        """
        import json, resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        from llmaz.loader.main import main
        sys.exit(main(json.loads(sys.argv[1])))
        """
    )
    import json

    proc = subprocess.run(
        [sys.executable, "-c", script, json.dumps(env)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    message = termination_message(models)
    assert message.startswith("disk full while writing ")
    assert message.endswith("(File too large); give the model volume more space")
    assert not Path(layout.marker_path(env["MODEL_LOCAL_PATH"])).exists()


def shared_cache_env(hub: HubStandIn, cache: Path, revision: str = "main") -> dict[str, str]:
    """The environment the renderer gives a loader when the model volume is the node's shared cache
    (``modelLoader.sharedCache``), rebased on ``cache``."""
    env = hub_env(hub, cache, REVISION=revision, MODEL_CACHE="shared")
    env["MODEL_LOCAL_PATH"] = layout.cached_path(env["MODEL_LOCAL_PATH"], env, model_dir=str(cache))
    return env


def test_two_loaders_on_one_cache_download_once(hub: HubStandIn, models: Path) -> None:
    """Two pods on one node share the cache: one downloads, the other waits for its lock."""
    hub.gate.clear()  # the first loader holds the lock and waits for file bytes
    env = {**os.environ, **shared_cache_env(hub, models)}
    cmd = [sys.executable, "-m", "llmaz.loader.main"]
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not hub.gets and time.monotonic() < deadline:
        time.sleep(0.05)
    assert hub.gets, "the first loader started downloading"
    second = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert second.stdout is not None
    waiting = ""
    while "another loader is writing" not in waiting:  # blocks until the second loader says it waits
        line = second.stdout.readline()
        assert line, waiting
        waiting += line
    hub.gate.set()
    out1, _ = first.communicate(timeout=120)
    out2, _ = second.communicate(timeout=120)
    out2 = waiting + out2
    assert (first.returncode, second.returncode) == (0, 0), out1 + out2
    assert all(count == 1 for count in hub.gets.values()), hub.gets
    assert len(hub.gets) == len(hub.repos[REPO].files)
    assert "already complete" in out2
    assert tree(env["MODEL_LOCAL_PATH"]) == hub.repos[REPO].files
    # The lock and the marker are per model and revision, in that model's cache folder.
    folder = Path(env["MODEL_LOCAL_PATH"]).parent
    assert folder.parent == models
    assert folder.name.startswith("Huggingface--stand-in-tiny-llama--main--")
    assert Path(layout.lock_path(env["MODEL_LOCAL_PATH"])).parent == folder / ".llmaz"
    assert Path(layout.marker_path(env["MODEL_LOCAL_PATH"])).is_file()


def test_two_revisions_in_one_cache_do_not_overwrite_each_other(hub: HubStandIn, models: Path) -> None:
    """Pods of two OpenModels pinning different revisions of one repository, on one node."""
    repo = hub.repos[REPO]
    new_files = generate_model(seed=1)
    repo.revisions["v2"] = "b" * 40
    old_env, new_env = shared_cache_env(hub, models, "main"), shared_cache_env(hub, models, "v2")
    assert old_env["MODEL_LOCAL_PATH"] != new_env["MODEL_LOCAL_PATH"]
    assert main(old_env) == 0
    old_files = dict(repo.files)
    repo.files = new_files  # the stand-in serves v2's bytes from now on
    assert main(new_env) == 0
    gets = sum(hub.gets.values())
    assert main(old_env) == 0  # a restarted pod of the first model: still complete, nothing fetched
    assert sum(hub.gets.values()) == gets
    assert tree(old_env["MODEL_LOCAL_PATH"]) == old_files
    assert tree(new_env["MODEL_LOCAL_PATH"]) == new_files


def test_progress_is_readable_in_the_logs(
    hub: HubStandIn, models: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hub.throttle_bytes_per_second = 10e6
    caplog.set_level("INFO", logger="llmaz.loader")
    assert main(hub_env(hub, models, LOADER_PROGRESS_SECONDS="0.2")) == 0
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("progress:")]
    assert lines, "at least one progress line while downloading"
    assert all(" files, " in line and " MB/s, ETA " in line and "of 6.00 MiB" in line for line in lines)
    done = [r.getMessage() for r in caplog.records if r.getMessage().startswith("done:")]
    assert len(done) == 1
    assert "6 files, 6.00 MiB downloaded" in done[0]


def test_streamed_hashing_keeps_the_byte_order() -> None:
    """Small pieces are hashed in the download thread, large ones on the helper thread: a small
    piece after large ones (the end of a file) must still be hashed after them."""
    pieces = [b"head", os.urandom(1 << 20), os.urandom(3 << 20), b"x" * 10, os.urandom(70_000), b"tail"]
    data = b"".join(pieces)
    good = RemoteFile("f", len(data), sha256=hashlib.sha256(data).hexdigest())
    with _Hasher(good) as hasher:
        for piece in pieces:
            hasher.update(piece)
        hasher.check("f")
    swapped = pieces[:1] + pieces[2:0:-1] + pieces[3:]  # same bytes, two large pieces swapped
    with _Hasher(good) as hasher:
        for piece in swapped:
            hasher.update(piece)
        with pytest.raises(ChecksumError, match="does not match the published"):
            hasher.check("f")


def test_progress_line() -> None:
    progress = Progress(files_total=10, bytes_total=4 << 30, files_done=3, bytes_done=1 << 30)
    assert progress.line(window_bytes=100_000_000, window_seconds=1.0) == (
        "progress: 3/10 files, 1.00 GiB of 4.00 GiB (25%), 100.0 MB/s, ETA 32s"
    )


def test_pvc_and_host_paths_are_validated_not_copied(tmp_path: Path) -> None:
    model = tmp_path / "Qwen2-0.5B"
    model.mkdir()
    log = tmp_path / "termination-log"
    env = {"MODEL_SOURCE_TYPE": "path", "MODEL_LOCAL_PATH": str(model), "LOADER_TERMINATION_LOG": str(log)}
    assert main(env) == 1
    assert log.read_text().strip() == f"{model}: model folder is empty"
    (model / "config.json").write_text("{}")
    assert main(env) == 0
    assert main({**env, "MODEL_LOCAL_PATH": str(tmp_path / "absent")}) == 1
    assert "model path does not exist (is the PVC or host path mounted and populated?)" in log.read_text()


def test_ollama_has_nothing_to_do(tmp_path: Path) -> None:
    assert main({"MODEL_SOURCE_TYPE": "ollama", "MODEL_ID": "qwen2:0.5b"}) == 0


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {},
            "MODEL_SOURCE_TYPE='': unknown model source type; "
            "expected one of modelhub, objstore, path, ollama",
        ),
        ({"MODEL_SOURCE_TYPE": "modelhub"}, "MODEL_ID is not set: the hub model id, e.g. org/name"),
        (
            {"MODEL_SOURCE_TYPE": "modelhub", "MODEL_ID": "a/b", "MODEL_HUB_NAME": "Civitai"},
            "MODEL_HUB_NAME='Civitai': unknown model hub; expected Huggingface or ModelScope",
        ),
        (
            {"MODEL_SOURCE_TYPE": "objstore", "PROVIDER": "AZURE", "BUCKET": "b", "MODEL_PATH": "m"},
            "PROVIDER='AZURE': expected one of S3, GCS, OSS",
        ),
        (
            {"MODEL_SOURCE_TYPE": "objstore", "PROVIDER": "S3", "BUCKET": "", "MODEL_PATH": "m"},
            "BUCKET is empty: the S3 bucket to read from",
        ),
        (
            {"MODEL_SOURCE_TYPE": "modelhub", "MODEL_ID": "a/b", "LOADER_PARALLEL_FILES": "many"},
            "LOADER_PARALLEL_FILES='many': not a number",
        ),
        (
            {"MODEL_SOURCE_TYPE": "modelhub", "MODEL_ID": "a/b", "LOADER_VERIFY": "maybe"},
            "LOADER_VERIFY='maybe': expected checksum or size",
        ),
        (
            {"MODEL_SOURCE_TYPE": "modelhub", "MODEL_ID": "a/b", "LOADER_RETRIES": "-1"},
            "LOADER_RETRIES='-1': must be at least 0",
        ),
        (
            {"MODEL_SOURCE_TYPE": "modelhub", "MODEL_ID": "a/b", "MODEL_CACHE": "node"},
            "MODEL_CACHE='node': expected 'shared' or nothing",
        ),
    ],
)
def test_bad_environment_gets_a_clear_message(tmp_path: Path, env: dict[str, str], message: str) -> None:
    log = tmp_path / "termination-log"
    assert main({**env, "LOADER_TERMINATION_LOG": str(log)}) == 1
    assert log.read_text().strip() == message


def test_cli_entry_point_exits_non_zero_with_the_cause(tmp_path: Path) -> None:
    log = tmp_path / "termination-log"
    env = {**os.environ, "MODEL_SOURCE_TYPE": "nope", "LOADER_TERMINATION_LOG": str(log)}
    proc = subprocess.run(
        [sys.executable, "-m", "llmaz.cli", "load-model"],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert log.read_text().startswith("MODEL_SOURCE_TYPE='nope': unknown model source type")


class _ListingOnly:
    """Test double of a source whose listing names a file outside the model folder."""

    single_file = False

    def describe(self) -> str:
        return "s3://bucket/evil"

    def key(self) -> str:
        return "evil"

    def list_files(self) -> list[RemoteFile]:
        return [RemoteFile(path="../../etc/cron.d/x", size=1)]

    def read(self, file: RemoteFile, offset: int) -> list[bytes]:
        return [b"x"]


def test_remote_names_cannot_escape_the_model_folder(models: Path) -> None:
    with pytest.raises(
        LoadError, match=r"refusing to write outside the model folder: .*'\.\./\.\./etc/cron\.d/x'"
    ):
        load(_ListingOnly(), str(models / "models--evil"), Options())
    assert not (models.parent / "etc").exists()


def _refuse_writes(monkeypatch: pytest.MonkeyPatch, under: Path, code: int) -> None:
    """STAND-IN for a model volume the loader's uid cannot write (a folder left by a preheat Job
    running as another uid, a PVC without fsGroup) or a read-only one: the tests run as root here,
    where chmod refuses nothing, and no filesystem can be mounted. Creating a folder or opening a
    file for writing under ``under`` fails with ``code``, as the kernel would."""
    from llmaz.loader import engine

    real_open, real_mkdir = open, os.mkdir

    def refused(path: object) -> bool:
        return Path(str(path)).is_relative_to(under)

    def fake_open(file: object, mode: str = "r", *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        if refused(file) and any(c in mode for c in "wax+"):
            raise OSError(code, os.strerror(code), str(file))
        return real_open(file, mode, *args, **kwargs)  # type: ignore[call-overload]

    def fake_mkdir(path: object, *args: object, **kwargs: object) -> None:
        if refused(path) and not os.path.isdir(str(path)):
            raise OSError(code, os.strerror(code), str(path))
        real_mkdir(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "open", fake_open, raising=False)
    monkeypatch.setattr(os, "mkdir", fake_mkdir)


def test_partial_folder_not_writable_names_the_path_and_the_uid(
    hub: HubStandIn, models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = hub_env(hub, models)
    partial = Path(layout.partial_dir(env["MODEL_LOCAL_PATH"]))
    partial.mkdir(parents=True)
    _refuse_writes(monkeypatch, partial, errno.EACCES)
    assert main(env) == 1
    message = termination_message(models)
    assert message.startswith(f"cannot write {partial}/"), message
    assert message.endswith(
        f": permission denied for uid {os.getuid()} (gid {os.getgid()}); make the model volume "
        "writable by it (the pod's fsGroup, or the owner of a shared cache)"
    )


def test_read_only_volume_when_writing_the_marker(
    hub: HubStandIn, models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = hub_env(hub, models)
    marker = Path(layout.marker_path(env["MODEL_LOCAL_PATH"]))
    marker.parent.mkdir(parents=True)
    _refuse_writes(monkeypatch, marker.parent / f".{marker.name}.{os.getpid()}.tmp", errno.EROFS)
    assert main(env) == 1
    assert termination_message(models) == (
        f"cannot write {marker.parent}/.{marker.name}.{os.getpid()}.tmp: the model volume is read-only; "
        "mount it read-write"
    )


def test_an_install_without_the_loader_extra_says_which_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pip install llmaz`` without ``[loader]`` (or an image built without it): the termination
    message names the missing module and the extra, not a bare ModuleNotFoundError."""
    monkeypatch.setitem(sys.modules, "obstore", None)  # as if obstore were not installed
    monkeypatch.delitem(sys.modules, "llmaz.loader.objstore", raising=False)
    log = tmp_path / "termination-log"
    env = {
        "MODEL_SOURCE_TYPE": "objstore",
        "MODEL_PATH": "s3://bucket/models/m",
        "PROVIDER": "S3",
        "BUCKET": "bucket",
        "MODEL_LOCAL_PATH": str(tmp_path / "models" / "models--m"),
        "LOADER_TERMINATION_LOG": str(log),
    }
    assert main(env) == 1
    assert log.read_text().strip() == (
        "llmaz load-model needs the 'loader' extra (obstore is missing): pip install 'llmaz[loader]', "
        "or use the llmaz image"
    )
