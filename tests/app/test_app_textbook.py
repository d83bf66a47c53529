"""AppTest: "From the formula to your run" on the Methods page, and its expander in the Playground."""


import pytest
from page_helpers import chart_figure, open_page

from specviz import textbook
from specviz.runfile import SAMPLE_RUNS_DIR, load_run
from specviz.sweep_files import list_sweep_files, load_sweep
from specviz.ui_textbook import EXAMPLE_RUN


@pytest.fixture(scope="module")
def methods():
    return open_page("app_pages/methods.py", timeout=240)  # the first run imports vLLM's config


def _table(at, column: str):
    found = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(found) == 1, [list(d.value.columns) for d in at.dataframe]
    return found[0]


def _metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def _chosen_sweep(at) -> textbook.SweepVsFormula:
    paths = {p.parent.name: p for p in list_sweep_files()}
    sweep = load_sweep(paths[at.selectbox(key="textbook_sweep").value])
    return textbook.sweep_vs_formula(sweep, at.selectbox(key="textbook_drafter").value,
                                     at.selectbox(key="textbook_k").value)


def test_the_section_shows_the_fitted_alpha_of_the_showcase_run(methods):
    assert "From the formula to your run" in [s.value for s in methods.subheader]
    assert methods.selectbox(key="textbook_run").value == EXAMPLE_RUN
    run = load_run(SAMPLE_RUNS_DIR / EXAMPLE_RUN)
    result = textbook.run_vs_formula(run)
    K = run.meta.num_speculative_tokens
    assert _metric(methods, "fitted α") == f"{result.alpha:.2f}"
    assert _metric(methods, f"formula E(k={K})") == f"{result.at(K).formula:.2f}"
    assert _metric(methods, f"measured at k={K}") == f"{result.measured_length:.2f}"
    assert any(textbook.over_promise_text(result) == m.value for m in methods.markdown)
    tokens = chart_figure(methods, "textbook_tokens_per_pass")
    measured = next(t for t in tokens["data"] if t["meta"]["role"] == "measured")
    assert measured["y"][-1] == pytest.approx(result.measured_length)
    title = tokens["layout"]["title"]["text"]
    for part in (f"vLLM {run.meta.vllm_version}", run.meta.device_name, f"prompt set '{run.meta.prompt_set}'",
                 f"concurrency {run.meta.concurrency}", f"max {run.meta.max_tokens} tokens"):
        assert part in title, part
    if run.meta.platform == "cpu":
        assert "CPU figures, not GPU figures" in title


def test_the_section_compares_the_formula_with_a_sweep_and_gives_break_even_alpha(methods):
    run = load_run(SAMPLE_RUNS_DIR / EXAMPLE_RUN)
    assert methods.selectbox(key="textbook_k").value == run.meta.num_speculative_tokens  # opens beside the run
    assert methods.selectbox(key="textbook_drafter").value.split()[0] == run.meta.method
    result = _chosen_sweep(methods)
    comparison = _table(methods, "formula speedup")
    assert list(comparison["concurrency"]) == [r.concurrency for r in result.rows]
    assert list(comparison["formula speedup"]) == pytest.approx([r.predicted_speedup for r in result.rows])
    assert list(comparison["measured speedup"]) == pytest.approx([r.measured_speedup for r in result.rows])
    assert list(comparison["c"]) == pytest.approx([r.draft_cost for r in result.rows])
    break_even = _table(methods, "k")
    assert list(break_even["k"]) == textbook.FORMULA_KS
    for r in result.rows:
        column = f"concurrency {r.concurrency} (c = {r.draft_cost:.2f})"
        expected = [textbook.break_even_alpha(k, r.draft_cost) for k in textbook.FORMULA_KS]
        assert list(break_even[column]) == ["never (c ≥ 1)" if a is None else f"{a:.2f}" for a in expected]
    speedup = chart_figure(methods, "textbook_speedup")
    formula = next(t for t in speedup["data"] if t["meta"]["role"] == "formula")
    assert formula["y"] == pytest.approx([r.predicted_speedup for r in result.rows])
    cell = load_sweep({p.parent.name: p for p in list_sweep_files()}[methods.selectbox(key="textbook_sweep").value]).cells[0]
    for key in ("textbook_speedup", "textbook_break_even"):
        title = chart_figure(methods, key)["layout"]["title"]["text"]
        for part in (f"vLLM {cell.vllm_version}", cell.device_name, f"prompt set '{cell.prompt_set}'",
                     f"max {cell.max_tokens} output tokens", "concurrency"):
            assert part in title.replace("<br><sup>", " · ").replace("</sup>", ""), (key, part)
    assert chart_figure(methods, "textbook_break_even")["layout"]["title"]["text"].startswith("Break-even α per k")


def test_the_section_shows_the_chosen_sweeps_notes_alone(methods):
    """Looking for the sweep closest to the run once printed every recorded sweep's notes above the chosen one's."""
    name = methods.selectbox(key="textbook_sweep").value
    notes = [c.value for c in methods.caption if c.value.startswith("Recording notes (")]
    sweep = load_sweep({p.parent.name: p for p in list_sweep_files()}[name])
    assert notes == [f"Recording notes ({name}): {sweep.notes}"], [n[:60] for n in notes]


def test_choosing_another_drafter_and_k_changes_the_comparison(methods):
    first = list(_table(methods, "formula speedup")["formula speedup"])
    drafters = methods.selectbox(key="textbook_drafter").options
    other_k = [k for k in methods.selectbox(key="textbook_k").options if k != methods.selectbox(key="textbook_k").value]
    if len(drafters) > 1:
        methods.selectbox(key="textbook_drafter").set_value(drafters[-1]).run()
    elif other_k:
        methods.selectbox(key="textbook_k").set_value(other_k[0]).run()
    else:
        pytest.skip("the recorded sweep has one drafter at one k")
    assert not methods.exception, methods.exception
    result = _chosen_sweep(methods)
    now = list(_table(methods, "formula speedup")["formula speedup"])
    assert now == pytest.approx([r.predicted_speedup for r in result.rows]) and now != pytest.approx(first)


def test_playground_has_the_compact_version_beside_the_recorded_run(app):
    name = app.selectbox(key="run_file").value
    run = load_run(SAMPLE_RUNS_DIR / name)
    assert run.meta.speculative_config is not None
    assert any(e.label.startswith("From the formula to this run") for e in app.expander)
    assert _metric(app, "fitted α") == f"{textbook.run_vs_formula(run).alpha:.2f}"
    chart_figure(app, "pg_textbook_tokens_per_pass")
