"""Benchmark (not a test): model loader throughput against a plain HTTP download of the same files.

Both download the same generated repository from the same loopback server (the Hugging Face Hub
stand-in of the loader tests, run in its own process so it does not share the client's GIL) into a
fresh folder, with the same number of parallel connections, alternating round by round:

* ``plain``: one ``http.client`` GET per file, body copied to disk in 1 MiB reads; nothing else;
* ``loader``: ``llmaz.loader`` (model info call, resume bookkeeping, sha256 / git blob verification,
  lock, completion marker, progress reporting);
* ``loader-size-only``: the same with ``LOADER_VERIFY=size`` (no hashing), to show what the
  checksums cost on this CPU.

Run: ``.venv/bin/python benchmarks/loader_bench.py [--mib 512] [--rounds 3]`` or ``nox -s bench``.
Numbers go to docs/development/benchmarks.md; the target is loader >= 90 % of plain.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import logging
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages" / "core" / "tests" / "loader"))

from standins import HubStandIn, Repo, digests, generate_model

from llmaz.loader.engine import Options, load
from llmaz.loader.huggingface import HuggingFaceSource

REPO = "bench/model"


def plain_download(url: str, files: list[str], dest: Path, parallel: int) -> None:
    parts = urlsplit(url)

    def one(name: str) -> None:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        conn.request("GET", f"/{REPO}/resolve/main/{name}")
        resp = conn.getresponse()
        assert resp.status == 200, resp.status
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as out:
            while chunk := resp.read(1 << 20):
                out.write(chunk)
        conn.close()

    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(one, files))


def loader_download(url: str, dest: Path, parallel: int, verify: bool = True) -> None:
    options = Options(parallel_files=parallel, progress_seconds=3600, verify_checksums=verify)
    load(HuggingFaceSource(REPO, endpoint=url), str(dest / "models--bench--model"), options)


def serve(mib: int, shards: int) -> None:
    files = generate_model(weights_bytes=(mib << 20) // shards, shards=shards)
    for data in files.values():
        digests(data)  # the Hub stores digests; never charge their computation to a client
    with HubStandIn() as hub:
        hub.repos[REPO] = Repo(files=files)
        print(hub.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512, help="total size of the weight shards")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.serve:
        serve(args.mib, args.shards)
        return

    files = generate_model(weights_bytes=(args.mib << 20) // args.shards, shards=args.shards)
    total = sum(len(b) for b in files.values())
    print(f"machine: {os.cpu_count()} CPUs (nproc), {cpu_model()}, Python {platform.python_version()}")
    print(
        f"repository: {len(files)} files, {total / 2**20:.0f} MiB, {args.parallel} parallel, "
        f"{args.rounds} rounds"
    )
    sample = files[max(files, key=lambda n: len(files[n]))]
    start = time.perf_counter()
    hashlib.sha256(sample).hexdigest()
    print(f"sha256 on one core of this CPU: {len(sample) / (time.perf_counter() - start) / 1e6:.0f} MB/s")
    results: dict[str, list[float]] = {"plain": [], "loader": [], "loader-size-only": []}
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--mib", str(args.mib), "--shards", str(args.shards)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()  # printed once the digests are computed
        for _ in range(args.rounds):
            for name, rates in results.items():
                dest = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
                start = time.perf_counter()
                if name == "plain":
                    plain_download(url, sorted(files), dest, args.parallel)
                else:
                    loader_download(url, dest, args.parallel, verify=name == "loader")
                rates.append(total / (time.perf_counter() - start) / 1e6)
                shutil.rmtree(dest)
    finally:
        server.terminate()
        server.wait()
    for name, rates in results.items():
        each = ", ".join(f"{r:.0f}" for r in rates)
        print(f"{name}: median {statistics.median(rates):.0f} MB/s (rounds: {each})")
    plain = statistics.median(results["plain"])
    for name in ("loader", "loader-size-only"):
        print(f"{name} / plain: {statistics.median(results[name]) / plain:.0%} (target >= 90 %)")


if __name__ == "__main__":
    main()
