"""Record the sample runs in sample_runs/ with the SmolLM2 demo model on this machine.

    .venv/bin/python scripts/record_samples.py

One server per speculative config, reused across concurrencies, warm-up before each run.
Prints one line per run (the figures quoted in issue notes come from here).
"""

import json
from pathlib import Path

from specviz.config import SpecConfig
from specviz.demo_model import ensure_demo_model
from specviz.metrics import summarize
from specviz.prompts import load_prompts
from specviz.runfile import SAMPLE_RUNS_DIR, run_json_schema, save_run
from specviz.serving.local import LocalServer
from specviz.serving.recording import record

CONFIGS = {
    "baseline": None,
    "ngram-k3": SpecConfig.from_dict({"method": "ngram", "num_speculative_tokens": 3,
                                      "prompt_lookup_min": 2, "prompt_lookup_max": 4}),
}
PROMPT_SETS = ["code", "chat"]
CONCURRENCIES = [1, 4]
MAX_TOKENS = 128


def main() -> None:
    model = str(ensure_demo_model().relative_to(Path.cwd()))
    (SAMPLE_RUNS_DIR / "run.schema.json").write_text(json.dumps(run_json_schema(), indent=2) + "\n")
    for name, spec in CONFIGS.items():
        with LocalServer(model=model, spec=spec, dtype="bfloat16") as server:
            took = server.start()
            print(f"{name}: vLLM ready after {took:.1f} s", flush=True)
            for prompt_set in PROMPT_SETS:
                _, prompts = load_prompts(f"builtin:{prompt_set}")
                for c in CONCURRENCIES:
                    run = record(server, prompts, prompt_set=prompt_set, concurrency=c, max_tokens=MAX_TOKENS)
                    path = save_run(run, SAMPLE_RUNS_DIR / f"smollm2-{name}-{prompt_set}-c{c}.json.gz")
                    s = summarize(run)
                    print(json.dumps({"file": path.name, "output_tokens_per_s": round(s.output_tokens_per_s, 1),
                                      "mean_acceptance_length": s.mean_acceptance_length,
                                      "num_output_tokens": s.num_output_tokens, "counters_match": s.counters_match}),
                          flush=True)


if __name__ == "__main__":
    main()
