"""What recording the target's top-N logprobs per token costs (none, top 2, top 5), side by side on one server.

    PYTHONPATH=. .venv/bin/python benchmarks/logprobs_cost.py [--rounds 6] [--concurrency 4] [--dtype float32]

`record` asks vLLM for the top 5 logprobs of every output token by default (so `specviz compare`
can tell a tie from a bug, three-way ties included); it asked for the top 2 before; `--logprobs 0`
turns it off. Logprobs are per request, so one server (the demo model, ngram k=3, the tracer) serves
every arm: each round records the same prompts without, with the top 2 and with the top 5, in
alternating order (a b c, c b a, ...), so drift on a noisy machine hits them alike. Printed: output
tokens/s and the engine's time per step (from the tracer) per arm, and the ratios top-2 / none,
top-5 / none and top-5 / top-2 as bootstrap intervals over rounds (benchmarks/tracer_overhead.py's).
"""

from __future__ import annotations

import argparse

from tracer_overhead import SPEC, alternate_rounds, paired_ratio_interval, print_arms

from specviz.config import DEFAULT_LOGPROBS, SpecConfig
from specviz.demo_model import DEMO_MODEL_DTYPE, ensure_demo_model
from specviz.metrics import output_tokens_per_s, step_figures
from specviz.prompts import load_prompts
from specviz.serving.local import LocalServer
from specviz.serving.recording import load_tokenizer, record, warmup_prompts
from specviz.serving.server import local_device, vllm_version

ARMS = {"none": 0, "top2": 2, "top5": 5}  # top-n logprobs per output token (the default is DEFAULT_LOGPROBS)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--num-requests", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--dtype", default=DEMO_MODEL_DTYPE)
    args = p.parse_args()

    _, base = load_prompts("builtin:code")
    prompts = (base * args.num_requests)[: args.num_requests]
    model = str(ensure_demo_model())
    tokenizer = load_tokenizer(model)
    step_s: dict[str, list[list[float]]] = {name: [] for name in ARMS}  # ms per engine step, per round
    with LocalServer(model=model, spec=SpecConfig.from_dict(SPEC), dtype=args.dtype) as server:
        server.start()
        record(server, warmup_prompts(args.concurrency), prompt_set="warm-up", concurrency=args.concurrency,
               max_tokens=8, tokenizer=tokenizer)

        def measure(name: str) -> list[float]:
            run = record(server, prompts, prompt_set="code", concurrency=args.concurrency, max_tokens=args.max_tokens,
                         logprobs=ARMS[name], tokenizer=tokenizer, warmup=False)
            step_s[name].append([1000 * step_figures(run).engine_step_time_s])
            return [output_tokens_per_s(run)]

        tput = alternate_rounds(tuple(ARMS), args.rounds, measure)
    platform_name, device = local_device()
    print(f"\nSmolLM2-135M {args.dtype}, ngram k=3 (lookup 2-4), traced, prompt set 'code' cycled to "
          f"{args.num_requests} requests, {args.max_tokens} output tokens, concurrency {args.concurrency}, "
          f"{platform_name} ({device}), vLLM {vllm_version()}")
    labels = {name: f"{name:<4} logprobs" for name in ARMS}
    print_arms(tput, labels)
    print_arms(step_s, labels, unit="ms per engine step")
    print(f"(record's default: top {DEFAULT_LOGPROBS})")
    for top, under in (("top2", "none"), ("top5", "none"), ("top5", "top2")):
        ratio, low, high = paired_ratio_interval(tput[top], tput[under])
        print(f"throughput {top} / {under}: {ratio:.3f}, 90% interval {low:.3f}-{high:.3f} over {args.rounds} rounds")
        ratio, low, high = paired_ratio_interval(step_s[top], step_s[under])
        print(f"time per engine step {top} / {under}: {ratio:.3f}, 90% interval {low:.3f}-{high:.3f}")


if __name__ == "__main__":
    main()
