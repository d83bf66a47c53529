"""The tracer-free step view against the tracer's truth, on one real vLLM server running both.

Each server runs the specviz tracer AND `--per-request-spec-decode-metrics detailed` (they work
together under the V1 runner with async scheduling off, as on CPU). vLLM's per-step arrays must
equal the tracer's verify steps one by one, and every step that untraced_steps places exactly must
sit on the very tokens the tracer saw it commit.
"""

from __future__ import annotations

import pytest

from specviz.config import SpecConfig
from specviz.serving.local import LocalServer
from specviz.serving.recording import record
from specviz.untraced_steps import has_step_arrays, place_steps

pytestmark = pytest.mark.live

PROMPTS = ["Write a list of colours.", "Name some animals.", "Count from one to twenty.", "Repeat: a b c a b c"] * 4


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    from specviz.demo_model import ensure_demo_model
    from specviz.testing.tiny_models import build_tiny_pair

    target, draft = build_tiny_pair(tmp_path_factory.mktemp("tiny-untraced"), tokenizer_from=ensure_demo_model())
    return str(target), str(draft)


def tracer_verify_steps(req) -> list[tuple[int, int]]:
    """(drafted, accepted) per step the tracer saw verify drafts, counted as vLLM counts (padded slots drafted)."""
    return [(s.num_drafts + s.num_padded_drafts, s.num_accepted) for s in req.steps if s.verified]


@pytest.mark.parametrize("method", ["ngram", "draft_model"])
def test_vllm_per_step_arrays_equal_the_tracer_step_by_step(tiny_pair, method):
    target, draft = tiny_pair
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3} \
        if method == "ngram" else {"method": "draft_model", "model": draft, "num_speculative_tokens": 3}
    with LocalServer(model=target, spec=SpecConfig.from_dict(spec), dtype="float32",
                     extra_args=["--per-request-spec-decode-metrics", "detailed"]) as server:
        server.start()
        for concurrency in (1, 16):
            run = record(server, PROMPTS, prompt_set="unit", concurrency=concurrency, max_tokens=24)
            assert run.meta.complete and run.meta.traced and run.meta.invalid_reason is None
            exact_requests = exact_steps = verify_steps = 0
            for req in run.requests:
                m = req.spec_decode_metrics
                assert has_step_arrays(req), "the server sent no per-step arrays"
                truth = tracer_verify_steps(req)
                # vLLM leaves the arrays out when a request verified no drafts
                assert list(zip(m.per_step_drafted or [], m.per_step_accepted or [])) == truth, \
                    (concurrency, req.request_id)
                assert any(a for _, a in truth) or method == "ngram"  # the draft model gets drafts accepted
                placed = place_steps(req, k=3, method=method)
                assert placed.placement in ("exact", "approximate"), placed.why
                exact_steps += placed.num_exact_verify_steps
                verify_steps += placed.num_verify_steps
                traced_tokens = {}  # verify index -> the tokens the tracer saw that step commit
                for s in req.steps:
                    if s.verified:
                        traced_tokens[len(traced_tokens)] = s.committed_token_ids
                for s in placed.steps:
                    assert (s.num_drafts, s.num_accepted) == (m.per_step_drafted[s.verify_index],
                                                              m.per_step_accepted[s.verify_index]) \
                        if s.verify_index is not None else s.num_drafts == 0
                    if s.exact and s.verify_index is not None:
                        assert s.token_ids == traced_tokens[s.verify_index], (concurrency, req.request_id)
                if placed.placement == "exact":
                    exact_requests += 1
                    assert [len(s.token_ids) for s in placed.steps] == [len(s.committed_token_ids) for s in req.steps]
            # ngram's no-match steps sit beside verify steps that accepted nothing, which then cannot be told
            # apart; most steps still place exactly, and the draft model (no such steps) places whole requests
            assert exact_steps >= verify_steps / 2, (exact_steps, verify_steps)
            assert method == "ngram" or exact_requests >= len(run.requests) / 2, (concurrency, exact_requests)
