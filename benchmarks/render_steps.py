"""Can the step view keep up with the engine? Prints ratios measured side by side in one run.

    .venv/bin/python benchmarks/render_steps.py [--model DIR] [--steps 2000]

1. Records a real run (SmolLM2 demo model, ngram k=3, concurrency 1, builtin:repetitive) and takes
   the engine's own time per step: the median gap between consecutive steps of one request.
2. Builds a run of --steps steps by cycling the recorded steps, and times
   a. rendering the whole step view (render.steps_html over every step), once;
   b. one live redraw after a step arrives at that length: join the new tracer record, rebuild the
      Run, summarise it, render the output and the last 40 steps (what the playground does per
      update, minus Streamlit's own delta to the browser, which is not measured here).
3. Builds a run of 64 requests of 512 tokens each from the recorded steps (the scale of a
   concurrency-64 recording) and times
   c. opening it: reading the gzip run file, validating it, summarising it, and rendering one
      request's output and first 60 step rows (what the Playground does when a run is chosen);
   d. one live redraw after one more step: rebuild the 64-request Run from the streams and steps,
      summarise it, render one request's output and its last 40 steps.
   These are ratios to the engine's time per step at concurrency 1, a stricter bar than at
   concurrency 64, where a step takes longer.
Ratios below 1 mean the view keeps up with the engine.
"""

from __future__ import annotations

import argparse
import statistics
import time

from specviz.config import SpecConfig
from specviz.demo_model import ensure_demo_model
from specviz.metrics import summarize
from specviz.prompts import load_prompts
from specviz.runfile import load_run, run_bytes
from specviz.serving.local import LocalServer
from specviz.serving.recording import build_run, load_tokenizer, record, token_decoder
from specviz.serving.stream import StreamResult
from specviz.serving.trace_reader import steps_by_request
from specviz.view import render

BIG_REQUESTS, BIG_TOKENS = 64, 512


def best_of(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args()
    model = args.model or str(ensure_demo_model())
    spec = SpecConfig.from_dict({"method": "ngram", "num_speculative_tokens": 3,
                                 "prompt_lookup_min": 2, "prompt_lookup_max": 4})
    _, prompts = load_prompts("builtin:repetitive")
    tokenizer = load_tokenizer(model)
    with LocalServer(model=model, spec=spec, dtype="bfloat16") as server:
        server.start()
        run = record(server, prompts[:3], prompt_set="repetitive", concurrency=1, max_tokens=256, tokenizer=tokenizer)
    recorded = [s for r in run.requests for s in r.steps]
    gaps = [b.time_s - a.time_s for r in run.requests for a, b in zip(r.steps, r.steps[1:])]
    engine_step_s = statistics.median(gaps)

    # A long request made of the recorded steps, as tracer records, so the live path parses them for real.
    records, output = [], []
    for i in range(args.steps):
        s = recorded[i % len(recorded)]
        records.append({"step": i + 1, "t": float(i), "reqs": [["cmpl-bench-0-0-00000000", s.draft_token_ids,
                                                                 s.sampled_token_ids, s.committed_token_ids]]})
        output += s.committed_token_ids
    decode = token_decoder(tokenizer)
    steps = steps_by_request(records, ["bench-0"], decode)["bench-0"]
    result = StreamResult(request_id="bench-0", prompt="p", start_time_s=0.0, token_ids=output,
                          first_token_time_s=0.1, end_time_s=float(args.steps), finish_reason="length")

    full_view_s = best_of(lambda: render.steps_html(steps))

    def live_redraw() -> None:
        new = steps_by_request(records[-1:], ["bench-0"], decode)["bench-0"]
        live = build_run(server, [result], {"bench-0": steps[:-1] + new}, run_id="bench", prompt_set="bench",
                         concurrency=1, max_tokens=len(output), sampling={})
        summarize(live)
        render.output_html(live.requests[0])
        render.steps_html(live.requests[0].steps[-40:])

    redraw_s = best_of(live_redraw)

    # 64 requests of 512 tokens, as if recorded at concurrency 64.
    big_steps, big_results, j = {}, [], 0
    for r in range(BIG_REQUESTS):
        rid, req_steps, out = f"big-{r}", [], []
        while len(out) < BIG_TOKENS:
            s = recorded[j % len(recorded)]
            j += 1
            take = s.committed_token_ids[: BIG_TOKENS - len(out)]
            req_steps.append(s.model_copy(update={"engine_step": len(req_steps) + 1, "committed_token_ids": take}))
            out += take
        big_steps[rid] = req_steps
        big_results.append(StreamResult(request_id=rid, prompt="p", start_time_s=0.0, token_ids=out,
                                        first_token_time_s=0.1, end_time_s=10.0, finish_reason="length"))
    big = build_run(server, big_results, big_steps, run_id="big", prompt_set="bench", concurrency=BIG_REQUESTS,
                    max_tokens=BIG_TOKENS, sampling={})
    data = run_bytes(big)

    def open_big() -> None:
        opened = load_run(data)
        summarize(opened)
        render.output_html(opened.requests[0])
        render.steps_html(opened.requests[0].steps[:60])

    def redraw_big() -> None:
        live = build_run(server, big_results, big_steps, run_id="big", prompt_set="bench",
                         concurrency=BIG_REQUESTS, max_tokens=BIG_TOKENS, sampling={})
        summarize(live)
        render.output_html(live.requests[0])
        render.steps_html(live.requests[0].steps[-40:])

    open_big_s, redraw_big_s = best_of(open_big, 3), best_of(redraw_big, 3)
    print(f"engine time per step (SmolLM2, ngram k=3, concurrency 1, {run.meta.device_name}, "
          f"vLLM {run.meta.vllm_version}): {engine_step_s * 1e3:.1f} ms over {len(gaps)} steps")
    print(f"render the whole step view of {args.steps} steps: {full_view_s * 1e3:.1f} ms "
          f"(ratio to one engine step: {full_view_s / engine_step_s:.2f})")
    print(f"live redraw per appended step at {args.steps} steps: {redraw_s * 1e3:.1f} ms "
          f"(ratio to one engine step: {redraw_s / engine_step_s:.2f}; below 1 keeps up)")
    n_steps = sum(len(v) for v in big_steps.values())
    print(f"open a run of {BIG_REQUESTS} requests x {BIG_TOKENS} tokens ({n_steps} request-steps, "
          f"{len(data) / 1e6:.1f} MB gzip): {open_big_s * 1e3:.0f} ms (ratio to one engine step: "
          f"{open_big_s / engine_step_s:.1f})")
    print(f"live redraw of that run after one more step: {redraw_big_s * 1e3:.0f} ms "
          f"(ratio to one engine step: {redraw_big_s / engine_step_s:.1f})")


if __name__ == "__main__":
    main()
