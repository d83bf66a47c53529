"""How well vLLM's own per-step arrays rebuild the step view without the tracer, against the tracer's truth.

    .venv/bin/python benchmarks/untraced_alignment.py [--methods ngram draft_model eagle3] \\
        [--concurrency 1 4 16] [--num-requests 16] [--max-tokens 64]

One server per method runs BOTH the specviz tracer and `--per-request-spec-decode-metrics detailed`
(the demo model, k=3; the shipped drafters for draft_model and eagle3), so every request carries
the truth (the tracer's steps) and what a production server sends (vLLM's per-step arrays). For
each method and concurrency the table gives:

    requests, verify steps        how much was compared
    arrays = tracer               verify steps whose (drafted, accepted) from vLLM's arrays equal the
                                  tracer's, in order (must be all of them)
    exact steps                   verify steps untraced_steps places on the stream exactly (one tiling)
    exact requests                requests whose every step is placed exactly
    placed as traced              verify steps whose shown tokens are the ones the tracer saw (exact
                                  ones must be; approximate ones are a guess, this says how good)
    merged chunks                 stream chunks holding several steps (the client fell behind)
"""

from __future__ import annotations

import argparse

from specviz.config import SpecConfig, short_model_name
from specviz.demo_model import ensure_demo_model
from specviz.prompts import load_prompts
from specviz.serving.local import LocalServer
from specviz.serving.recording import load_tokenizer, record, warmup_prompts
from specviz.serving.server import local_device, vllm_version
from specviz.train import DRAFTER_SPECS
from specviz.untraced_steps import has_step_arrays, place_steps

K = 3
NGRAM = {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}
DETAILED = ["--per-request-spec-decode-metrics", "detailed"]


def spec_for(method: str) -> SpecConfig:
    return SpecConfig.from_dict((NGRAM if method == "ngram" else DRAFTER_SPECS[method]) | {"num_speculative_tokens": K})


def compare(run, method: str) -> dict:
    """The table's figures for one run recorded with both the tracer and the arrays."""
    row = dict(requests=0, verify_steps=0, arrays_equal=0, exact_steps=0, exact_requests=0, placed_as_traced=0,
               merged_chunks=0)
    for req in run.requests:
        m = req.spec_decode_metrics
        if not has_step_arrays(req):
            raise SystemExit(f"request {req.request_id} carries no per-step arrays: is the server 'detailed'?")
        truth = [s for s in req.steps if s.verified]
        arrays = list(zip(m.per_step_drafted or [], m.per_step_accepted or []))  # vLLM leaves out empty arrays
        if len(arrays) != len(truth):
            raise SystemExit(f"request {req.request_id}: {len(arrays)} verify steps in vLLM's arrays, {len(truth)} "
                             "traced")
        placed = place_steps(req, k=K, method=method)
        row["requests"] += 1
        row["verify_steps"] += len(truth)
        row["arrays_equal"] += sum(1 for s, (d, a) in zip(truth, arrays)
                                   if (s.num_drafts + s.num_padded_drafts, s.num_accepted) == (d, a))
        row["exact_steps"] += placed.num_exact_verify_steps
        row["exact_requests"] += placed.placement == "exact"
        row["merged_chunks"] += placed.num_merged_chunks
        shown = {s.verify_index: s.token_ids for s in placed.steps if s.verify_index is not None}
        row["placed_as_traced"] += sum(1 for i, s in enumerate(truth) if shown.get(i) == s.committed_token_ids)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--methods", nargs="+", default=["ngram", "draft_model", "eagle3"],
                    choices=["ngram", *DRAFTER_SPECS])
    ap.add_argument("--concurrency", nargs="+", type=int, default=[1, 4, 16])
    ap.add_argument("--num-requests", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompts", default="builtin:chat")
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args()

    target = str(ensure_demo_model())
    prompt_set, base = load_prompts(args.prompts)
    prompts = (base * args.num_requests)[: args.num_requests]
    tokenizer = load_tokenizer(target)
    rows = []
    for method in args.methods:
        with LocalServer(model=target, spec=spec_for(method), dtype=args.dtype, extra_args=DETAILED) as server:
            server.start()
            for c in args.concurrency:
                record(server, warmup_prompts(c), prompt_set="warm-up", concurrency=c, max_tokens=8,
                       tokenizer=tokenizer)
                run = record(server, prompts, prompt_set=prompt_set, concurrency=c, max_tokens=args.max_tokens,
                             tokenizer=tokenizer, warmup=False)
                rows.append((method, c, compare(run, method)))
                print(f"{method} c={c}: {rows[-1][2]}", flush=True)
    platform_name, device = local_device()
    print(f"\n{short_model_name(target)} {args.dtype}, k={K}, prompt set '{prompt_set}' cycled to {args.num_requests} "
          f"requests, {args.max_tokens} output tokens, tracer + --per-request-spec-decode-metrics detailed on one "
          f"server, {platform_name} ({device}), vLLM {vllm_version()}\n")
    header = ("method", "conc.", "requests", "verify steps", "arrays = tracer", "exact steps", "exact requests",
              "placed as traced", "merged chunks")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for method, c, r in rows:
        n = max(r["verify_steps"], 1)
        print(f"| {method} | {c} | {r['requests']} | {r['verify_steps']} | {r['arrays_equal']} | "
              f"{r['exact_steps']} ({r['exact_steps'] / n:.0%}) | {r['exact_requests']} | "
              f"{r['placed_as_traced']} ({r['placed_as_traced'] / n:.0%}) | {r['merged_chunks']} |")


if __name__ == "__main__":
    main()
