"""AppTest: the first screen opens on the headline computed from the run files; a baseline run says it is one."""

from __future__ import annotations

import pytest
from page_helpers import html_of

from specviz import headline
from specviz.race import raced_against
from specviz.runfile import SAMPLE_RUNS_DIR, list_run_files, load_run


def test_the_app_opens_on_the_headline_computed_from_the_run_files(app):
    entries = [(str(p.relative_to(SAMPLE_RUNS_DIR)), load_run(p)) for p in list_run_files()]
    name = app.selectbox(key="run_file").value
    spec, runs = dict(entries)[name], dict(entries)
    from specviz.race import find_baseline
    pair = find_baseline(spec, [e for e in entries if e[0] != name])
    h = headline.headline(spec, runs[pair.baseline_name])
    html = html_of(app)
    assert f'<div class="sv-headline-text">{h.text}</div>' in html
    assert any("vLLM's own spec_decode counters" in (m.help or "") for m in app.metric)


@pytest.mark.parametrize("name", ["showcase/baseline-chat-c1.json.gz"])
def test_a_baseline_run_says_it_is_the_baseline(app, name):
    app.selectbox(key="run_file").set_value(name).run()
    assert not app.exception, app.exception
    captions = " ".join(c.value for c in app.caption)
    assert "No recorded baseline" not in captions
    assert "This run is a baseline (no drafting)" in captions
    base = load_run(SAMPLE_RUNS_DIR / name)
    others = [(str(p.relative_to(SAMPLE_RUNS_DIR)), load_run(p)) for p in list_run_files()]
    racers = raced_against(base, [e for e in others if e[0] != name])
    assert racers and all(r in captions for r in racers)  # the draft model and EAGLE-3 chat runs
    assert "The baseline for chat: the target alone" in html_of(app)
