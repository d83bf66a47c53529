"""Output throughput with the specviz tracer against vLLM's stock scheduler, measured side by side.

    .venv/bin/python benchmarks/tracer_overhead.py [--rounds 6] [--concurrency 4]

Same engine config for both (the demo model, ngram k=3, --no-async-scheduling, eager); the two
servers take turns (one engine at a time: two cores do not run two well), `--rounds` times each
in alternating order, several measured runs per start, so drift on a noisy machine hits both
alike. Each round gives one ratio (tracer mean / stock mean of that round); the printed interval
is a bootstrap over rounds of the ratio of the two arms' means (target: its lower end >= 0.97).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import numpy as np

from specviz.config import SpecConfig
from specviz.demo_model import ensure_demo_model
from specviz.metrics import output_tokens_per_s
from specviz.prompts import PromptSetError, load_prompts
from specviz.runfile import Run
from specviz.serving.local import LocalServer
from specviz.serving.recording import load_tokenizer, record, warmup_prompts
from specviz.serving.server import local_device, vllm_version

SPEC = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}


def paired_ratio_interval(traced: list[list[float]], stock: list[list[float]], level: float = 0.9,
                          resamples: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """(ratio, low, high): mean traced / mean stock, and a bootstrap interval resampling whole rounds.

    Round r holds traced[r] and stock[r] (runs of one server start each). Resampling rounds, not
    runs, keeps each round's pairing, so drift between rounds widens the interval instead of
    biasing it. Example: rounds ([97, 99], [100, 100]) and ([94, 96], [100, 98]) -> ratio
    (98 + 95) / (100 + 99) = 0.970, interval 0.960-0.980 (the ends are each round alone).
    """
    t = np.array([statistics.mean(r) for r in traced])
    s = np.array([statistics.mean(r) for r in stock])
    picks = np.random.default_rng(seed).integers(0, len(t), size=(resamples, len(t)))
    ratios = t[picks].sum(axis=1) / s[picks].sum(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return float(t.sum() / s.sum()), float(low), float(high)


def alternate_rounds(names: tuple[str, ...], rounds: int, measure: Callable[[str], list[float]],
                     unit: str = "tokens/s") -> dict[str, list[list[float]]]:
    """Measure the arms `rounds` times each, in alternating order (a b, b a, a b, ...; with three arms
    a b c, c b a, ...), printing each result.

    Linear drift on a noisy machine then hits every arm alike; the result feeds paired_ratio_interval.
    """
    out: dict[str, list[list[float]]] = {name: [] for name in names}
    for i in range(rounds):
        for name in names if i % 2 == 0 else names[::-1]:
            out[name].append(measure(name))
            print(f"round {i + 1} {name:<8}: " + ", ".join(f"{v:.1f}" for v in out[name][-1]) + f" {unit}", flush=True)
    return out


def print_arms(rounds: dict[str, list[list[float]]], labels: dict[str, str], unit: str = "tokens/s") -> None:
    for name, label in labels.items():
        values = [v for r in rounds[name] for v in r]
        sd = f"sd {statistics.stdev(values):.1f}, " if len(values) > 1 else ""  # one round of one run has none
        print(f"{label}: {statistics.mean(values):.1f} {unit} ({sd}n={len(values)})")


def report(rounds: dict[str, list[list[float]]], labels: dict[str, str], setting: str, args, note: str = "", *,
           target: str = "SmolLM2-135M bf16", drafting: str = "ngram k=3 (lookup 2-4)",
           ratios: list[tuple[str, str]] | None = None) -> None:
    """Provenance, each arm's mean, and the ratio first arm / second arm of `labels` with its interval
    (or each (numerator, denominator) pair of arms in `ratios`).

    `setting` says what differs from the common set-up, e.g. "async scheduling off"; `target` is the
    model and its dtype, `drafting` the speculative config(s) the arms run."""
    platform_name, device = local_device()
    print(f"\n{target}, {drafting}, {setting}, prompt set '{args.prompt_set}' cycled to {args.num_requests} "
          f"requests, {args.max_tokens} output tokens, concurrency {args.concurrency}, "
          f"{platform_name} ({device}), vLLM {vllm_version()}")
    print_arms(rounds, labels)
    for first, second in ratios or [tuple(labels)[:2]]:
        ratio, low, high = paired_ratio_interval(rounds[first], rounds[second])
        print(f"ratio {first} / {second}: {ratio:.3f}, 90% interval {low:.3f}-{high:.3f} over {args.rounds} rounds"
              f"{note}")


def measured_runs(server: LocalServer, prompts: list[str], args, tokenizer) -> list[Run]:
    """Start `server`, warm it up at the batch size (not with the measured prompts), record args.runs_per_start runs."""
    with server:
        server.start()
        record(server, warmup_prompts(args.concurrency), prompt_set="warm-up", concurrency=args.concurrency,
               max_tokens=8, tokenizer=tokenizer)
        return [record(server, prompts, prompt_set=args.prompt_set, concurrency=args.concurrency, max_tokens=args.max_tokens,
                       tokenizer=tokenizer, warmup=False) for _ in range(args.runs_per_start)]


def ab_setup(doc: str, rounds: int, add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
             argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str], object]:
    """The command line of a two-server benchmark, its prompts (--prompts, builtin:code unless asked, cycled to
    --num-requests) and the target's tokenizer.

    `add_arguments` adds the benchmark's own options; if it adds `--model`, the tokenizer is that
    model's (else the demo model's)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--runs-per-start", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--num-requests", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--prompts", default="builtin:code", help="a built-in prompt set (builtin:code, builtin:chat, ...)")
    if add_arguments is not None:
        add_arguments(p)
    args = p.parse_args(argv)
    try:
        args.prompt_set, base = load_prompts(args.prompts)
    except PromptSetError as e:
        p.error(str(e))
    model = getattr(args, "model", None) or str(ensure_demo_model())
    return args, (base * args.num_requests)[: args.num_requests], load_tokenizer(model)


def measure(trace: bool, prompts: list[str], args, tokenizer) -> list[float]:
    # The stock server gets --no-async-scheduling by hand; the traced one adds it itself.
    server = LocalServer(model=str(ensure_demo_model()), spec=SpecConfig.from_dict(SPEC), dtype="bfloat16",
                         trace=trace, extra_args=[] if trace else ["--no-async-scheduling"])
    return [output_tokens_per_s(run) for run in measured_runs(server, prompts, args, tokenizer)]


def main() -> None:
    args, prompts, tokenizer = ab_setup(__doc__, rounds=6)
    rounds = alternate_rounds(("tracer", "stock"), args.rounds,
                              lambda name: measure(name == "tracer", prompts, args, tokenizer))
    report(rounds, {"tracer": "specviz tracer ", "stock": "stock scheduler"}, "async scheduling off", args,
           note=" (target: lower end >= 0.97)")

if __name__ == "__main__":
    main()
