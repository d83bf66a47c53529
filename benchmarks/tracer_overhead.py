"""Output throughput with the specviz tracer against vLLM's stock scheduler, measured side by side.

    .venv/bin/python benchmarks/tracer_overhead.py [--rounds 3] [--concurrency 4]

Same engine config for both (the demo model, ngram k=3, --no-async-scheduling, eager); the two
servers take turns (one engine at a time: two cores do not run two well), `--rounds` times each,
several measured runs per start, so drift on a noisy machine hits both alike. Prints the mean
throughput of each and their ratio (target: tracer / stock >= 0.97).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specviz.config import SpecConfig  # noqa: E402
from specviz.demo_model import ensure_demo_model  # noqa: E402
from specviz.engine import LocalServer, local_device, record, vllm_version  # noqa: E402
from specviz.metrics import output_tokens_per_s  # noqa: E402
from specviz.prompts import load_prompts  # noqa: E402

SPEC = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}


def measure(trace: bool, prompts: list[str], args, tokenizer) -> list[float]:
    # The stock server gets --no-async-scheduling by hand; the traced one adds it itself.
    server = LocalServer(model=str(ensure_demo_model()), spec=SpecConfig.from_dict(SPEC), dtype="bfloat16",
                         trace=trace, extra_args=[] if trace else ["--no-async-scheduling"])
    with server:
        server.start()
        record(server, prompts[: args.concurrency], prompt_set="code", concurrency=args.concurrency,
               max_tokens=8, tokenizer=tokenizer)  # warm-up at this batch size
        return [output_tokens_per_s(record(server, prompts, prompt_set="code", concurrency=args.concurrency,
                                           max_tokens=args.max_tokens, tokenizer=tokenizer, warmup=False))
                for _ in range(args.runs_per_start)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runs-per-start", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--num-requests", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=64)
    args = p.parse_args()

    from specviz.engine import load_tokenizer

    _, base = load_prompts("builtin:code")
    prompts = (base * args.num_requests)[: args.num_requests]
    tokenizer = load_tokenizer(str(ensure_demo_model()))
    results: dict[str, list[float]] = {"tracer": [], "stock": []}
    for i in range(args.rounds):
        for name in ("tracer", "stock") if i % 2 == 0 else ("stock", "tracer"):
            tputs = measure(name == "tracer", prompts, args, tokenizer)
            results[name] += tputs
            print(f"round {i + 1} {name:<6}: " + ", ".join(f"{t:.1f}" for t in tputs) + " tokens/s", flush=True)
    platform_name, device = local_device()
    traced, stock = statistics.mean(results["tracer"]), statistics.mean(results["stock"])
    print(f"\nSmolLM2-135M bf16, ngram k=3 (lookup 2-4), prompt set 'code' cycled to {args.num_requests} requests, "
          f"{args.max_tokens} output tokens, concurrency {args.concurrency}, async scheduling off, "
          f"{platform_name} ({device}), vLLM {vllm_version()}")
    print(f"stock scheduler: {stock:.1f} tokens/s (sd {statistics.stdev(results['stock']):.1f}, "
          f"n={len(results['stock'])})")
    print(f"specviz tracer:  {traced:.1f} tokens/s (sd {statistics.stdev(results['tracer']):.1f}, "
          f"n={len(results['tracer'])})")
    print(f"ratio tracer / stock: {traced / stock:.3f}  (target >= 0.97)")


if __name__ == "__main__":
    main()
