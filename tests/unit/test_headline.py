"""The first screen's headline: the measured result against the paired baseline, from the run files."""

from __future__ import annotations

import pytest
from conftest import html_of, make_run

from specviz import headline
from specviz.race import raced_against
from specviz.runfile import SAMPLE_RUNS_DIR, Request, list_run_files, load_run


def _req(rid: str, ids: list[int], seconds: float) -> Request:
    return Request(request_id=rid, prompt="p", output_token_ids=ids, output_text="x", start_time_s=0.0,
                   first_token_time_s=0.1, end_time_s=seconds, finish_reason="length")


def test_the_headline_names_the_workload_the_speedup_and_whether_the_text_is_the_same():
    base = make_run([_req("b", [1, 2, 3, 4], 2.0)], k=None, prompt_set="showcase-edit")
    spec = make_run([_req("s", [1, 2, 3, 4], 1.0)], k=3, prompt_set="showcase-edit")
    h = headline.headline(spec, base)  # 4 tokens in 1 s against 4 in 2 s
    assert h.text.startswith("On code editing, ngram k=3 produced the same text 2.00x faster than the target alone")
    assert "4.0 against 2.0 output tokens/s" in h.detail and "concurrency 1" in h.detail and h.faster
    parted = make_run([_req("s", [1, 2, 9, 4], 4.0)], k=3, prompt_set="odd-set")
    h = headline.headline(parted, base)
    assert h.text.startswith("On prompt set 'odd-set', ngram k=3 produced its text 2.00x slower than")
    assert "0 of 1 requests identical" in h.detail and "without logprobs" in h.detail and not h.faster
    other = _req("s", [1, 2, 3, 4], 1.0).model_copy(update={"prompt": "another prompt"})
    assert "produced its text" in headline.headline(make_run([other], k=3), base).text  # nothing to compare


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
