"""Record the showcase runs in sample_runs/showcase/: for each method that runs on CPU with the demo
model, a baseline and a speculative run of the same prompts at concurrency 1, long enough to watch.

    PYTHONPATH=. .venv/bin/python scripts/record_showcase.py   # from the repository root (this checkout's specviz)
    .venv/bin/python scripts/record_showcase.py --dtype bfloat16 --out /tmp/showcase-bf16   # to see the ties

- ngram (k=3, lookup 2-4) on editing prompts: the answer copies most of the given code, so the
  drafter (which copies from the prompt) is right for long stretches;
- the shipped draft model and EAGLE-3 head (drafters/, k=3) on held-out everyday questions, the
  kind of text they were trained for.

The baseline of each prompt set is recorded with the same server settings and no speculation;
the Playground races each speculative run against it. The demo model runs in float32 (its default
dtype, demo_model.DEMO_MODEL_DTYPE), where every pair gives identical output; every run keeps the
target's top-5 logprobs per token (record's default), so a divergence in another dtype is explained by
`specviz compare`. Prints one line per run, with its comparison against the baseline.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from specviz.config import SpecConfig
from specviz.demo_model import DEMO_MODEL_DTYPE, ensure_demo_model
from specviz.divergence import compare_runs
from specviz.files import REPO_DIR
from specviz.metrics import summarize
from specviz.prompts import load_prompts
from specviz.runfile import SAMPLE_RUNS_DIR, save_run
from specviz.serving.local import LocalServer
from specviz.serving.recording import record
from specviz.train import drafter_spec

OUT = SAMPLE_RUNS_DIR / "showcase"
MAX_TOKENS = 320

RUNS = [  # (file stem, prompt set, speculative config or None for the baseline)
    ("baseline-edit-c1", "edit", None),
    ("ngram-k3-edit-c1", "edit", {"method": "ngram", "num_speculative_tokens": 3,
                                  "prompt_lookup_min": 2, "prompt_lookup_max": 4}),
    ("baseline-chat-c1", "chat", None),
    ("draft-k3-chat-c1", "chat", drafter_spec("draft_model", relative_to=REPO_DIR) | {"num_speculative_tokens": 3}),
    ("eagle3-k3-chat-c1", "chat", drafter_spec("eagle3", relative_to=REPO_DIR) | {"num_speculative_tokens": 3}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default=DEMO_MODEL_DTYPE, help="the target's dtype (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the run files (default: %(default)s)")
    parser.add_argument("--only", default="", help="comma-separated file stems to record (default: all)")
    args = parser.parse_args()
    model = str(ensure_demo_model().relative_to(REPO_DIR))
    args.out.mkdir(parents=True, exist_ok=True)
    baselines = {}
    for stem, prompt_set, spec in RUNS:
        if args.only and stem not in args.only.split(","):
            continue
        with LocalServer(model=model, spec=SpecConfig.from_dict(spec) if spec else None, dtype=args.dtype) as server:
            took = server.start()
            name, prompts = load_prompts(f"builtin:showcase-{prompt_set}")
            run = record(server, prompts, prompt_set=name, concurrency=1, max_tokens=MAX_TOKENS)
        path = save_run(run, args.out / f"{stem}.json.gz")
        s = summarize(run)
        line = {"file": path.name, "dtype": run.meta.dtype, "ready_after_s": round(took, 1), "complete": s.complete,
                "output_tokens": [len(r.output_token_ids) for r in run.requests],
                "output_tokens_per_s": round(s.output_tokens_per_s or 0, 1),
                "mean_acceptance_length": s.mean_acceptance_length, "counters_match": s.counters_match}
        if spec is None:
            baselines[prompt_set] = run
        elif prompt_set in baselines:
            line["against_baseline"] = [c.full() for c in compare_runs(baselines[prompt_set], run).requests]
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
