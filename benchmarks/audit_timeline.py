"""Analysis (not a test): each pass of an operator benchmark run, from its API server audit log.

``operator_bench.py --keep`` keeps the work directory, with one control plane per pass; this reads
their audit logs and, for every pass (an operator pass starts with the first Playground created in
``bench-op``, a bulk pass with the first child created in ``bench-bulk``), prints
when the creates of each child kind completed, counted from that first create, with the API
server's time per create, and the operator's requests in the pass's window by verb and resource.
Comparing a fast pair with a slow one of the same run shows where the time went (issue 15).

With ``--by-second``, each pass also second by second: the creates that ended, the ``IPAddress``
creates the cluster-IP allocator made (one at a time) and their mean time, and the requests in
flight (the *Twenty-eighth round* of the benchmark's history found the children gap that way).

Run: ``.venv/bin/python benchmarks/audit_timeline.py /tmp/llmaz-opbench-100-XXXX [--window 10]
[--by-second [--step 0.25]]``.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from operator_bench import BULK_NS, OP_NS, SA, SA_NS

OPERATOR = f"system:serviceaccount:{SA_NS}:{SA}"
CHILDREN = ("services.inference.llmaz.io", "leaderworkersets.leaderworkerset.x-k8s.io", "services -lb")


@dataclass(frozen=True)
class Request:
    start: float
    end: float
    verb: str
    kind: str
    """``resource.group`` (``services -lb`` for a ``-lb`` Service), ``/subresource`` appended."""
    namespace: str
    user: str
    code: int


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def read(logs_dir: Path) -> list[Request]:
    """Every completed request of the audit log(s) in ``logs_dir`` (one control plane's), oldest first."""
    out = []
    logs = sorted(logs_dir.glob("audit*.log"), key=lambda p: p.stat().st_mtime)
    for path in logs:
        with path.open() as lines:
            for line in lines:
                entry = json.loads(line)
                if entry.get("stage") != "ResponseComplete":
                    continue
                ref = entry.get("objectRef") or {}
                kind = ref.get("resource", "") + (f".{ref['apiGroup']}" if ref.get("apiGroup") else "")
                if kind == "services" and str(ref.get("name", "")).endswith("-lb"):
                    kind = "services -lb"
                if ref.get("subresource"):
                    kind += "/" + ref["subresource"]
                out.append(
                    Request(
                        _seconds(entry["requestReceivedTimestamp"]),
                        _seconds(entry["stageTimestamp"]),
                        entry["verb"],
                        kind,
                        ref.get("namespace", ""),
                        (entry.get("user") or {}).get("username", ""),
                        int((entry.get("responseStatus") or {}).get("code", 0)),
                    )
                )
    return sorted(out, key=lambda r: r.start)


def passes(requests: list[Request]) -> list[tuple[float, str]]:
    """``(first create, namespace)`` of every pass on one control plane, in time order (each pass
    has a control plane of its own, so at most one per namespace)."""
    found = []
    for namespace, first in ((OP_NS, ("playgrounds.inference.llmaz.io",)), (BULK_NS, CHILDREN)):
        start = next(
            (
                r.start
                for r in requests
                if r.namespace == namespace
                and r.verb == "create"
                and r.kind in first
                and r.code in (200, 201)
            ),
            None,
        )
        if start is not None:
            found.append((start, namespace))
    return sorted(found)


def report(requests: list[Request], t0: float, namespace: str, window: float) -> str:
    creates: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r in requests:
        ours = r.namespace == namespace and t0 <= r.start <= t0 + window
        if ours and r.verb == "create" and r.code in (200, 201) and "/" not in r.kind:
            creates[r.kind].append((r.end - t0, (r.end - r.start) * 1000))
    done = max((max(t for t, _ in creates[k]) for k in CHILDREN if creates[k]), default=0.0)
    lines = [
        f"{namespace} pass at {datetime.fromtimestamp(t0, UTC):%H:%M:%S}: every child after {done:.2f} s"
    ]
    for kind in (*CHILDREN, "playgrounds.inference.llmaz.io"):
        done_at = sorted(creates.get(kind, []))
        if not done_at:
            continue
        n = len(done_at)
        ms = sorted(m for _, m in done_at)
        lines.append(
            f"  {kind:43s} {n:4d}: first {done_at[0][0]:5.2f}  half {done_at[n // 2][0]:5.2f}  "
            f"last {done_at[-1][0]:5.2f} s; server ms p50 {ms[n // 2]:.0f}, p90 {ms[(9 * n) // 10 - 1]:.0f}"
        )
    ops = Counter(f"{r.verb} {r.kind}" for r in requests if r.user == OPERATOR and t0 <= r.start <= t0 + done)
    lines.append("  operator's requests until then: " + ", ".join(f"{k} {v}" for k, v in ops.most_common()))
    return "\n".join(lines)


IPADDRESSES = "ipaddresses.networking.k8s.io"


def by_second(requests: list[Request], t0: float, namespace: str, window: float, step: float = 1.0) -> str:
    """One line per ``step`` seconds of the pass: the child and Playground creates that ended in
    it, the ``IPAddress`` creates (the API server's cluster-IP allocator, one at a time) that
    started in it and their mean time, and how many requests of anyone were in flight on average
    (watches aside). A step under a second shows the 2-3 s window of N = 100."""
    kinds = (CHILDREN[2], CHILDREN[1], CHILDREN[0], "playgrounds.inference.llmaz.io")  # as the header
    ended: dict[int, Counter[str]] = defaultdict(Counter)
    addresses: dict[int, list[float]] = defaultdict(list)
    busy: dict[int, float] = defaultdict(float)
    steps = int(window / step)
    for r in requests:
        if r.verb == "watch" or r.end < t0 or r.start > t0 + window:
            continue
        if r.namespace == namespace and r.verb == "create" and r.code in (200, 201) and r.kind in kinds:
            ended[int((r.end - t0) / step)][r.kind] += 1
        if r.kind == IPADDRESSES and r.verb == "create" and r.start >= t0:
            addresses[int((r.start - t0) / step)].append(r.end - r.start)
        for i in range(max(0, int((r.start - t0) / step)), min(steps, int((r.end - t0) / step) + 1)):
            begin = t0 + i * step
            busy[i] += max(0.0, min(r.end, begin + step) - max(r.start, begin)) / step
    last = max((sec for sec, c in ended.items() if any(c[k] for k in CHILDREN)), default=0)
    header = "-lb / LWS / inference Service / Playground creates ended; IPAddress creates; in flight"
    lines = [f"{namespace} pass, by {step:g} s: {header}"]
    for i in range(last + 1):
        c, ips = ended[i], addresses[i]
        mean = 1000 * sum(ips) / len(ips) if ips else 0.0
        counts = " / ".join(f"{c[k]:3d}" for k in kinds)
        lines.append(f"  {i * step:5.1f}  {counts};  {len(ips):3d}, {mean:5.1f} ms;  {busy[i]:5.1f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workdir", type=Path, help="a work directory operator_bench.py --keep kept")
    parser.add_argument(
        "--window", type=float, default=60.0, help="seconds after a pass's first create to look at"
    )
    parser.add_argument(
        "--by-second",
        action="store_true",
        help="also print each pass second by second: creates, cluster-IP allocations, requests in flight",
    )
    parser.add_argument(
        "--step", type=float, default=1.0, help="with --by-second: the length of one line, seconds"
    )
    args = parser.parse_args()
    for logs_dir in sorted(args.workdir.glob("**/cp/logs"), key=lambda p: p.stat().st_mtime):
        requests = read(logs_dir)
        for t0, namespace in passes(requests):
            print(report(requests, t0, namespace, args.window))
            if args.by_second:
                print(by_second(requests, t0, namespace, args.window, args.step))


if __name__ == "__main__":
    main()
