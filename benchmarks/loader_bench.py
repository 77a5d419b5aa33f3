"""Benchmark (not a test): model loader throughput against a plain HTTP download of the same files.

Both download the same generated repository from the same loopback server (the Hugging Face Hub
stand-in of the loader tests, run in its own process so it does not share the client's GIL) into a
fresh folder, with the same number of parallel connections, alternating round by round:

* ``plain``: one ``http.client`` GET per file, body copied to disk in 1 MiB reads; nothing else;
* ``loader``: ``llmaz.loader`` (model info call, resume bookkeeping, sha256 / git blob verification,
  lock, completion marker, progress reporting);
* ``loader-size-only``: the same with ``LOADER_VERIFY=size`` (no hashing), to show what the
  checksums cost on this CPU.

Each case reports its wall-clock rate (median and range over the rounds) and the CPU it used per
byte, client process and stand-in server apart: on a shared machine the rate swings with what else
runs, the CPU per byte does not, and on loopback the CPU is all that limits the transfer.
``--link-mbps N`` throttles each connection of the stand-in to N MB/s, a network-bound download
like a node's from a hub or a bucket.

Run: ``.venv/bin/python benchmarks/loader_bench.py [--mib 512] [--rounds 9]`` or
``nox -s bench_loader``. Numbers go to docs/development/benchmarks.md; the target is loader >= 90 %
of plain.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import logging
import os
import platform
import resource
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


def serve(mib: int, shards: int, link_mbps: float) -> None:
    files = generate_model(weights_bytes=(mib << 20) // shards, shards=shards)
    for data in files.values():
        digests(data)  # the Hub stores digests; never charge their computation to a client
    with HubStandIn() as hub:
        hub.repos[REPO] = Repo(files=files)
        if link_mbps:
            hub.throttle_bytes_per_second = link_mbps * 1e6
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512, help="total size of the weight shards")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--link-mbps", type=float, default=0, help="throttle each connection (MB/s)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.serve:
        serve(args.mib, args.shards, args.link_mbps)
        return

    files = generate_model(weights_bytes=(args.mib << 20) // args.shards, shards=args.shards)
    total = sum(len(b) for b in files.values())
    print(f"machine: {os.cpu_count()} CPUs (nproc), {cpu_model()}, Python {platform.python_version()}")
    print(
        f"repository: {len(files)} files, {total / 2**20:.0f} MiB, {args.parallel} parallel, "
        f"{args.rounds} rounds, "
        + (f"links throttled to {args.link_mbps:g} MB/s each" if args.link_mbps else "loopback unthrottled")
    )
    sample = files[max(files, key=lambda n: len(files[n]))]
    start = time.perf_counter()
    hashlib.sha256(sample).hexdigest()
    print(f"sha256 on one core of this CPU: {len(sample) / (time.perf_counter() - start) / 1e6:.0f} MB/s")
    cases = ("plain", "loader", "loader-size-only")
    results: dict[str, list[float]] = {name: [] for name in cases}
    client_cpu: dict[str, list[float]] = {name: [] for name in cases}
    server_cpu: dict[str, list[float]] = {name: [] for name in cases}
    serve_args = ["--mib", str(args.mib), "--shards", str(args.shards), "--link-mbps", str(args.link_mbps)]
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", *serve_args],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()  # printed once the digests are computed
        for _ in range(args.rounds):
            for name, rates in results.items():
                dest = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
                cpu0, server0 = own_cpu_seconds(), cpu_seconds(server.pid)
                start = time.perf_counter()
                if name == "plain":
                    plain_download(url, sorted(files), dest, args.parallel)
                else:
                    loader_download(url, dest, args.parallel, verify=name == "loader")
                rates.append(total / (time.perf_counter() - start) / 1e6)
                client_cpu[name].append((own_cpu_seconds() - cpu0) / total * 1e9)
                server_cpu[name].append((cpu_seconds(server.pid) - server0) / total * 1e9)
                shutil.rmtree(dest)
    finally:
        server.terminate()
        server.wait()
    for name, rates in results.items():
        each = ", ".join(f"{r:.0f}" for r in rates)
        print(
            f"{name}: median {statistics.median(rates):.0f} MB/s, range {min(rates):.0f}-{max(rates):.0f}; "
            f"CPU per byte: client {statistics.median(client_cpu[name]):.2f} ns, "
            f"server {statistics.median(server_cpu[name]):.2f} ns (rounds MB/s: {each})"
        )
    plain = statistics.median(results["plain"])
    for name in ("loader", "loader-size-only"):
        paired = [r / p for r, p in zip(results[name], results["plain"], strict=True)]
        print(
            f"{name} / plain: {statistics.median(results[name]) / plain:.0%} (target >= 90 %); "
            f"round by round: median {statistics.median(paired):.0%}, "
            f"range {min(paired):.0%}-{max(paired):.0%}"
        )


if __name__ == "__main__":
    main()
