"""Live: the demo model (SmolLM2-135M) as specviz serves it by default (float32) gives greedy output
identical to its baseline with ngram, the shipped draft model and the shipped EAGLE-3 head, on the
showcase prompts at concurrency 1 and 4; the shipped drafters draft tokens the target accepts.

One server per config (baseline, ngram, eagle3, draft_model), each started once and recorded at both
concurrencies. The dtype is left to specviz's default on purpose: in bfloat16 near-tied candidates
can flip between a one-row and a (k+1)-row forward pass (sample_runs/showcase/README.md).
"""

from __future__ import annotations

import pytest

from specviz.config import SpecConfig
from specviz.divergence import compare_runs
from specviz.metrics import run_acceptance, summarize
from specviz.prompts import load_prompts
from specviz.serving.local import LocalServer
from specviz.serving.recording import record
from specviz.train import DRAFT_DIR, DRAFTER_SPECS, EAGLE3_DIR

pytestmark = pytest.mark.live

K = 3
MAX_TOKENS = 64
PROMPTS = load_prompts("builtin:showcase-edit")[1] + load_prompts("builtin:showcase-chat")[1]
CONCURRENCIES = (1, 4)
NGRAM = {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}


@pytest.fixture(scope="module")
def runs():
    from specviz.demo_model import ensure_demo_model

    for d in (DRAFT_DIR, EAGLE3_DIR):
        if not (d / "model.safetensors").is_file():
            pytest.fail(f"{d} has no model.safetensors: the shipped drafter is missing")
    target = str(ensure_demo_model())
    specs = {
        "baseline": None,
        "ngram": SpecConfig.from_dict(NGRAM | {"num_speculative_tokens": K}),
        "eagle3": SpecConfig.from_dict(DRAFTER_SPECS["eagle3"] | {"num_speculative_tokens": K}),
        "draft_model": SpecConfig.from_dict(DRAFTER_SPECS["draft_model"] | {"num_speculative_tokens": K}),
    }
    out = {}
    for name, spec in specs.items():
        with LocalServer(model=target, spec=spec) as server:  # specviz's default dtype for the demo model
            server.start()
            for c in CONCURRENCIES:
                out[name, c] = record(server, PROMPTS, prompt_set="showcase", concurrency=c, max_tokens=MAX_TOKENS)
            if name == "ngram":
                sampled = record(server, PROMPTS, prompt_set="showcase", concurrency=1, max_tokens=MAX_TOKENS,
                                 temperature=0.8, seed=1)
                greedy = sampled.meta.sampling | {"temperature": 0.0}
                out["sampled_as_greedy"] = sampled.model_copy(
                    update={"meta": sampled.meta.model_copy(update={"sampling": greedy})})
    return out


@pytest.mark.parametrize("c", CONCURRENCIES)
@pytest.mark.parametrize("name", ["ngram", "eagle3", "draft_model"])
def test_greedy_output_is_identical_to_the_target_alone(runs, name, c):
    base, run = runs["baseline", c], runs[name, c]
    assert base.meta.dtype == run.meta.dtype == "float32"
    assert len(base.requests) == len(PROMPTS) and all(r.output_token_ids for r in base.requests)
    comparison = compare_runs(base, run)
    assert [r.verdict for r in comparison.requests] == ["identical"] * len(PROMPTS), comparison.summary()
    assert all(r.top_logprobs and len(r.top_logprobs) == len(r.output_token_ids) for r in run.requests)


@pytest.mark.parametrize("name, floor", [("eagle3", 1.1), ("draft_model", 1.1)])
def test_the_trained_drafter_is_accepted(runs, name, floor):
    run = runs[name, 4]
    acc = run_acceptance(run)
    assert run.meta.method == name and acc.num_drafts > 0
    # a random drafter on this target stays near 1.0; the shipped ones measured 1.75 (draft) and 1.73
    # (eagle3) at k=3 on held-out chat (sample_runs/drafters/)
    assert acc.mean_acceptance_length >= floor, acc
    # where vLLM pads a step (counted as rejected drafts by its counters, left out of specviz's figures),
    # summarize compares as vLLM counts
    assert summarize(run).counters_match


def test_compare_says_identical_for_the_float32_pair_and_not_a_tie_for_sampled_output_relabelled_greedy(
        runs, tmp_path, capsys):
    from specviz.__main__ import main
    from specviz.runfile import save_run

    base, ngram = runs["baseline", 1], runs["ngram", 1]
    save_run(base, tmp_path / "base.json.gz")
    save_run(ngram, tmp_path / "ngram.json.gz")
    assert main(["compare", str(tmp_path / "base.json.gz"), str(tmp_path / "ngram.json.gz")]) == 0
    assert f"{len(PROMPTS)} of {len(PROMPTS)} requests identical" in capsys.readouterr().out

    # A real mismatch: the same prompts sampled at temperature 0.8, then labelled greedy. Where a sampled
    # token differs from the greedy one, the target had preferred another token clearly: not a tie.
    sampled = runs["sampled_as_greedy"]
    save_run(sampled, tmp_path / "sampled.json.gz")
    assert main(["compare", str(tmp_path / "base.json.gz"), str(tmp_path / "sampled.json.gz")]) == 1
    out = capsys.readouterr().out
    assert "NOT a tie" in out and "identical output" not in out.split("\n")[0]


@pytest.fixture(scope="module")
def bf16_pair():
    """The ngram showcase pair in bfloat16, where near-ties may round the other way (machine-dependent)."""
    from specviz.demo_model import ensure_demo_model

    target = str(ensure_demo_model())
    prompts = load_prompts("builtin:showcase-edit")[1]
    out = {}
    for name, spec in (("baseline", None), ("ngram", SpecConfig.from_dict(NGRAM | {"num_speculative_tokens": K}))):
        with LocalServer(model=target, spec=spec, dtype="bfloat16") as server:
            server.start()
            out[name] = record(server, prompts, prompt_set="showcase-edit", concurrency=1, max_tokens=160)
    return out


def test_in_bfloat16_every_divergence_is_a_tie_shown_by_the_targets_own_logprobs(bf16_pair):
    comparison = compare_runs(bf16_pair["baseline"], bf16_pair["ngram"])
    assert comparison.dtype == "bfloat16" and len(comparison.requests) == 2
    # On an AMD EPYC these pairs parted at tokens 36 and 101; on an Intel Xeon with AMX they were identical.
    assert {r.verdict for r in comparison.requests} <= {"identical", "tie"}, [r.headline() for r in comparison.requests]
