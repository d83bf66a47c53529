"""Why the first measured run after an engine start is slower than the next: vLLM's prefix cache.

    .venv/bin/python benchmarks/prefix_cache.py [--prompts builtin:code] [--concurrency 4] [--runs-per-start 3]

A built-in prompt set is cycled to 16 requests (builtin:code has 4 distinct prompts), so a run's later
requests, and every request of the runs after it on the same engine, find their prompt in vLLM's
prefix cache (on by default) and skip its prefill. The script starts the demo model without a
speculative config, untraced, four times (prefix caching on, off, off, on: each arm's drift cancels
over the pair), warms each up with prompts of no set (as `specviz sweep` does) and prints the output
tokens/s of each measured run. With the cache on the runs climb after the first; with it off they are
flat, and lower.
"""

from __future__ import annotations

import argparse

from specviz.demo_model import ensure_demo_model
from specviz.metrics import output_tokens_per_s
from specviz.prompts import load_prompts
from specviz.serving.local import LocalServer
from specviz.serving.recording import load_tokenizer, record, warmup_prompts

ARMS = {"cache on": [], "cache off": ["--no-enable-prefix-caching"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", default="builtin:code")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--num-requests", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--runs-per-start", type=int, default=3)
    args = p.parse_args()
    model = str(ensure_demo_model())
    prompt_set, base = load_prompts(args.prompts)
    prompts = [base[i % len(base)] for i in range(args.num_requests)]
    print(f"{prompt_set}: {len(set(prompts))} distinct prompts in {len(prompts)} requests, concurrency "
          f"{args.concurrency}, {args.max_tokens} output tokens; output tokens/s per run, in order")
    tokenizer = load_tokenizer(model)
    for arm in ["cache on", "cache off", "cache off", "cache on"]:
        with LocalServer(model=model, spec=None, trace=False, extra_args=ARMS[arm]) as server:
            server.start()
            record(server, warmup_prompts(args.concurrency), prompt_set="warm-up", concurrency=args.concurrency,
                   max_tokens=8, tokenizer=tokenizer)
            rates = [output_tokens_per_s(record(server, prompts, prompt_set=prompt_set, concurrency=args.concurrency,
                                                max_tokens=args.max_tokens, tokenizer=tokenizer, warmup=False))
                     for _ in range(args.runs_per_start)]
        print(f"{arm:<10} " + " ".join(f"{r:.1f}" for r in rates), flush=True)


if __name__ == "__main__":
    main()
