"""The tracer's own work per engine step, against batch size and k, as a share of a GPU step.

    python benchmarks/tracer_step_cost.py [--repeats 200] [--markdown]

What a ROCm or CUDA user needs before turning the tracer on at high concurrency: how many
microseconds the tracer adds to each engine step (reading the drafts and sampled tokens before
vLLM updates, then writing one JSON line), for 1 to 256 requests in the batch and k = 1 to 8.
The scheduler outputs are synthetic (every request verified k drafts and accepted about half), so
no engine runs; vLLM's own `update_from_output` is not included, only what the tracer adds to it.
The share is of a target step of 10 and 30 ms, the range of a decode step on an MI300X-class GPU
at these batch sizes; it is this CPU's time, so a faster host CPU shows less.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import tempfile
import time
from types import SimpleNamespace

from specviz.serving.tracer import TracingScheduler

BATCH_SIZES = (1, 8, 32, 64, 128, 256)
KS = (1, 2, 4, 8)
GPU_STEP_S = (0.010, 0.030)


def synthetic_step(batch: int, k: int, outputs_so_far: int = 200):
    """A scheduler output and model runner output in which each request verified k drafts and accepted k // 2."""
    requests, scheduled, spec, index, sampled = {}, {}, {}, {}, []
    for i in range(batch):
        rid = f"cmpl-{i:08x}-0-{i:08x}"
        drafts = [1000 + j for j in range(k)]
        accepted = k // 2
        out = list(range(outputs_so_far))
        requests[rid] = SimpleNamespace(num_output_tokens=len(out), output_token_ids=out, is_finished=lambda: False,
                                        num_stale_output_tokens=0, drop_stale_output=False)
        scheduled[rid] = k + 1
        spec[rid] = drafts
        index[rid] = i
        sampled.append(drafts[:accepted] + [7])
    scheduler_output = SimpleNamespace(num_scheduled_tokens=scheduled, scheduled_spec_decode_tokens=spec,
                                       num_invalid_spec_tokens=None)
    runner_output = SimpleNamespace(req_id_to_index=index, sampled_token_ids=sampled)
    return requests, scheduler_output, runner_output


def tracer_for(requests: dict, path: str) -> TracingScheduler:
    tracer = object.__new__(TracingScheduler)  # the bookkeeping only: no engine behind it
    tracer.requests = requests
    tracer._trace_path, tracer._max_bytes, tracer._written, tracer._engine_step = path, 1 << 40, 0, 0
    tracer._trace_file = open(path, "a", buffering=1, encoding="utf-8")
    return tracer


def per_step_s(batch: int, k: int, repeats: int, folder: str) -> float:
    """Median seconds of the tracer's work for one engine step (read before the update, then write)."""
    requests, sched, runner = synthetic_step(batch, k)
    tracer = tracer_for(requests, os.path.join(folder, f"trace-{batch}-{k}.jsonl"))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        pending = tracer._steps_before_update(sched, runner)
        # What update_from_output does after vLLM's own update: the committed slice, one JSON line.
        reqs = [[rid, d, s, req.output_token_ids[before:], p] for rid, req, before, d, s, p in pending]
        tracer._write(json.dumps({"step": 0, "t": time.time(), "reqs": reqs}, separators=(",", ":")))
        times.append(time.perf_counter() - start)
    tracer._trace_file.close()
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--markdown", action="store_true", help="print a Markdown table (for docs/)")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for batch in BATCH_SIZES:
            for k in KS:
                rows.append((batch, k, per_step_s(batch, k, args.repeats, folder)))
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    print(f"tracer work per engine step on {cpu} (median of {args.repeats}); synthetic batches, k drafts each")
    if args.markdown:
        print("\n| requests in the batch | k | µs per step | share of a 10 ms step | share of a 30 ms step |")
        print("|---:|---:|---:|---:|---:|")
        for batch, k, t in rows:
            print(f"| {batch} | {k} | {t * 1e6:.0f} | {t / GPU_STEP_S[0]:.2%} | {t / GPU_STEP_S[1]:.2%} |")
    else:
        print(f"{'batch':>6} {'k':>3} {'us/step':>9} {'of 10 ms':>9} {'of 30 ms':>9}")
        for batch, k, t in rows:
            print(f"{batch:>6} {k:>3} {t * 1e6:>9.0f} {t / GPU_STEP_S[0]:>9.2%} {t / GPU_STEP_S[1]:>9.2%}")


if __name__ == "__main__":
    main()
