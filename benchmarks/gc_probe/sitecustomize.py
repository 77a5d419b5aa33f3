"""Time the cyclic garbage collector of a process started with this directory on ``PYTHONPATH``
and ``LLMAZ_BENCH_GC_STATS`` naming a file: at exit, that file gets the collections and the CPU
seconds of the collecting thread per generation, as JSON. ``benchmarks/operator_bench.py
--gc-stats`` starts the operator this way (issue 15: garbage collection was 7.5 % of its CPU)."""

from __future__ import annotations

import atexit
import gc
import json
import os
import time

_PATH = os.environ.get("LLMAZ_BENCH_GC_STATS")

if _PATH:
    _totals: dict[int, list[float]] = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
    _started = [0.0]

    def _timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            _started[0] = time.thread_time()
            return
        entry = _totals[info["generation"]]
        entry[0] += 1
        entry[1] += time.thread_time() - _started[0]

    def _write() -> None:
        with open(_PATH, "w", encoding="utf-8") as out:
            stats = {str(g): {"collections": int(c), "cpu_s": round(s, 3)} for g, (c, s) in _totals.items()}
            json.dump({"generations": stats, "process_cpu_s": round(time.process_time(), 2)}, out)

    gc.callbacks.append(_timed)
    atexit.register(_write)
