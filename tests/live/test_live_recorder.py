"""Live: the recorder holds on the prompts people send (issue: recorder truth on real prompts).

One tiny ngram server records the cases that broke the landed code or sit next to them:
- a prompt cached up to one token past a block boundary, which vLLM pads with placeholder drafts;
- a prompt longer than the context (HTTP 400), which must not end the run;
- a prompt near the context's end, and one prefilled in chunks;
and a second server runs 64 requests at once in a KV cache small enough to preempt some.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specviz.config import SpecConfig
from specviz.metrics import count_as_vllm, summarize
from specviz.runfile import load_run, save_run
from specviz.serving.local import LocalServer
from specviz.serving.recording import load_tokenizer, record

pytestmark = pytest.mark.live

K = 3
BLOCK_SIZE = 128  # vLLM's KV cache block on CPU (vllm/platforms/cpu.py); 16 on most GPUs
MAX_MODEL_LEN = 512
NGRAM = SpecConfig.from_dict({"method": "ngram", "num_speculative_tokens": K,
                              "prompt_lookup_min": 1, "prompt_lookup_max": 3})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from specviz.demo_model import ensure_demo_model
    from specviz.testing.tiny_models import build_tiny_pair

    target, _ = build_tiny_pair(tmp_path_factory.mktemp("tiny"), tokenizer_from=ensure_demo_model())
    return str(target)


def prompt_of_length(tokenizer, n_tokens: int, word: str = " library") -> str:
    """Raw text that the server tokenizes to exactly n_tokens tokens."""
    base = "Summarize: the council met on Tuesday to discuss the new"
    text = base
    while len(tokenizer(text)["input_ids"]) < n_tokens:
        text += word
    assert len(tokenizer(text)["input_ids"]) == n_tokens, "the filler word is not one token"
    return text


def _assert_sound(run, k=K):
    """Valid, every output rebuilt from its steps, and the steps counted as vLLM counts equal its counters."""
    assert run.meta.invalid_reason is None, run.meta.invalid_reason
    for req in run.requests:
        if req.error is None:
            assert [t for s in req.steps for t in s.committed_token_ids] == req.output_token_ids, req.request_id
    counters = run.meta.vllm_counters
    assert counters is not None
    as_vllm = count_as_vllm([s for r in run.requests for s in r.steps], k)
    assert as_vllm.model_dump(include={"num_drafts", "num_draft_tokens", "num_accepted_tokens",
                                       "num_accepted_tokens_per_pos"}) == counters.model_dump()
    assert summarize(run).counters_match is True


@pytest.fixture(scope="module")
def recorded(tiny, tmp_path_factory):
    tokenizer = load_tokenizer(tiny)
    boundary = prompt_of_length(tokenizer, 2 * BLOCK_SIZE + 1)
    too_long = prompt_of_length(tokenizer, MAX_MODEL_LEN + 40)
    near_end = prompt_of_length(tokenizer, MAX_MODEL_LEN - 24)
    out = {}
    with LocalServer(model=tiny, spec=NGRAM, dtype="float32", max_model_len=MAX_MODEL_LEN,
                     extra_args=["--max-num-batched-tokens", "128"]) as server:
        server.start()
        # The same prompt twice, one after the other: the second finds 2 whole blocks cached and
        # one token left to compute, so vLLM pads its first step with K placeholder drafts.
        out["boundary"] = record(server, [boundary, boundary], prompt_set="boundary", concurrency=1,
                                 max_tokens=32, chat=False, tokenizer=tokenizer)
        out["refused"] = record(server, ["Count to ten.", too_long, "Name a colour."], prompt_set="refused",
                                concurrency=1, max_tokens=16, tokenizer=tokenizer)
        out["near_end"] = record(server, [near_end], prompt_set="near-end", concurrency=1, max_tokens=20,
                                 chat=False, tokenizer=tokenizer)
        # 128-token batches: a 400-token prompt is prefilled in four chunks.
        out["chunked"] = record(server, [prompt_of_length(tokenizer, 400, " museum")], prompt_set="chunked",
                                concurrency=1, max_tokens=24, chat=False, tokenizer=tokenizer)
        out["log"] = server.log_path.read_text(errors="replace")
    out["dir"] = tmp_path_factory.mktemp("runs")
    return out


def test_a_prompt_cached_to_one_token_past_a_block_records_its_padded_step(recorded):
    run = recorded["boundary"]
    _assert_sound(run)
    first, second = run.requests
    assert len(second.prompt_token_ids) == 2 * BLOCK_SIZE + 1
    assert len(first.output_token_ids) == len(second.output_token_ids) == 32
    assert first.output_token_ids == second.output_token_ids
    padded = second.steps[0]
    assert padded.num_padded_drafts == K and padded.draft_token_ids == [] and padded.num_accepted == 0
    assert padded.committed_token_ids == second.output_token_ids[:1]  # the first output token is not lost
    assert first.steps[0].num_padded_drafts == 0
    s = summarize(run)
    assert (s.num_padded_steps, s.num_padded_draft_tokens) == (1, K)
    # vLLM counts the padding as drafted and rejected; specviz's own figures leave it out.
    assert s.vllm_counters.num_draft_tokens == s.num_draft_tokens + K
    assert s.vllm_counters.num_drafts == s.num_drafts + 1
    assert "placeholder drafts" not in recorded["log"]


def test_a_refused_request_is_kept_with_the_servers_message_and_the_others_go_on(recorded, tmp_path):
    run = recorded["refused"]
    assert run.meta.complete and run.meta.invalid_reason is None
    ok1, refused, ok2 = run.requests
    assert refused.error and "400" in refused.error and refused.output_token_ids == []
    assert ok1.error is None and ok2.error is None and len(ok1.output_token_ids) == len(ok2.output_token_ids) == 16
    _assert_sound(run)
    assert summarize(run).num_failed_requests == 1
    path = save_run(run, tmp_path / "refused.json.gz")
    check = subprocess.run([sys.executable, "-m", "specviz", "check", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert f"request {refused.request_id} failed: HTTP 400" in check.stderr
    assert json.loads(check.stdout)["num_failed_requests"] == 1


def test_a_prompt_near_the_end_of_the_context_and_a_chunked_prefill_record_whole(recorded):
    near_end = recorded["near_end"]
    _assert_sound(near_end)
    assert near_end.requests[0].error is None and len(near_end.requests[0].output_token_ids) == 20
    chunked = recorded["chunked"]
    _assert_sound(chunked)
    assert len(chunked.requests[0].prompt_token_ids) == 400
    assert len(chunked.requests[0].output_token_ids) == 24


def test_runs_read_back_equal(recorded):
    for name in ("boundary", "refused", "near_end", "chunked"):
        run = recorded[name]
        assert load_run(save_run(run, recorded["dir"] / f"{name}.json.gz")) == run


def test_sixty_four_concurrent_requests_in_a_small_kv_cache(tiny):
    """Concurrency 64 with a cache too small for all of them: some wait, some are preempted and resumed."""
    tokenizer = load_tokenizer(tiny)
    from specviz.prompts import load_prompts

    _, prompts = load_prompts("builtin:repetitive")
    prompts = (prompts * 64)[:64]
    # 24 blocks of 128 tokens (the CPU backend ignores --kv-cache-memory-bytes; the override holds).
    # Each request starts in one block and needs a second one as it passes 128 tokens, which a full
    # cache lacks: vLLM preempts some requests and resumes them later.
    with LocalServer(model=tiny, spec=NGRAM, dtype="float32",
                     extra_args=["--num-gpu-blocks-override", "24", "--max-num-seqs", "64"]) as server:
        server.start()
        run = record(server, prompts, prompt_set="repetitive", concurrency=64, max_tokens=96, tokenizer=tokenizer)
        preemptions = _preemptions(server.url)
    assert run.meta.complete, run.meta.incomplete_reason
    assert all(r.error is None and len(r.output_token_ids) == 96 for r in run.requests)
    _assert_sound(run)
    steps = [{s.engine_step for s in r.steps} for r in run.requests]
    assert max(sum(step in s for s in steps) for step in set().union(*steps)) >= 16  # real batching
    assert preemptions > 0  # the case this test is for: requests preempted, resumed, and still rebuilt
    print(f"64 requests: {preemptions} preemptions, {summarize(run).num_padded_steps} padded steps")


def _preemptions(url: str) -> int:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    families = text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=10).text)
    return int(sum(s.value for f in families for s in f.samples if s.name == "vllm:num_preemptions_total"))
