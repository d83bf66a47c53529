"""AppTest: the recorded-run view shows a scheduled run's k and batch at each step, and an invalid run's violation
and failed requests (runs built without an engine, as in tests/unit/test_recorder_truth.py)."""

from __future__ import annotations

import re
from pathlib import Path

from page_helpers import html_of
from run_builders import FakeServer, make_scheduled_run, make_step, stream_result
from streamlit.testing.v1 import AppTest

from specviz.runfile import save_run
from specviz.serving.recording import build_run


def _recorded_view_of(path: str) -> None:
    """An AppTest script: the recorded-run view of one run file (the Playground's, without the file picker)."""
    from specviz import ui
    from specviz.runfile import load_run

    ui.recorded_run_view(load_run(path))


def test_the_app_shows_a_scheduled_runs_k_and_batch_at_each_step(tmp_path):
    path = save_run(make_scheduled_run(), tmp_path / "scheduled.json.gz")
    at = AppTest.from_function(_recorded_view_of, args=(str(path),), default_timeout=60).run()
    at.selectbox(key="request_id").set_value("r0").run()
    assert not at.exception
    assert any("ngram k by batch size (1: k=4 · 2-64: k=1)" in c.value for c in at.caption)
    rows = re.findall(r'class="sv-stepk"[^>]*>([^<]*)<', html_of(at))
    assert rows == ["k=0", "k=4 · batch 1", "k=4 · batch 1", "k=1 · batch 2", "k=1 · batch 2", "k=4 · batch 1"]
    at.toggle(key="step_through").set_value(True).run()
    at.slider(key="step_at").set_value(4).run()  # the presenter's one step: k=1 at batch 2
    assert re.findall(r'class="sv-stepk"[^>]*>([^<]*)<', html_of(at)) == ["k=1 · batch 2"]


def test_the_app_opens_an_invalid_run_with_its_violation_and_failed_requests_beside_it(tmp_path):
    results = [stream_result("run-0", [6, 7]), stream_result("run-1", [], error="HTTP 400: prompt too long")]
    run = build_run(FakeServer(), results, {"run-0": [make_step(2, [], [7])], "run-1": []}, run_id="run",
                    prompt_set="unit", concurrency=1, max_tokens=2, sampling={}, raw_trace_records=[])
    assert run.meta.invalid_reason
    path = save_run(run, tmp_path / "invalid.json.gz")
    at = AppTest.from_function(_recorded_view_of, args=(str(path),), default_timeout=60).run()
    assert not at.exception
    assert any("Invalid run" in e.value and "steps commit 1 tokens" in e.value for e in at.error)
    assert any("1 of 2 requests failed" in w.value and "HTTP 400" in w.value for w in at.warning)


def test_the_app_opens_a_file_that_claims_invalid_reason_under_the_readers_own_violation():
    # Issue 43's repro: invalid_reason "x" and a step that accepted 7 of 2 drafts crashed the view in summarize.
    path = str(Path(__file__).parent.parent / "fixtures/invalid-reason-bypass.json.gz")
    at = AppTest.from_function(_recorded_view_of, args=(path,), default_timeout=60).run()
    assert not at.exception
    assert any("Invalid run" in e.value and "num_accepted=7 > number of drafts 2" in e.value for e in at.error)
    for rid in at.selectbox(key="request_id").options:
        at.selectbox(key="request_id").set_value(rid.split(":")[0]).run()
        assert not at.exception
