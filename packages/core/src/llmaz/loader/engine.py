"""What every source shares: parallel file downloads with retries, resume, verification, progress,
a per-model lock and an atomic completion marker.

A source (one module per kind: :mod:`~llmaz.loader.huggingface`, :mod:`~llmaz.loader.objstore`, …)
only lists the files of one model at one revision and streams the bytes of one file from an offset.
Everything else happens here, so every source gets the same guarantees:

* a file reaches its final path only after its size (and checksum, where the source gives one) was
  verified; until then its bytes live under ``.llmaz/partial/`` and a retry or a restarted pod
  continues from where it stopped;
* the completion marker is written last, atomically, and records the source key (source +
  revision) and each file's digest, so a restarted pod or a second pod on a shared per-node cache
  skips the work, and a new revision fetches only the files that changed;
* a file lock on the model's name means two loaders never write the same files: the second waits
  and then finds the marker.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import queue
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from llmaz.loader import layout

log = logging.getLogger("llmaz.loader")

CHUNK = 1 << 20
HASH_QUEUE = 4
"""Chunks of one file waiting for its hashing thread (so at most 4 MiB per download in flight)."""
HASH_INLINE_MAX = 64 << 10
"""A file's chunks are hashed in the download thread until one is at least this large (small files
need no thread); from then on all of them go through the queue, in order."""
MARKER_VERSION = 1


class LoadError(Exception):
    """A failure that retrying will not fix; ``str()`` is the one-line cause shown to the user."""


class TransientError(Exception):
    """A failure worth retrying (connection cut, timeout, 5xx, 429, short read)."""


class ChecksumError(TransientError):
    """The downloaded bytes do not match the digest the source published."""


@dataclass(frozen=True)
class RemoteFile:
    """One file of a model, as the source describes it."""

    path: str
    """Path relative to the model root (posix); for a single-file model, its name."""
    size: int | None
    sha256: str | None = None
    git_sha1: str | None = None
    """Git blob id (``sha1("blob <size>\\0" + bytes)``), which Hugging Face gives for non-LFS files."""
    version: str | None = None
    """ETag or similar: a resumed read fails when the object changed underneath it."""

    def digest(self) -> str | None:
        if self.sha256:
            return f"sha256:{self.sha256}"
        if self.git_sha1:
            return f"git-sha1:{self.git_sha1}"
        return None


class Source(Protocol):
    """What a model source provides to the engine."""

    def describe(self) -> str:
        """Human name used in logs and errors, e.g. ``Hugging Face repository org/name@main``."""
        ...

    def key(self) -> str:
        """Stable key of this source at this revision (stored in the completion marker)."""
        ...

    @property
    def single_file(self) -> bool:
        """Whether ``MODEL_LOCAL_PATH`` is one file rather than a folder."""
        ...

    def list_files(self) -> list[RemoteFile]:
        """Files to fetch; :class:`LoadError` for permanent problems (401, 404, bad revision)."""
        ...

    def read(self, file: RemoteFile, offset: int) -> Iterable[bytes]:
        """The bytes of ``file`` from ``offset`` on; :class:`TransientError` when worth retrying."""
        ...


@dataclass
class Options:
    """Loader tuning, from ``LOADER_*`` variables (see :mod:`llmaz.loader.layout`)."""

    parallel_files: int = 4
    retries: int = 5
    backoff_seconds: float = 1.0
    backoff_cap_seconds: float = 30.0
    progress_seconds: float = 5.0
    lock_timeout_seconds: float = 6 * 3600.0
    free_space_margin_bytes: int = 64 << 20
    verify_checksums: bool = True
    """Hash every byte against the source's digests (sizes are always checked)."""
    statvfs: Callable[[str], os.statvfs_result] = os.statvfs
    """Injected by tests to emulate a full disk (no tmpfs can be mounted unprivileged)."""
    sleep: Callable[[float], None] = time.sleep

    @classmethod
    def from_env(cls, env: dict[str, str]) -> Options:
        opts = cls()

        def number(name: str, cast: Callable[[str], Any], minimum: float) -> Any:
            raw = env.get(name)
            if raw is None or raw == "":
                return None
            try:
                value = cast(raw)
            except ValueError:
                raise LoadError(f"{name}={raw!r}: not a number") from None
            if value < minimum:
                raise LoadError(f"{name}={raw!r}: must be at least {minimum}")
            return value

        verify = env.get(layout.ENV_VERIFY, "").strip().lower()
        if verify not in ("", "checksum", "size"):
            raise LoadError(f"{layout.ENV_VERIFY}={verify!r}: expected checksum or size")
        opts.verify_checksums = verify != "size"
        for env_name, attr, cast, minimum in (
            (layout.ENV_PARALLEL, "parallel_files", int, 1),
            (layout.ENV_RETRIES, "retries", int, 0),
            (layout.ENV_BACKOFF, "backoff_seconds", float, 0),
            (layout.ENV_PROGRESS_SECONDS, "progress_seconds", float, 0.1),
            (layout.ENV_LOCK_TIMEOUT, "lock_timeout_seconds", float, 0),
        ):
            value = number(env_name, cast, minimum)
            if value is not None:
                setattr(opts, attr, value)
        return opts


@dataclass
class Result:
    files: int
    bytes_total: int
    bytes_downloaded: int
    seconds: float
    skipped: bool = False
    """Nothing to do: a completion marker for this source and revision was found."""


# --- sizes and rates --------------------------------------------------------------------------------


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def human_duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


@dataclass
class Progress:
    """Counters shared by the download threads and the reporter."""

    files_total: int
    bytes_total: int
    files_done: int = 0
    bytes_done: int = 0
    bytes_this_run: int = 0
    started: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, n: int) -> None:
        with self.lock:
            self.bytes_done += n
            self.bytes_this_run += n

    def rewind(self, n: int) -> None:
        """Bytes thrown away (a corrupt or over-long partial file): no longer done, still transferred."""
        with self.lock:
            self.bytes_done -= n

    def file_done(self) -> None:
        with self.lock:
            self.files_done += 1

    def line(self, window_bytes: int, window_seconds: float) -> str:
        rate = window_bytes / window_seconds if window_seconds > 0 else 0.0
        left = max(self.bytes_total - self.bytes_done, 0)
        eta = human_duration(left / rate) if rate > 0 else "unknown"
        pct = 100.0 * self.bytes_done / self.bytes_total if self.bytes_total else 100.0
        return (
            f"progress: {self.files_done}/{self.files_total} files, {human_bytes(self.bytes_done)}"
            f" of {human_bytes(self.bytes_total)} ({pct:.0f}%), {rate / 1e6:.1f} MB/s, ETA {eta}"
        )


@contextlib.contextmanager
def _reporter(progress: Progress, every: float) -> Iterator[None]:
    stop = threading.Event()

    def run() -> None:
        last_bytes, last_time = progress.bytes_this_run, time.monotonic()
        while not stop.wait(every):
            now, now_bytes = time.monotonic(), progress.bytes_this_run
            log.info(progress.line(now_bytes - last_bytes, now - last_time))
            last_bytes, last_time = now_bytes, now

    thread = threading.Thread(target=run, name="loader-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


# --- the completion marker and the lock --------------------------------------------------------------


def read_marker(local_path: str) -> dict[str, Any] | None:
    path = Path(layout.marker_path(local_path))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("version") == MARKER_VERSION else None


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    with contextlib.suppress(OSError):  # make the rename durable where the filesystem allows it
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _is_complete(marker: dict[str, Any] | None, key: str, local_path: str) -> bool:
    return marker is not None and marker.get("key") == key and os.path.exists(local_path)


@contextlib.contextmanager
def model_lock(local_path: str, timeout: float) -> Iterator[None]:
    """Exclusive right to write ``local_path`` (held across processes and pods sharing the volume)."""
    from filelock import FileLock, Timeout

    path = str(layout.lock_path(local_path))
    lock = FileLock(path, is_singleton=False)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.info("another loader is writing %s; waiting for it (lock %s)", local_path, path)
        try:
            lock.acquire(timeout=timeout)
        except Timeout:
            raise LoadError(
                f"another loader held the lock {path} for more than {human_duration(timeout)}"
            ) from None
    try:
        yield
    finally:
        lock.release()


# --- one file ------------------------------------------------------------------------------------------


def _safe_relative(path: str) -> PurePosixPath:
    rel = PurePosixPath(path)
    if rel.is_absolute() or not rel.parts or any(p in ("..", "") for p in rel.parts):
        raise LoadError(f"refusing to write outside the model folder: remote file name {path!r}")
    return rel


class _Hasher:
    """The digests of one file, computed on a helper thread while the download goes on.

    Hashed in the download thread, a stream stopped reading its socket while it hashed the chunk it
    had just written (sha256 runs at about 1 GB/s per core, the same order as a fast transfer).
    Here the download thread only queues the chunk (``bytes`` are immutable, so no copy) and goes
    back to the socket; the helper thread hashes it meanwhile (``hashlib`` releases the GIL on large
    buffers, so it runs on another core). The queue is bounded: a hash that cannot keep up slows the
    download down instead of filling memory (at most :data:`HASH_QUEUE` chunks per file).
    """

    def __init__(self, file: RemoteFile, enabled: bool = True) -> None:
        self.file = file
        self.sha256 = hashlib.sha256() if file.sha256 and enabled else None
        self.sha1 = None
        if enabled and file.git_sha1 and not file.sha256 and file.size is not None:
            self.sha1 = hashlib.sha1(f"blob {file.size}\0".encode(), usedforsecurity=False)
        self._queue: queue.Queue[bytes | None] | None = None
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return self.sha256 is not None or self.sha1 is not None

    def __enter__(self) -> _Hasher:
        return self

    def __exit__(self, *exc: object) -> None:
        self._finish()

    def update(self, data: bytes) -> None:
        if not self.active:
            return
        if self._queue is None and len(data) < HASH_INLINE_MAX:
            self._hash(data)  # small files: a thread would cost more than the hash; order is kept
            return
        if self._queue is None:
            self._queue = queue.Queue(maxsize=HASH_QUEUE)
            self._thread = threading.Thread(
                target=self._run, name=f"hash-{threading.current_thread().name}", daemon=True
            )
            self._thread.start()
        self._queue.put(data)

    def _hash(self, data: bytes) -> None:
        if self.sha256 is not None:
            self.sha256.update(data)
        if self.sha1 is not None:
            self.sha1.update(data)

    def _run(self) -> None:
        assert self._queue is not None
        while (data := self._queue.get()) is not None:
            self._hash(data)

    def _finish(self) -> None:
        """Wait until every queued chunk is hashed (also when the download failed: no stray thread)."""
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._queue = self._thread = None

    def check(self, where: str) -> None:
        self._finish()
        if self.sha256 is not None and self.sha256.hexdigest() != self.file.sha256:
            raise ChecksumError(
                f"{where}: sha256 {self.sha256.hexdigest()} does not match the published {self.file.sha256}"
            )
        if self.sha1 is not None and self.sha1.hexdigest() != self.file.git_sha1:
            raise ChecksumError(
                f"{where}: git blob id {self.sha1.hexdigest()} does not match the published "
                f"{self.file.git_sha1}"
            )


def _disk_error(err: OSError, where: str) -> LoadError | None:
    """The one-line cause for a write the model volume refused (full, not writable, read-only)."""
    if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return LoadError(
            f"disk full while writing {where} ({os.strerror(err.errno or 0)}); "
            "give the model volume more space"
        )
    path = err.filename or where
    if err.errno in (errno.EACCES, errno.EPERM):
        return LoadError(
            f"cannot write {path}: permission denied for uid {os.getuid()} (gid {os.getgid()}); "
            "make the model volume writable by it (the pod's fsGroup, or the owner of a shared cache)"
        )
    if err.errno == errno.EROFS:
        return LoadError(f"cannot write {path}: the model volume is read-only; mount it read-write")
    return None


@contextlib.contextmanager
def _volume_errors(where: str) -> Iterator[None]:
    """Turn a refused write anywhere under the model volume into its one-line cause."""
    try:
        yield
    except OSError as err:
        mapped = _disk_error(err, where)
        if mapped is None:
            raise
        raise mapped from err


class _Downloader:
    def __init__(self, source: Source, local_path: str, options: Options, progress: Progress) -> None:
        self.source = source
        self.local_path = local_path
        self.options = options
        self.progress = progress
        self.partial_root = Path(layout.partial_dir(local_path))
        self.identity_root = self.partial_root.with_name(self.partial_root.name + ".identity")
        self.verified_root = self.partial_root.with_name(self.partial_root.name + ".verified")
        self.cancelled = threading.Event()

    def destination(self, file: RemoteFile) -> Path:
        if self.source.single_file:
            return Path(self.local_path)
        return Path(self.local_path, *_safe_relative(file.path).parts)

    def partial(self, file: RemoteFile) -> Path:
        return self.partial_root.joinpath(*_safe_relative(file.path).parts)

    def partial_identity(self, file: RemoteFile) -> Path:
        """Beside the partial file, in a tree of its own (no remote name can collide with it): the
        version its bytes came from, so a restart never splices two versions of one object."""
        return self.identity_root.joinpath(*_safe_relative(file.path).parts)

    def verified(self, file: RemoteFile) -> Path:
        """The journal entry of a file verified and put in place before the marker exists: its
        digest, so a pod killed before the end does not fetch it again."""
        return self.verified_root.joinpath(*_safe_relative(file.path).parts)

    def recorded(self, file: RemoteFile) -> str | None:
        return _read_text(self.verified(file))

    def fetch(self, file: RemoteFile) -> None:
        """Fetch one file, resuming after transient errors. The retries count failed attempts in a
        row that moved nothing: one that added bytes starts the count again, so a large file on a
        slow link, whose requests an object store's client ends after a while (120 s), goes on
        for as long as it makes progress, and a stalled one still gives up."""
        attempt = 0
        while True:
            if self.cancelled.is_set():
                return
            part = self.partial(file)
            before = part.stat().st_size if part.exists() else 0
            try:
                self._attempt(file)
                self.progress.file_done()
                return
            except TransientError as err:
                if part.exists() and part.stat().st_size > before:
                    attempt = 0  # progress: this failure does not count against the retries
                attempt += 1
                if attempt > self.options.retries:
                    raise LoadError(
                        f"{self.source.describe()}: {file.path}: {err} "
                        f"(gave up after {self.options.retries} retries)"
                    ) from err
                delay = min(
                    self.options.backoff_cap_seconds, self.options.backoff_seconds * 2 ** (attempt - 1)
                )
                delay *= random.uniform(0.5, 1.0)
                log.warning(
                    "%s: %s (retry %d of %d in %.1fs, resuming)",
                    file.path,
                    err,
                    attempt,
                    self.options.retries,
                    delay,
                )
                self.options.sleep(delay)

    def _attempt(self, file: RemoteFile) -> None:
        part = self.partial(file)
        part.parent.mkdir(parents=True, exist_ok=True)
        offset = part.stat().st_size if part.exists() else 0
        if file.size is not None and offset > file.size:
            log.warning("%s: partial file is longer than the remote one; starting over", file.path)
            part.unlink()
            self.progress.rewind(offset)
            offset = 0
        identity = _identity(file)
        marker = self.partial_identity(file)
        recorded = _read_text(marker)
        # A partial file without a record (left by an older loader) is resumed only when its
        # checksum will be verified: a spliced file then fails the check and is fetched again.
        checked = self.options.verify_checksums and file.digest() is not None
        if offset and (recorded != identity if recorded is not None else not checked):
            log.warning("%s: partial file is from another version of it; starting over", file.path)
            part.unlink()
            self.progress.rewind(offset)
            offset = 0
        if not offset:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(identity, encoding="utf-8")
        with _Hasher(file, self.options.verify_checksums) as hasher:
            self._transfer(file, part, offset, hasher)

    def _transfer(self, file: RemoteFile, part: Path, offset: int, hasher: _Hasher) -> None:
        if offset and hasher.active:  # a resumed file: its prefix is hashed once, from disk
            with open(part, "rb") as old:
                while chunk := old.read(CHUNK):
                    hasher.update(chunk)
        try:
            if file.size is None or offset < file.size:
                with open(part, "ab") as out:
                    for chunk in self.source.read(file, offset):
                        if self.cancelled.is_set():
                            return
                        out.write(chunk)
                        hasher.update(chunk)
                        self.progress.add(len(chunk))
                got = part.stat().st_size
                if file.size is not None and got < file.size:
                    raise TransientError(f"connection ended after {got} of {file.size} bytes")
            got = part.stat().st_size
            if file.size is not None and got != file.size:
                part.unlink()
                self.progress.rewind(got)
                raise ChecksumError(f"received {got} bytes, expected {file.size}")
            try:
                hasher.check(file.path)
            except ChecksumError:
                part.unlink()
                self.progress.rewind(got)
                raise
            dest = self.destination(file)
            dest.parent.mkdir(parents=True, exist_ok=True)
            journal = self.verified(file)
            journal.unlink(missing_ok=True)  # never an entry naming what dest is no longer
            os.replace(part, dest)
            digest = file.digest() if self.options.verify_checksums else None
            if digest is not None:  # only a checked digest may be trusted later
                journal.parent.mkdir(parents=True, exist_ok=True)
                _write_atomic(journal, digest)
        except OSError as err:
            disk = _disk_error(err, str(self.destination(file)))
            if disk is not None:
                raise disk from err
            raise


def _identity(file: RemoteFile) -> str:
    """What one version of a remote file is known by: its ETag/version, else its published digest,
    else its size (all a source gives)."""
    return file.version or file.digest() or f"size:{file.size}"


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None


def _existing_ok(
    dest: Path, file: RemoteFile, previous: dict[str, Any] | None, journal: str | None = None
) -> bool:
    """A file already in place (verified before it was moved there) that this revision still wants:
    the last completion marker or this run's journal (a pod killed mid-model) records its digest."""
    try:
        size = dest.stat().st_size
    except OSError:
        return False
    if file.size is not None and size != file.size:
        return False
    digest = file.digest()
    if digest is None:
        return file.size is not None
    recorded = (previous or {}).get("files", {}).get(file.path)
    return digest in (recorded, journal)


def _retrying(call: Callable[[], list[RemoteFile]], options: Options, what: str) -> list[RemoteFile]:
    attempt = 0
    while True:
        try:
            return call()
        except TransientError as err:
            attempt += 1
            if attempt > options.retries:
                raise LoadError(f"{what}: {err} (gave up after {options.retries} retries)") from err
            delay = min(options.backoff_cap_seconds, options.backoff_seconds * 2 ** (attempt - 1))
            log.warning("%s: %s (retry %d of %d in %.1fs)", what, err, attempt, options.retries, delay)
            options.sleep(delay)


def check_free_space(path: str, needed: int, options: Options) -> None:
    """Fail before downloading when the volume cannot hold what is left to fetch."""
    probe = path
    while probe and not os.path.exists(probe):
        probe = os.path.dirname(probe)
    st = options.statvfs(probe or "/")
    free = st.f_bavail * st.f_frsize
    if needed + options.free_space_margin_bytes > free:
        raise LoadError(
            f"not enough disk space at {probe}: the model needs {human_bytes(needed)} more, "
            f"{human_bytes(free)} free; give the model volume more space"
        )


def load(source: Source, local_path: str, options: Options | None = None) -> Result:
    """Fetch ``source`` into ``local_path`` (a file or a folder); idempotent and safe to run twice."""
    options = options or Options()
    started = time.monotonic()
    state = Path(layout.state_dir(local_path))
    try:
        state.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _disk_error(err, str(state)) or LoadError(f"cannot create {state}: {err.strerror}") from err
    key = source.key()
    with _volume_errors(local_path), model_lock(local_path, options.lock_timeout_seconds):
        previous = read_marker(local_path)
        if _is_complete(previous, key, local_path):
            assert previous is not None
            log.info("%s is already complete in %s; nothing to do", source.describe(), local_path)
            return Result(
                files=len(previous.get("files", {})),
                bytes_total=int(previous.get("bytes", 0)),
                bytes_downloaded=0,
                seconds=time.monotonic() - started,
                skipped=True,
            )
        log.info("listing %s", source.describe())
        files = _retrying(source.list_files, options, f"listing {source.describe()}")
        if not files:
            raise LoadError(f"{source.describe()}: no files to download (check the path and patterns)")
        if source.single_file and len(files) != 1:
            raise LoadError(f"{source.describe()}: expected one file, found {len(files)}")
        dl = _Downloader(source, local_path, options, Progress(len(files), 0))
        todo: list[RemoteFile] = []
        done_bytes = 0
        for f in files:
            if _existing_ok(dl.destination(f), f, previous, dl.recorded(f)):
                done_bytes += f.size or 0
            else:
                todo.append(f)
        partial_bytes = sum(dl.partial(f).stat().st_size for f in todo if dl.partial(f).exists())
        total = sum(f.size or 0 for f in files)
        check_free_space(local_path, max(total - done_bytes - partial_bytes, 0), options)
        progress = dl.progress
        progress.bytes_total = total
        progress.bytes_done = done_bytes + partial_bytes
        progress.files_done = len(files) - len(todo)
        log.info(
            "fetching %d of %d files (%s; %s already here) into %s with %d parallel downloads",
            len(todo),
            len(files),
            human_bytes(total),
            human_bytes(done_bytes + partial_bytes),
            local_path,
            options.parallel_files,
        )
        with _reporter(progress, options.progress_seconds):
            _run_parallel(dl, todo, options.parallel_files)
        marker = {
            "version": MARKER_VERSION,
            "key": key,
            "source": source.describe(),
            "bytes": total,
            # A digest is recorded only when it was checked, since the next revision trusts it.
            "files": {
                f.path: (f.digest() if options.verify_checksums else None) or f"size:{f.size}" for f in files
            },
            "completed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        _write_atomic(Path(layout.marker_path(local_path)), json.dumps(marker, indent=1, sort_keys=True))
        shutil.rmtree(dl.partial_root, ignore_errors=True)
        shutil.rmtree(dl.identity_root, ignore_errors=True)
        shutil.rmtree(dl.verified_root, ignore_errors=True)
    seconds = time.monotonic() - started
    log.info(
        "done: %s in %s, %d files, %s downloaded (%.1f MB/s)",
        source.describe(),
        human_duration(seconds),
        len(files),
        human_bytes(progress.bytes_this_run),
        progress.bytes_this_run / seconds / 1e6 if seconds else 0.0,
    )
    return Result(len(files), total, progress.bytes_this_run, seconds)


def _run_parallel(dl: _Downloader, files: list[RemoteFile], workers: int) -> None:
    if not files:
        return
    # Largest first, so one big file does not start last and finish alone.
    ordered = sorted(files, key=lambda f: -(f.size or 0))
    with ThreadPoolExecutor(max_workers=min(workers, len(ordered)), thread_name_prefix="loader") as pool:
        futures = [pool.submit(dl.fetch, f) for f in ordered]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((f for f in done if f.exception() is not None), None)
        if failed is not None:
            dl.cancelled.set()
            for fut in futures:
                fut.cancel()
            error = failed.exception()
            assert error is not None
            raise error


def load_delegated(
    describe: str, key: str, local_path: str, options: Options, download: Callable[[], None]
) -> Result:
    """Lock and completion marker around a download a client library performs itself."""
    started = time.monotonic()
    with _volume_errors(local_path):
        Path(layout.state_dir(local_path)).mkdir(parents=True, exist_ok=True)
    with _volume_errors(local_path), model_lock(local_path, options.lock_timeout_seconds):
        previous = read_marker(local_path)
        if _is_complete(previous, key, local_path):
            log.info("%s is already complete in %s; nothing to do", describe, local_path)
            return Result(0, int((previous or {}).get("bytes", 0)), 0, time.monotonic() - started, True)
        log.info("fetching %s into %s", describe, local_path)
        download()
        size = sum(p.stat().st_size for p in Path(local_path).rglob("*") if p.is_file())
        marker = {"version": MARKER_VERSION, "key": key, "source": describe, "bytes": size, "files": {}}
        _write_atomic(Path(layout.marker_path(local_path)), json.dumps(marker, indent=1, sort_keys=True))
    seconds = time.monotonic() - started
    log.info("done: %s in %s, %s", describe, human_duration(seconds), human_bytes(size))
    return Result(0, size, size, seconds)
