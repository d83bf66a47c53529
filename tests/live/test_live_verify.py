"""Live tests of "try your own draft": the real SmolLM2 demo model on vLLM (CPU) verifies typed drafts.

One server for the module (no speculative config): serving.verify_client only needs the target's
prompt logprobs. Verification is cross-checked against the same server's plain greedy
/v1/completions: the accepted prefix must be the common prefix of the draft and the greedy
continuation, and the correction (or bonus) the greedy token right after it.

Nothing here hard-codes what SmolLM2 says. The prompts of the cross-checks were chosen because the
model's greedy choices there are clear (gaps well above one bf16 step): at an exact tie the single
verification pass and step-by-step decoding can break it differently (see specviz/verify.py).
"""

from __future__ import annotations

import httpx
import pytest

from specviz.roles import step_roles
from specviz.serving.local import LocalServer, free_port
from specviz.serving.recording import load_tokenizer
from specviz.serving.verify_client import verify_draft
from specviz.verify import DraftVerification, VerifyError
from specviz.view.render import step_html

pytestmark = pytest.mark.live

WEATHER_PROMPT, WEATHER_DRAFT = "The weather today is", " sunny and warm outside"
# A pair where SmolLM2 accepts a prefix of >= 2 tokens and then rejects (found by trying).
PARTIAL_PROMPT, PARTIAL_DRAFT = "The capital of France is", " Paris. It is known"
# A prompt whose greedy continuation has large gaps at every position.
GREEDY_PROMPT = "1, 2, 3, 4,"


@pytest.fixture(scope="module")
def server():
    from specviz.demo_model import ensure_demo_model

    with LocalServer(model=str(ensure_demo_model()), dtype="bfloat16", trace=False) as srv:
        srv.start()
        yield srv


@pytest.fixture(scope="module")
def tokenizer(server):
    return load_tokenizer(server.model)


def greedy(server, tokenizer, prompt: str, n: int) -> list[int]:
    """The server's own greedy continuation of `prompt` (a text prompt): n token ids."""
    r = httpx.post(f"{server.url}/v1/completions", timeout=120, json={
        "model": server.model, "prompt": prompt, "max_tokens": n, "temperature": 0,
        "return_token_ids": True, "ignore_eos": True,
    })
    r.raise_for_status()
    choice = r.json()["choices"][0]
    # verify_draft tokenizes the prompt the way the server tokenizes a text prompt
    assert choice["prompt_token_ids"] == tokenizer.encode(prompt)
    assert len(choice["token_ids"]) == n
    return choice["token_ids"]


def describe(v: DraftVerification) -> str:
    lines = [f"prompt {v.prompt!r} draft {v.draft!r} -> num_accepted={v.num_accepted}"]
    for p in v.positions:
        lines.append(
            f"  [{p.index}] {p.status:9} draft {p.draft.text!r} (id {p.draft.token_id}, lp {p.draft.logprob:.3f}, "
            f"rank {p.draft_rank})  target {p.target.token.text!r} (id {p.target.token.token_id}, "
            f"lp {p.target.token.logprob:.3f}, margin {p.target.margin:.3f}, ties {p.target.tied_token_ids})  "
            f"top {[(t.text, round(t.logprob, 2)) for t in p.target.top]}"
        )
    a = v.after_draft
    lines.append(f"  after the draft: {a.token.text!r} (id {a.token.token_id}) top "
                 f"{[(t.text, round(t.logprob, 2)) for t in a.top]}")
    lines.append(f"  accepted {[t.text for t in v.accepted]}  correction {v.correction and v.correction.text!r}  "
                 f"bonus {v.bonus and v.bonus.text!r}  discarded {[t.text for t in v.discarded]}")
    return "\n".join(lines)


def assert_structure(v: DraftVerification, tokenizer) -> None:
    k = len(v.draft_token_ids)
    assert v.draft_token_ids == tokenizer.encode(v.draft, add_special_tokens=False)
    assert v.draft_texts == [tokenizer.decode([t]) for t in v.draft_token_ids]
    assert 0 <= v.num_accepted <= k
    assert (v.correction is None) != (v.bonus is None), "exactly one of correction / bonus"
    assert [t.token_id for t in v.accepted] == v.draft_token_ids[: v.num_accepted]
    n_final = 1 if v.correction is not None else 0  # the rejected draft token, replaced by the correction
    assert v.num_accepted + n_final + len(v.discarded) == k, "every draft token is accepted, rejected or discarded"
    if v.correction is not None:
        j = v.num_accepted
        assert v.correction.token_id != v.draft_token_ids[j]
        assert v.correction.token_id == v.positions[j].target.token.token_id
        assert [t.token_id for t in v.discarded] == v.draft_token_ids[j + 1:], "discarded follows the first mismatch"
    else:
        assert v.bonus == v.after_draft.token and not v.discarded
    for p in v.positions[: v.num_accepted]:
        assert p.status == "accepted" and p.matches and p.draft_rank == 1
    for p in v.positions:  # the greedy token is the top logprob, ties to the lowest id
        best = max(t.logprob for t in p.target.top)
        assert p.target.token.logprob == best
        assert p.target.token.token_id == min(t.token_id for t in p.target.top if t.logprob == best)
        assert len(p.target.top) == 5
    # drawn like a recorded engine step
    step = v.to_step()
    roles = [role for _, role in step_roles(step)]
    if v.correction is not None:
        assert roles == ["accepted"] * v.num_accepted + ["rejected", "correction"] + ["discarded"] * len(v.discarded)
    else:
        assert roles == ["accepted"] * k + ["bonus"]
    assert step.sampled_token_ids == step.committed_token_ids == [t.token_id for t in v.sampled]
    assert "sv-chip" in step_html(step)


def assert_matches_greedy(v: DraftVerification, server, tokenizer) -> None:
    """Verification agrees with the server's own greedy decoding of the same prompt."""
    k = len(v.draft_token_ids)
    g = greedy(server, tokenizer, v.prompt, k + 1)
    common = 0
    while common < k and g[common] == v.draft_token_ids[common]:
        common += 1
    where = f"\n{describe(v)}\n  greedy continuation {[tokenizer.decode([t]) for t in g]}"
    assert v.num_accepted == common, where
    if common < k:
        assert v.correction is not None and v.correction.token_id == g[common], where
    else:
        assert v.bonus is not None and v.bonus.token_id == g[k], where


def test_weather_example(server, tokenizer):
    v = verify_draft(server.url, server.model, tokenizer, WEATHER_PROMPT, WEATHER_DRAFT)
    print("\n" + describe(v))
    assert [tokenizer.decode([t]) for t in v.draft_token_ids] == [" sunny", " and", " warm", " outside"]
    assert v.prompt_token_ids == tokenizer.encode(WEATHER_PROMPT)
    assert_structure(v, tokenizer)
    assert_matches_greedy(v, server, tokenizer)


def test_accepts_a_prefix_then_rejects_as_greedy_decoding_does(server, tokenizer):
    v = verify_draft(server.url, server.model, tokenizer, PARTIAL_PROMPT, PARTIAL_DRAFT)
    print("\n" + describe(v))
    assert_structure(v, tokenizer)
    assert v.num_accepted >= 2 and v.correction is not None, describe(v)
    assert_matches_greedy(v, server, tokenizer)


def test_the_servers_own_greedy_continuation_is_fully_accepted(server, tokenizer):
    six = greedy(server, tokenizer, GREEDY_PROMPT, 6)
    seven = greedy(server, tokenizer, GREEDY_PROMPT, 7)
    assert seven[:6] == six
    v = verify_draft(server.url, server.model, tokenizer, GREEDY_PROMPT, six)
    print("\n" + describe(v))
    assert v.num_accepted == 6 and v.correction is None and not v.discarded, describe(v)
    assert v.bonus is not None and v.bonus.token_id == seven[6], describe(v)
    assert [p.status for p in v.positions] == ["accepted"] * 6
    assert_structure(v, tokenizer)
    # the same draft typed as text (it tokenizes back to the same ids) gives the same verification
    text = tokenizer.decode(six)
    assert tokenizer.encode(text, add_special_tokens=False) == six
    by_text = verify_draft(server.url, server.model, tokenizer, GREEDY_PROMPT, text)
    assert by_text.model_dump(exclude={"draft"}) == v.model_dump(exclude={"draft"})


def test_bad_inputs_raise_verify_error(server, tokenizer):
    with pytest.raises(VerifyError, match="draft is empty"):
        verify_draft(server.url, server.model, tokenizer, WEATHER_PROMPT, "")
    with pytest.raises(VerifyError, match="draft is empty"):
        verify_draft(server.url, server.model, tokenizer, WEATHER_PROMPT, [])
    with pytest.raises(VerifyError, match="prompt is empty"):
        verify_draft(server.url, server.model, tokenizer, "", WEATHER_DRAFT)
    with pytest.raises(VerifyError, match="top_k"):
        verify_draft(server.url, server.model, tokenizer, WEATHER_PROMPT, WEATHER_DRAFT, top_k=0)
    with pytest.raises(VerifyError, match="max model length of 2048"):
        verify_draft(server.url, server.model, tokenizer, "word " * 2100, WEATHER_DRAFT)
    with pytest.raises(VerifyError, match="does not serve model 'no-such-model'"):
        verify_draft(server.url, "no-such-model", tokenizer, WEATHER_PROMPT, WEATHER_DRAFT)
    with pytest.raises(VerifyError, match="HTTP 400"):  # the server's own refusal is passed on
        verify_draft(server.url, server.model, tokenizer, WEATHER_PROMPT, WEATHER_DRAFT, top_k=10_000)


def test_a_server_that_is_down_raises_verify_error(tokenizer):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(VerifyError, match="cannot connect") as e:
        verify_draft(url, "any", tokenizer, WEATHER_PROMPT, WEATHER_DRAFT, timeout_s=5)
    assert url in str(e.value)
