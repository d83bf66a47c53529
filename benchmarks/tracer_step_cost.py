"""The tracer's own work per engine step in the scheduler's path, today's and the one it replaced, side by side.

    python benchmarks/tracer_step_cost.py [--repeats 200] [--markdown]

What a ROCm or CUDA user needs before turning the tracer on at high concurrency: how many microseconds
the tracer adds to each engine step before vLLM can schedule the next one, for 1 to 1024 requests in
the batch and k = 1 to 8, and what its writer thread costs beside it.

- "inline (before)": the tracer as it was until issue 44, kept here verbatim to compare with: it read
  each request's drafts and sampled tokens in a Python loop, built the lists, `json.dumps`ed the step
  and wrote the line, all inside `update_from_output`.
- "scheduler path (now)": `capture_before` and the lengths after plus the queue's `put`
  (specviz.serving.tracer), the only tracer work left in `update_from_output`.
- "writer CPU": the writer thread's own CPU time per step (`time.thread_time`), building and writing the
  line off the scheduler's path. It is not free: on a GPU server's host it runs on a core the engine
  does not use (while the GPU computes the next step), here it shares two cores with everything else.

The two are timed in the same run, in alternating blocks of steps, on the same synthetic batch (every request verified k
drafts and accepted k // 2, 200 output tokens so far); vLLM's own update is simulated (the outputs
grow) and not timed. The writer is let drain between steps, as it does during a GPU forward pass that
outlasts its per-step CPU (if it does not, it falls behind, and steps are dropped and counted). The share
is of a target step of 10 and 30 ms, the range of a decode step on an MI300X-class GPU at these batch
sizes: an assumption for scale, not a measurement. It is this CPU's time; a faster host CPU shows less.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import statistics
import tempfile
import time
from types import SimpleNamespace

from specviz.serving.tracer import TraceWriter, capture_before, encode_step, split_drafts

BATCH_SIZES = (1, 8, 32, 64, 128, 256, 512, 1024)
KS = (1, 2, 4, 8)
GPU_STEP_S = (0.010, 0.030)


class FakeRequest:
    """The parts of vLLM's Request either tracer reads."""

    def __init__(self, outputs: int) -> None:
        self._output_token_ids = list(range(outputs))
        self.num_stale_output_tokens = 0
        self.drop_stale_output = False

    @property
    def num_output_tokens(self) -> int:
        return len(self._output_token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        return self._output_token_ids

    def is_finished(self) -> bool:
        return False


def synthetic_step(batch: int, k: int, outputs_so_far: int = 200):
    """Requests, a scheduler output and a model runner output: each request verified k drafts, accepted k // 2."""
    requests, scheduled, spec, index, sampled = {}, {}, {}, {}, []
    for i in range(batch):
        rid = f"cmpl-{i:08x}-0-{i:08x}"
        drafts = [1000 + j for j in range(k)]
        requests[rid] = FakeRequest(outputs_so_far)
        scheduled[rid] = k + 1
        spec[rid] = drafts
        index[rid] = i
        sampled.append(drafts[: k // 2] + [7])
    scheduler_output = SimpleNamespace(num_scheduled_tokens=scheduled, scheduled_spec_decode_tokens=spec,
                                       num_invalid_spec_tokens=None)
    runner_output = SimpleNamespace(req_id_to_index=index, sampled_token_ids=sampled)
    return requests, scheduler_output, runner_output


def vllm_update(requests: dict, runner_output) -> None:
    """What vLLM's update does to what the tracers read: each request's output grows by its sampled tokens."""
    for rid, i in runner_output.req_id_to_index.items():
        requests[rid]._output_token_ids.extend(runner_output.sampled_token_ids[i])


def inline_before_update(requests, scheduler_output, model_runner_output) -> list[tuple]:
    """The tracer's read before vLLM's update until issue 44 (TracingScheduler._steps_before_update), verbatim."""
    sampled_all = model_runner_output.sampled_token_ids
    if sampled_all is None or len(sampled_all) == 0:
        return []
    spec_tokens = scheduler_output.scheduled_spec_decode_tokens
    invalid = getattr(scheduler_output, "num_invalid_spec_tokens", None) or {}
    index_of = model_runner_output.req_id_to_index
    pending = []
    for req_id in scheduler_output.num_scheduled_tokens:
        request = requests.get(req_id)
        index = index_of.get(req_id)
        if request is None or index is None or request.is_finished():
            continue
        if getattr(request, "num_stale_output_tokens", 0) > 0 and getattr(request, "drop_stale_output", False):
            continue
        sampled = sampled_all[index]
        if sampled is None or len(sampled) == 0:
            continue
        drafts, padded = split_drafts(list(spec_tokens.get(req_id, ())), invalid.get(req_id, 0))
        pending.append((req_id, request, request.num_output_tokens, drafts, [int(t) for t in sampled], padded))
    return pending


def inline_after_update(pending: list[tuple], step: int, trace_file) -> None:
    """The rest of it, after vLLM's update: the committed slice, one JSON line, written and flushed."""
    reqs = [[req_id, drafts, sampled, request.output_token_ids[before:], padded]
            for req_id, request, before, drafts, sampled, padded in pending]
    trace_file.write(json.dumps({"step": step, "t": time.time(), "reqs": reqs}, separators=(",", ":")) + "\n")


def measure(batch: int, k: int, repeats: int, folder: str, block: int = 25) -> dict:
    """Median µs per step of both tracers' work in the scheduler's path, and the writer's CPU per step.

    The two run in alternating blocks of `block` steps on the same batch, so both see the same load; within a
    block each runs alone (one tracer's garbage and cache misses do not land in the other's timing).
    """
    requests, sched, runner = synthetic_step(batch, k)
    inline_file = open(os.path.join(folder, f"inline-{batch}-{k}.jsonl"), "a", buffering=1, encoding="utf-8")
    writer = TraceWriter(os.path.join(folder, f"queued-{batch}-{k}.jsonl"), 1 << 40, 1 << 20, encode_step)
    inline_s, path_s = [], []
    gc.collect()
    for first in range(0, repeats, block):
        steps = range(first, min(first + block, repeats))
        for step in steps:
            start = time.perf_counter()
            pending = inline_before_update(requests, sched, runner)
            middle = time.perf_counter()
            vllm_update(requests, runner)
            resume = time.perf_counter()
            inline_after_update(pending, step, inline_file)
            inline_s.append(time.perf_counter() - resume + middle - start)
        for step in steps:
            start = time.perf_counter()
            captured = capture_before(requests, sched, runner)
            middle = time.perf_counter()
            vllm_update(requests, runner)
            resume = time.perf_counter()
            writer.put(step, (step, time.time(), captured, [*map(len, captured[1])], sched, runner))
            path_s.append(time.perf_counter() - resume + middle - start)
            while writer.num_written <= step:  # the writer drains during the (simulated) forward pass
                time.sleep(0.0002)
    writer.close()
    inline_file.close()
    return {"inline_s": statistics.median(inline_s), "path_s": statistics.median(path_s),
            "writer_cpu_s": writer.cpu_s / max(writer.num_written, 1), "dropped": writer.num_dropped}


def cpu_name() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    return cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES))
    p.add_argument("--ks", type=int, nargs="+", default=list(KS))
    p.add_argument("--markdown", action="store_true", help="print a Markdown table (for docs/)")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for batch in args.batch_sizes:
            for k in args.ks:
                rows.append((batch, k, measure(batch, k, args.repeats, folder)))
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"tracer work per engine step on {cpu_name()} ({os.cpu_count()} cores, load average {load}), median of "
          f"{args.repeats} steps each in alternating blocks; synthetic batches, k drafts each, k // 2 accepted")
    if args.markdown:
        print("\n| requests in the batch | k | inline (before), µs | scheduler path (now), µs | now / before "
              "| now, share of a 10 ms step | now, share of a 30 ms step | writer CPU, µs per step |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for batch, k, m in rows:
            print(f"| {batch} | {k} | {m['inline_s'] * 1e6:.0f} | {m['path_s'] * 1e6:.0f} | "
                  f"{m['path_s'] / m['inline_s']:.2f} | {m['path_s'] / GPU_STEP_S[0]:.2%} | "
                  f"{m['path_s'] / GPU_STEP_S[1]:.2%} | {m['writer_cpu_s'] * 1e6:.0f} |")
    else:
        print(f"{'batch':>6} {'k':>3} {'before us':>10} {'now us':>8} {'ratio':>6} {'of 10 ms':>9} {'of 30 ms':>9} "
              f"{'writer us':>10}")
        for batch, k, m in rows:
            print(f"{batch:>6} {k:>3} {m['inline_s'] * 1e6:>10.0f} {m['path_s'] * 1e6:>8.0f} "
                  f"{m['path_s'] / m['inline_s']:>6.2f} {m['path_s'] / GPU_STEP_S[0]:>9.2%} "
                  f"{m['path_s'] / GPU_STEP_S[1]:>9.2%} {m['writer_cpu_s'] * 1e6:>10.0f}")
    if any(m["dropped"] for _, _, m in rows):
        print("steps dropped by the writer: " + ", ".join(f"{b}x{k}: {m['dropped']}" for b, k, m in rows if m["dropped"]))


if __name__ == "__main__":
    main()
