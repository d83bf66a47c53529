"""AppTest: the Playground opens on the best speculative sample run, its timeline brush chooses the step rows,
and the race is one click away and ends on the measured speedup."""

from __future__ import annotations

import json
import re

import pytest
from page_helpers import html_of

from specviz import race, showcase
from specviz.charts import timeline
from specviz.roles import step_roles
from specviz.runfile import SAMPLE_RUNS_DIR, list_run_files, load_run

LOCAL = "Local engine (specviz starts it)"


@pytest.fixture(scope="module")
def entries():
    return [(str(p.relative_to(SAMPLE_RUNS_DIR)), load_run(p)) for p in list_run_files()]




def _row_numbers(at) -> list[int]:
    return [int(n) for n in re.findall(r'class="sv-stepno">step (\d+)</span>', html_of(at))]


def test_playground_opens_on_the_best_speculative_run(app, entries):
    name = showcase.opening_run(entries)
    run = dict(entries)[name]
    assert app.selectbox(key="run_file").value == name
    assert run.meta.speculative_config is not None
    req = run.requests[showcase.opening_request(run)]
    assert app.selectbox(key="request_id").value == req.request_id
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["mean acceptance length"] != "–"
    html = html_of(app)
    for role in ("accepted", "rejected", "correction"):  # beyond the legend's sample chip
        assert html.count(f'class="sv-chip sv-{role}"') > 1, role
    assert app.button(key="pg_race_open").label == "Race it against the baseline"


def test_timeline_brush_chooses_the_step_rows(app, entries):
    run = dict(entries)[app.selectbox(key="run_file").value]
    req = next(r for r in run.requests if r.request_id == app.selectbox(key="request_id").value)
    n = len(req.steps)
    assert _row_numbers(app) == list(range(1, min(n, timeline.DEFAULT_STEPS) + 1))

    # the chart: one bar segment per step part, with the brush named as the page reads it
    [chart] = app.get("vega_lite_chart")
    spec = json.loads(chart.proto.spec)
    assert any(p.get("name") == timeline.BRUSH and p["select"]["type"] == "interval" for p in spec["params"])
    assert list(chart.proto.selection_mode) == [timeline.BRUSH]

    # a brush from x=3.6 to x=7.2 holds the left edges (step - 0.4) of the bars of steps 4..7
    key = f"step_timeline_{req.request_id}"
    app.session_state[key] = {"selection": {timeline.BRUSH: {"start": [3.6, 7.2]}}}
    app.run()
    assert not app.exception, app.exception
    assert _row_numbers(app) == [4, 5, 6, 7]
    rows = re.findall(r'<div class="sv-row"><span class="sv-stepno">step \d+</span>.*?</div>', html_of(app))
    assert len(rows) == 4
    for row, step in zip(rows, req.steps[3:7]):  # the rows are those steps' chips, in order
        assert [r for r in re.findall(r'class="sv-chip sv-(\w+)"', row)] == [r for _, r in step_roles(step)]
    assert any("Step rows 4–7" in c.value for c in app.caption)

    app.session_state[key] = {"selection": {timeline.BRUSH: {"start": [n - 1.5, n + 3]}}}  # past the end
    app.run()
    assert _row_numbers(app) == [n - 1, n]

    app.session_state[key] = {"selection": {timeline.BRUSH: {}}}  # cleared (double-click)
    app.run()
    assert _row_numbers(app) == list(range(1, min(n, timeline.DEFAULT_STEPS) + 1))


def test_the_race_is_one_click_away_and_ends_on_the_speedup(app, entries):
    name = app.selectbox(key="run_file").value
    run = dict(entries)[name]
    rid = app.selectbox(key="request_id").value
    app.button(key="pg_race_open").click().run()
    assert not app.exception, app.exception
    html = html_of(app)
    assert len(re.findall(r'class="sv-lane( sv-lane-spec)?"', html)) == 2 and "baseline (no drafting)" in html
    assert race.spec_label(run) in html
    assert app.button(key="rec_race_play").label == "Pause"  # the click started it
    # while it plays, the browser moves it on: a script with the lanes' times, for the track drawn
    [script] = [h.proto.body for h in app.get("html") if "<script>" in h.proto.body]
    replay_id = re.search(r'const D = .*, id = "(\w+)", done = ', script).group(1)
    assert f'class="sv-replay sv-replay-{replay_id}"' in html_of(app)
    assert '"rec_race_done"' in script  # pressed by the replay at the finish line:
    app.button(key="rec_race_done").click().run()
    assert app.button(key="rec_race_play").label == "Race again"
    app.button(key="rec_race_play").click().run()  # and again from the start
    assert app.button(key="rec_race_play").label == "Pause"

    # single-step: pauses, and the race clock moves to the next recorded event
    pair = race.find_baseline(run, [e for e in entries if e[0] != name])
    the_race = race.race_for(pair, next(r for r in run.requests if r.request_id == rid), race.spec_label(run))
    app.button(key="rec_race_next").click().run()
    t = app.session_state["rec_race_t"]
    assert t == pytest.approx(the_race.next_event(0.0), abs=0.2)  # (plus the little it played before)
    assert app.button(key="rec_race_play").label == "Resume"
    assert not [h for h in app.get("html") if "<script>" in h.proto.body]  # paused: no replay in the browser
    clock = re.search(r"race clock <span class=\"sv-clock-t\">([\d.]+) s</span> of ([\d.]+) s", html_of(app))
    assert float(clock.group(2)) == pytest.approx(the_race.duration_s, abs=0.051)  # 2 decimals, 1 from 10 s

    app.select_slider(key="rec_race_speed").set_value(4.0).run()
    assert "replayed at 4x" in html_of(app)

    app.session_state["rec_race_t"] = the_race.duration_s  # the finish line
    app.run()
    html = html_of(app)
    assert 'class="sv-result"' in html
    assert f"finished this request {the_race.speedup:.2f}x faster" in html
    assert app.button(key="rec_race_play").label == "Race again"

    app.button(key="pg_race_close").click().run()
    assert not app.exception, app.exception
    assert app.selectbox(key="request_id").value == rid and app.button(key="pg_race_open")


def test_local_engine_offers_the_race_only_with_a_drafting_method(app):
    app.radio(key="pg_source").set_value(LOCAL).run()
    assert not app.exception, app.exception
    assert not app.button(key="pg_race").disabled  # ngram by default
    app.selectbox(key="pg_method").set_value("none").run()
    assert app.button(key="pg_race").disabled
