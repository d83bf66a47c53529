"""Why the first measured run after an engine start is slower than the next: vLLM's prefix cache.

    .venv/bin/python benchmarks/prefix_cache.py [--prompts builtin:code] [--concurrency 4] [--runs-per-start 3]
        [--rounds 2]

A built-in prompt set is cycled to --num-requests (builtin:code has 4 distinct prompts in 16), so a
run's later requests, and every request of the runs after it on the same engine, find their prompt in
vLLM's prefix cache (on by default) and skip its prefill. The script starts the demo model without a
speculative config, untraced, with prefix caching on and off in alternating rounds (on off, off on),
warms each engine up with prompts of no set (as `specviz sweep` does) and prints the output tokens/s
of each measured run in order. With the cache on the runs climb after the first; with it off they are
flat, and lower.
"""

from __future__ import annotations

from tracer_overhead import ab_setup, alternate_rounds, measured_runs

from specviz.demo_model import ensure_demo_model
from specviz.metrics import output_tokens_per_s
from specviz.serving.local import LocalServer

ARMS = {"cache on": [], "cache off": ["--no-enable-prefix-caching"]}


def main() -> None:
    args, prompts, tokenizer = ab_setup(__doc__, rounds=2)
    print(f"{args.prompt_set}: {len(set(prompts))} distinct prompts in {len(prompts)} requests, concurrency "
          f"{args.concurrency}, {args.max_tokens} output tokens; output tokens/s per run, in order")

    def measure(arm: str) -> list[float]:
        server = LocalServer(model=str(ensure_demo_model()), spec=None, trace=False, extra_args=ARMS[arm])
        return [output_tokens_per_s(run) for run in measured_runs(server, prompts, args, tokenizer)]

    alternate_rounds(tuple(ARMS), args.rounds, measure)


if __name__ == "__main__":
    main()
