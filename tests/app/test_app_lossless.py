"""AppTest: the app says whether drafting kept the target's output — the shipped showcase (float32) is
identical to its baseline; a bfloat16 recording that parts has the token outlined and the reason
given; the Methods page's "Is it lossless?" table is computed from the showcase recordings."""

from __future__ import annotations

import pytest
from page_helpers import html_of
from streamlit.testing.v1 import AppTest

from specviz import race, showcase
from specviz.divergence import compare_runs
from specviz.runfile import SAMPLE_RUNS_DIR, list_run_files, load_run

EPYC_NGRAM = "showcase-bf16-epyc/ngram-k3-edit-c1.json.gz"  # bfloat16, recorded before runs kept logprobs
XEON_K8 = "showcase-bf16-xeon-k8-c4/ngram-k8-c4.json.gz"  # bfloat16 with logprobs: parts at ties


@pytest.fixture(scope="module")
def entries():
    return [(str(p.relative_to(SAMPLE_RUNS_DIR)), load_run(p)) for p in list_run_files()]


def test_the_shipped_showcase_runs_are_float32_and_identical_to_their_baselines(entries):
    shipped = [(n, r) for n, r in entries if n.startswith("showcase/")]
    speculative = [r for _, r in shipped if race.is_speculative(r)]
    assert len(speculative) == 3 and all(r.meta.dtype == "float32" for _, r in shipped)
    for run in speculative:
        pair = race.find_baseline(run, shipped)
        comparison = compare_runs(pair.baseline, run)
        assert comparison.identical == len(run.requests) == 2, comparison.summary()
        assert all(r.top_logprobs for r in run.requests)


def test_the_opening_run_says_same_output_and_the_race_ends_on_it(app, entries):
    name = app.selectbox(key="run_file").value
    assert name == showcase.opening_run(entries) and name.startswith("showcase/")
    shown = next(r for r in dict(entries)[name].requests if r.request_id == app.selectbox(key="request_id").value)
    assert any("Same output as without drafting" in s.value
               and f"identical output ({len(shown.output_token_ids)} tokens)" in s.value for s in app.success)
    assert ' sv-diverge" title=' not in html_of(app)  # no token outlined
    rid = app.selectbox(key="request_id").value
    app.button(key="pg_race_open").click().run()
    run = dict(entries)[name]
    pair = race.find_baseline(run, [e for e in entries if e[0] != name])
    the_race = race.race_for(pair, next(r for r in run.requests if r.request_id == rid), race.spec_label(run))
    app.session_state["rec_race_t"] = the_race.duration_s
    app.run()
    html = html_of(app)
    assert f"Identical output, {the_race.passes_saved} fewer target passes" in html


def test_a_bfloat16_recording_that_parts_marks_the_token_and_says_why(app, entries):
    run = dict(entries)[EPYC_NGRAM]
    pair = race.find_baseline(run, [e for e in entries if e[0] != EPYC_NGRAM])
    assert pair is not None and pair.baseline.meta.dtype == run.meta.dtype  # paired in its own folder, not float32's
    app.selectbox(key="run_file").set_value(EPYC_NGRAM).run()
    assert not app.exception, app.exception
    errors = " ".join(e.value for e in app.error)
    assert "The outputs part at token" in errors and "recorded no logprobs" in errors
    html = html_of(app)
    assert html.count(' sv-diverge" title=') >= 2  # the token, outlined in the output and in its step row
    assert 'title="the outputs part here: the baseline wrote' in html


def test_a_bfloat16_tie_is_shown_as_a_tie_with_both_candidates(app):
    app.selectbox(key="run_file").set_value(XEON_K8).run()
    assert not app.exception, app.exception
    notes = " ".join(i.value for i in app.info)
    assert "The outputs part at token" in notes and "a tie in bfloat16" in notes and "scored" in notes
    assert not app.error
    assert 'title="the outputs part here: the baseline wrote' in html_of(app)


def test_methods_page_tells_whether_it_is_lossless_from_the_recordings():
    at = AppTest.from_file("../../app.py", default_timeout=60)
    at.run()
    at.switch_page("app_pages/methods.py").run()
    assert not at.exception, at.exception
    assert any(h.value == "Is it lossless?" for h in at.subheader)
    # (AppTest keeps no key for a dataframe without selections: find the table by its columns)
    table = next(d.value for d in at.dataframe if "identical output" in d.value.columns)
    shipped = table[table.runs == "showcase/"]
    assert len(shipped) == 3 and set(shipped["identical output"]) == {"2 of 2"}
    assert set(shipped["dtype"]) == {"float32"}
    epyc = table[table.runs == "showcase-bf16-epyc/"]
    assert len(epyc) == 3 and set(epyc["identical output"]) == {"0 of 2"}
    assert all(text.count("not explained") == 2 for text in epyc["where they part"])
    ties = table[table.runs == "showcase-bf16-xeon-k8-c4/"]
    assert len(ties) == 1 and ties["identical output"].iloc[0] == "0 of 8"
    assert ties["where they part"].iloc[0].count(": a tie") == 8
