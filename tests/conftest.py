"""Shared test helpers: hand-built runs for unit tests."""

from __future__ import annotations

import pytest

from specviz.config import SpecConfig
from specviz.runfile import Request, Run, RunMeta, Step


def make_step(i: int, drafts: list[int], sampled: list[int], committed: list[int] | None = None) -> Step:
    return Step(
        engine_step=i, time_s=1000.0 + i, draft_token_ids=drafts, sampled_token_ids=sampled,
        committed_token_ids=sampled if committed is None else committed,
        num_accepted=len(sampled) - 1 if drafts else 0,
    )


def make_run(requests: list[Request], *, k: int | None = 3, **meta) -> Run:
    fields = dict(
        run_id="test", created_at="2026-12-02T00:00:00+00:00", specviz_version="0", vllm_version="0.32.0",
        platform="cpu", device_name="test cpu", async_scheduling=False, traced=True, target_model="tiny",
        spec=SpecConfig(method="ngram", num_speculative_tokens=k) if k else None, sampling={"temperature": 0.0},
        prompt_set="unit", concurrency=1, max_tokens=16,
    ) | meta
    return Run(meta=RunMeta(**fields), requests=requests)


SCHEDULE = SpecConfig.from_recorded({"method": "ngram", "num_speculative_tokens": 4,
                                     "num_speculative_tokens_per_batch_size": [[1, 1, 4], [2, 64, 1]]})


def make_scheduled_run(r1_drafts_at_step_4: int = 1) -> Run:
    """A run whose k follows the batch size (SCHEDULE: k=4 alone, k=1 beside others).

    r0 at engine steps 1-6, r1 joins at 3 and leaves after 4: the batch goes 1, 1, 2, 2, 1, 1.
    Drafts verified at a step were proposed at the request's step before, with that step's batch:
    r0 verifies 4, 4 (proposed alone), 1, 1 (proposed beside r1), 4 (alone again); r1 verifies 1.
    """
    def step(i, n):  # n drafts, all accepted, then the bonus token
        drafts = list(range(10 * i, 10 * i + n))
        return make_step(i, drafts, drafts + [99])
    r0 = [make_step(1, [], [5]), step(2, 4), step(3, 4), step(4, 1), step(5, 1), step(6, 4)]
    r1 = [make_step(3, [], [6]), step(4, r1_drafts_at_step_4)]
    reqs = [Request(request_id=rid, prompt="p", output_token_ids=[t for s in steps for t in s.committed_token_ids],
                    output_text="x", start_time_s=0.0, finish_reason="length", steps=steps)
            for rid, steps in (("r0", r0), ("r1", r1))]
    return make_run(reqs, k=4, spec=SCHEDULE, concurrency=2)


@pytest.fixture
def weather_run() -> Run:
    """The worked example: drafts 'sunny and warm outside', target accepts 2 and puts 'clear'.

    Token ids: sunny=1 and=2 warm=3 outside=4 clear=5 today=6 .=7 it=8 is=9
    step 0: prefill, no drafts, samples [6]
    step 1: drafts [1,2,3,4] -> sampled [1,2,5]     accepted 2, correction 5, tail [4] discarded
    step 2: drafts [7,8,9]   -> sampled [7,8,9,2]   all accepted, bonus 2
    """
    steps = [make_step(0, [], [6]), make_step(1, [1, 2, 3, 4], [1, 2, 5]), make_step(2, [7, 8, 9], [7, 8, 9, 2])]
    req = Request(
        request_id="r0", prompt="The weather today is", output_token_ids=[6, 1, 2, 5, 7, 8, 9, 2],
        output_text="x", start_time_s=999.0, first_token_time_s=1000.0, end_time_s=1002.0,
        finish_reason="length", steps=steps,
    )
    return make_run([req], k=4)


@pytest.fixture
def app():
    """The whole app (app.py) after its first run, as a newcomer opens it."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../app.py", default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def html_of(at) -> str:
    """Every markdown element of an AppTest, joined: where the token views' HTML lands."""
    return "\n".join(m.value for m in at.markdown)


@pytest.fixture(scope="module")
def tiny_target(tmp_path_factory):
    """A tiny random-weight target for the live page tests; stops the engine the page shared, after them."""
    from specviz.demo_model import ensure_demo_model
    from specviz.serving import local as local_servers
    from specviz.testing.tiny_models import build_tiny_pair

    target, _ = build_tiny_pair(tmp_path_factory.mktemp("tiny-page"), tokenizer_from=ensure_demo_model())
    yield str(target)
    for server in list(local_servers._live_servers):  # the page's shared engine lives in this process
        server.stop()
