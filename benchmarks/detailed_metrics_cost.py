"""What `--per-request-spec-decode-metrics detailed` costs: output throughput with it against without it.

    .venv/bin/python benchmarks/detailed_metrics_cost.py [--rounds 4] [--concurrency 4]

Both arms are untraced servers as production runs them (the demo model, ngram k=3, stock
scheduler, async scheduling left to the platform: the CPU platform turns it off); one adds the flag.
They take turns (one engine at a time), `--rounds` times each in alternating order, several
measured runs per start; each round gives one ratio, and the printed interval is a bootstrap over
rounds of the ratio of the two arms' means (tracer_overhead.paired_ratio_interval).
"""

from __future__ import annotations

from tracer_overhead import SPEC, ab_setup, alternate_rounds, measured_runs, report

from specviz.config import SpecConfig
from specviz.demo_model import ensure_demo_model
from specviz.metrics import output_tokens_per_s
from specviz.serving.local import LocalServer

DETAILED = ["--per-request-spec-decode-metrics", "detailed"]


def measure(detailed: bool, prompts: list[str], args, tokenizer) -> list[float]:
    server = LocalServer(model=str(ensure_demo_model()), spec=SpecConfig.from_dict(SPEC), dtype="bfloat16",
                         trace=False, extra_args=DETAILED if detailed else [])
    runs = measured_runs(server, prompts, args, tokenizer)
    sent = [r.spec_decode_metrics is not None and r.spec_decode_metrics.per_step_accepted is not None
            for run in runs for r in run.requests]
    if any(sent) != detailed or (detailed and not all(sent)):
        raise SystemExit(f"the {'detailed' if detailed else 'plain'} server sent per-step arrays for "
                         f"{sum(sent)} of {len(sent)} requests")
    return [output_tokens_per_s(run) for run in runs]


def main() -> None:
    args, prompts, tokenizer = ab_setup(__doc__, rounds=4)
    rounds = alternate_rounds(("detailed", "plain"), args.rounds,
                              lambda name: measure(name == "detailed", prompts, args, tokenizer))
    report(rounds, {"detailed": "with detailed     ", "plain": "without the flag  "}, "untraced", args)

if __name__ == "__main__":
    main()
