"""Measure the shipped drafters (drafters/smollm2-135m-draft, drafters/smollm2-135m-eagle3) in real vLLM.

For each drafter and k = num_speculative_tokens in --ks, one vLLM server (with specviz's tracer)
runs the held-out chat prompts greedily at each concurrency in --concurrency; a baseline server
(no speculation) runs the same. Every run is saved to sample_runs/drafters/ and a table of mean
acceptance length, acceptance per position and output tokens/s (against the baseline) is printed
and written to sample_runs/drafters/summary.json.

    .venv/bin/python benchmarks/drafter_acceptance.py                     # everything (~15 min on 2 cores)
    .venv/bin/python benchmarks/drafter_acceptance.py --methods eagle3 --ks 3 --concurrency 1
    .venv/bin/python benchmarks/drafter_acceptance.py --rescore          # summary.json again from the saved runs

Each mean acceptance length comes with a 90% bootstrap interval over the prompts
(specviz.metrics.acceptance_length_interval): with 12 prompts it is about +-0.15 wide.

Held-out prompts: specviz's built-in "chat" set plus eight more (specviz.train.data.HELDOUT_CHAT);
none is used for training. Targets (issue #6, k = 3, greedy): EAGLE-3 >= 2.0, draft model >= 1.8.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from specviz.config import SpecConfig
from specviz.files import SAMPLE_RUNS_DIR
from specviz.metrics import acceptance_length_interval, run_acceptance, summarize
from specviz.runfile import load_run, save_run
from specviz.serving.local import LocalServer
from specviz.serving.recording import record
from specviz.train import DRAFTER_SPECS
from specviz.train.data import HELDOUT_CHAT

OUT = SAMPLE_RUNS_DIR / "drafters"
NAMES = {"draft_model": "draft", "eagle3": "eagle3"}


def spec_for(method: str, k: int) -> SpecConfig:
    return SpecConfig.from_dict(DRAFTER_SPECS[method] | {"num_speculative_tokens": k})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--methods", nargs="+", default=["eagle3", "draft_model"], choices=list(DRAFTER_SPECS))
    ap.add_argument("--ks", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    ap.add_argument("--concurrency", nargs="+", type=int, default=[1, 8])
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=len(HELDOUT_CHAT), help="use the first N held-out prompts")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--rescore", action="store_true",
                    help="rebuild summary.json from the runs in --out; start no server")
    args = ap.parse_args(argv)
    if args.rescore:
        return rescore(Path(args.out))

    from specviz.demo_model import ensure_demo_model

    target = str(ensure_demo_model())
    out = Path(args.out)
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {"runs": {}}
    configs = ([] if args.no_baseline else [("baseline", None, 0)])
    configs += [(NAMES[m], m, k) for m in args.methods for k in args.ks]
    prompts = list(HELDOUT_CHAT)[: args.prompts]
    for name, method, k in configs:
        spec = spec_for(method, k) if method else None
        started = time.monotonic()
        with LocalServer(model=target, spec=spec, dtype=args.dtype) as server:
            server.start()
            for c in args.concurrency:
                run = record(server, prompts, prompt_set="heldout-chat", concurrency=c, max_tokens=args.max_tokens)
                label = f"smollm2-{name}" + (f"-k{k}" if method else "") + f"-heldout-chat-c{c}"
                save_run(run, out / f"{label}.json.gz")
                row = summary_row(run)
                summary["runs"][label] = row
                print(json.dumps({label: row}), flush=True)
        print(f"{name} k={k}: {time.monotonic() - started:.0f} s", flush=True)
        summary["provenance"] = _provenance_fields(run)
        out.mkdir(parents=True, exist_ok=True)
        summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    _print_table(summary)
    return 0


def summary_row(run) -> dict:
    """One line of summary.json, from a saved run."""
    measured = summarize(run)
    acc = run_acceptance(run) if run.meta.method else None
    interval = acceptance_length_interval(run) if acc else None
    return {"method": run.meta.method or "none", "k": run.meta.num_speculative_tokens,
            "concurrency": run.meta.concurrency, "max_tokens": run.meta.max_tokens, "prompts": len(run.requests),
            "output_tokens_per_s": measured.output_tokens_per_s,
            "mean_acceptance_length": acc.mean_acceptance_length if acc else None,
            "mean_acceptance_length_90": list(interval) if interval else None,
            "acceptance_rate_per_pos": acc.acceptance_rate_per_pos if acc else None,
            "draft_acceptance_rate": acc.draft_acceptance_rate if acc else None,
            "counters_match": _counters_match(run)}


def rescore(out: Path) -> int:
    """summary.json again from the runs saved in `out` (e.g. after a new column), keeping the provenance."""
    summary_path = out / "summary.json"
    old = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    runs = {path.name.removesuffix(".json.gz"): load_run(path) for path in sorted(out.glob("*.json.gz"))}
    if not runs:
        raise SystemExit(f"error: no saved runs (*.json.gz) in {out}; run the benchmark first")
    old_labels = list(old.get("runs", {}))
    order = [label for label in old_labels if label in runs] + [label for label in runs if label not in old_labels]
    summary = {"runs": {label: summary_row(runs[label]) for label in order},
               "provenance": old.get("provenance") or _provenance_fields(max(runs.values(), key=lambda r: r.meta.created_at))}
    summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    _print_table(summary)
    return 0


def _counters_match(run) -> bool | None:
    counters = run.meta.vllm_counters
    if counters is None or not run.meta.method:
        return None
    from specviz.metrics import counters_acceptance

    a, b = run_acceptance(run), counters_acceptance(counters)
    return a.num_drafts == b.num_drafts and a.num_accepted_tokens == b.num_accepted_tokens


def _provenance_fields(run) -> dict:
    meta = run.meta.model_dump(mode="json")
    return {k: meta.get(k) for k in ("vllm_version", "platform", "device_name", "specviz_version", "created_at",
                                     "target_model", "sampling", "prompt_set", "max_tokens")}


def _print_table(summary: dict) -> None:
    runs = summary["runs"]
    base = {r["concurrency"]: r["output_tokens_per_s"] for r in runs.values() if r["method"] == "none"}
    print("\n| method | k | c | mean acceptance length (90% interval) | acceptance per position | output tok/s "
          "| vs baseline |")
    print("|---|---|---|---|---|---|---|")
    for r in sorted(runs.values(), key=lambda r: (r["method"], r["k"], r["concurrency"])):
        mal = f"{r['mean_acceptance_length']:.2f}" if r["mean_acceptance_length"] else "–"
        if r.get("mean_acceptance_length_90"):
            mal += " ({:.2f}-{:.2f})".format(*r["mean_acceptance_length_90"])
        per = ", ".join(f"{x:.2f}" for x in r["acceptance_rate_per_pos"] or []) or "–"
        tps = r["output_tokens_per_s"]
        b = base.get(r["concurrency"])
        ratio = f"{tps / b:.2f}x" if tps and b else "–"
        print(f"| {r['method']} | {r['k']} | {r['concurrency']} | {mal} | {per} | {tps:.1f} | {ratio} |")


if __name__ == "__main__":
    sys.exit(main())
