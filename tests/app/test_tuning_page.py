"""AppTest: the Tuning page opens on the sample sweep, exports the recommendation (not the slider), predicts at k."""

import pytest
from page_helpers import chart_figure, open_page, sample_sweep

from specviz import prediction, schedule, sweep_files
from specviz.charts.tuning import gap_text
from specviz.config import describe_spec
from specviz.serve_command import serve_command_text
from specviz.sweep import BASELINE
from specviz.sweep_files import load_confirmation, load_sweep
from specviz.sweep_table import sweep_table

TUNING = "app_pages/tuning.py"


def _tune_sample():
    """The sample sweep's folder name, the sweep, and the drafter the page opens on."""
    name, sweep = sample_sweep()
    return name, sweep, prediction.fixed_k_drafters(sweep)[0]


def _tune_keys(name: str, drafter: str, recorded_k: int) -> tuple[str, str, str]:
    """The Tuning page's drafter, recorded-k and slider keys: they carry the sweep (and drafter) they belong to."""
    return f"tune_drafter:{name}", f"tune_recorded_k:{name}:{drafter}", f"tune_k:{name}:{drafter}:{recorded_k}"


def test_tuning_page_opens_on_the_sample_sweep_with_its_controls():
    at = open_page(TUNING)
    name, sweep, drafter = _tune_sample()
    ks = prediction.recorded_ks(sweep, drafter)
    drafter_key, recorded_key, k_key = _tune_keys(name, drafter, max(ks))
    assert at.selectbox(key="tune_sweep").value == name
    assert at.selectbox(key=drafter_key).value == drafter
    assert at.selectbox(key=recorded_key).value == max(ks)
    assert at.slider(key=k_key).value == max(ks)
    assert len(at.dataframe) == 2  # the recommendations, the table at k (AppTest keeps no key for these)
    assert list(at.dataframe[0].value["concurrency"]) == sorted({c.concurrency for c in sweep.cells})
    assert "predicted tok/s" in at.dataframe[1].value.columns
    cell = sweep.cells[0]
    for key in ("tune_chart_schedule", "tune_chart_tput", "tune_chart_al"):
        title = chart_figure(at, key)["layout"]["title"]["text"]
        for part in (f"vLLM {cell.vllm_version}", cell.device_name, f"prompt set '{cell.prompt_set}'",
                     f"max {cell.max_tokens} output tokens", "concurrency"):
            assert part in title, (key, part)


def test_the_tuning_page_exports_the_recommendation_not_the_slider():
    at = open_page(TUNING)
    name, sweep, drafter = _tune_sample()
    pred = prediction.predict(sweep, drafter)
    folder = sweep_files.SWEEPS_DIR / name
    result = schedule.tuned(pred, sweep, load_confirmation(folder, drafter), sweep_files.load_head_to_heads(folder, drafter))
    exported = serve_command_text(sweep.grid.target_model, result.exported, trace=False)
    _, _, k_key = _tune_keys(name, drafter, max(prediction.recorded_ks(sweep, drafter)))
    for k in (1, 2):
        at.slider(key=k_key).set_value(k).run()
        assert not at.exception, at.exception
        assert [c.value for c in at.code if c.value.startswith("vllm serve")] == [exported]
    recommended = at.dataframe[0].value
    picked = result.confirmed_by
    assert [v.split(":")[0] for v in recommended[f"confirmed ({picked})"]] == [f"k={r.confirmed_k}" for r in result.rows]
    assert all(v != "not measured" for v in recommended[f"baseline ({picked})"])  # beside every figure
    fig = chart_figure(at, "tune_chart_schedule")
    steps = next(t for t in fig["data"] if t["meta"]["role"] == "schedule_k")
    assert steps["y"] == [result.schedule.k_at(b) if result.schedule else 0 for b in range(1, len(steps["y"]) + 1)]
    labels = next(t for t in fig["data"] if t["meta"]["role"] == "schedule_k_label")  # k named in the k panel
    assert labels["text"] == [f"k={result.schedule.k_at(c) if result.schedule else 0}" for c in labels["x"]]
    statics = {t["meta"]["k"] for t in fig["data"] if t["meta"]["role"] == "static"}
    # one measurement set: what was measured beside the schedule when there is one, else the sweep's cells
    assert statics == (set(result.static_beside) if len(result.static_beside) > 1
                       else {m.num_speculative_tokens for m in pred.measured})


def test_the_drafter_selector_resets_when_the_sweep_changes():
    """Found once: eagle3 chosen on the chat sweep stayed shown after switching to the code sweep (ngram only),
    while the page computed ngram."""
    sweeps = {p.parent.name: prediction.fixed_k_drafters(load_sweep(p)) for p in sweep_files.list_sweep_files()}
    pairs = [(a, b) for a in sweeps for b in sweeps if sweeps[a][-1] not in sweeps[b]]
    assert pairs, "needs a recorded sweep whose last drafter another sweep lacks"  # smollm2-chat's eagle3, smollm2-code
    first, second = pairs[0]
    at = open_page(TUNING)
    at.selectbox(key="tune_sweep").set_value(first).run()
    at.selectbox(key=f"tune_drafter:{first}").set_value(sweeps[first][-1]).run()
    at.selectbox(key="tune_sweep").set_value(second).run()
    assert not at.exception, at.exception
    shown = at.selectbox(key=f"tune_drafter:{second}").value
    assert shown == sweeps[second][0]
    assert shown in chart_figure(at, "tune_chart_tput")["layout"]["title"]["text"]  # the page computes what it shows


def test_moving_tune_k_changes_the_predicted_numbers():
    at = open_page(TUNING)
    name, sweep, drafter = _tune_sample()
    pred = prediction.predict(sweep, drafter)
    _, _, k_key = _tune_keys(name, drafter, max(prediction.recorded_ks(sweep, drafter)))
    seen = {}
    for k in (1, max(prediction.recorded_ks(sweep, drafter))):
        at.slider(key=k_key).set_value(k).run()
        assert not at.exception, at.exception
        table = at.dataframe[1].value
        seen[k] = list(table["predicted tok/s"])
        for row in table.to_dict("records"):
            expected = pred.at(row["concurrency"], k)
            assert row["predicted tok/s"] == pytest.approx(expected.output_tokens_per_s)
            assert row["acceptance length"] == pytest.approx(expected.mean_acceptance_length)
            assert row["tokens per pass"] == pytest.approx(expected.tokens_per_step)
    assert seen[1] != seen[max(seen)]


def test_tuning_chart_measured_markers_are_the_sweep_table():
    at = open_page(TUNING)
    _, sweep, drafter = _tune_sample()
    table = sweep_table(sweep)
    fig = chart_figure(at, "tune_chart_tput")
    measured = [t for t in fig["data"] if t["meta"]["role"] == "measured"]
    assert sorted(t["meta"]["concurrency"] for t in measured) == sorted(set(table.concurrency))
    for trace in measured:
        rows = table[(table.concurrency == trace["meta"]["concurrency"]) & table.schedule.isna()
                     & table.drafter.isin([drafter, BASELINE])].sort_values("num_speculative_tokens")
        assert trace["x"] == list(rows.num_speculative_tokens)
        assert trace["y"] == pytest.approx(list(rows.output_tokens_per_s))
    # the gap is shown: each measured cell that was predicted but not used carries its relative error
    pred = prediction.predict(sweep, drafter)
    checked = [m for m in pred.measured if not m.used_for_prediction and m.relative_error is not None]
    labels = [t.strip("\u00a0") for tr in measured for t in tr["text"] if t]  # spaced clear of the error bars
    assert labels == [gap_text(m.relative_error) for m in checked]
    assert gap_text(-0.003) == "±0%" and gap_text(0.043) == "+4%" and gap_text(-0.1) == "-10%"
    al = chart_figure(at, "tune_chart_al")
    roles = {t["meta"]["role"] for t in al["data"]}
    assert {"predicted", "leviathan", "measured"} <= roles


def test_tuning_tables_say_not_measured_for_a_k_the_sweep_did_not_measure():
    gaps = [(p.parent.name, sweep, drafter, unmeasured) for p in sweep_files.list_sweep_files()
            for sweep in [load_sweep(p)] for drafter in prediction.fixed_k_drafters(sweep)
            if (ks := prediction.recorded_ks(sweep, drafter))
            and (unmeasured := [k for k in range(1, max(ks)) if k not in ks])]
    assert gaps, "no recorded sweep leaves a k unmeasured below its largest"  # smollm2-chat: k = 1, 3, 5
    name, sweep, drafter, unmeasured = gaps[0]
    ks = prediction.recorded_ks(sweep, drafter)
    at = open_page(TUNING)
    at.selectbox(key="tune_sweep").set_value(name).run()
    at.selectbox(key=f"tune_drafter:{name}").set_value(drafter).run()
    at.slider(key=_tune_keys(name, drafter, max(ks))[2]).set_value(unmeasured[0]).run()
    assert not at.exception, at.exception
    table = at.dataframe[1].value
    for column in ("measured tok/s (sweep)", "gap"):
        assert list(table[column]) == ["not measured"] * len(table), column


def test_the_slider_stops_at_the_recorded_k_it_predicts_from():
    at = open_page(TUNING)
    name, sweep, drafter = _tune_sample()
    ks = prediction.recorded_ks(sweep, drafter)
    if len(ks) < 2:
        pytest.skip("the sample sweep has one k only")
    _, recorded_key, _ = _tune_keys(name, drafter, ks[0])
    at.selectbox(key=recorded_key).set_value(ks[0]).run()
    assert not at.exception, at.exception
    slider = at.slider(key=_tune_keys(name, drafter, ks[0])[2])
    assert slider.value == ks[0] and slider.max == max(ks[0], 2)
    assert not [w for w in at.warning if "above the recorded" in w.value]


def test_tuning_page_without_sweeps_says_how_to_record_one(monkeypatch):
    monkeypatch.setattr(sweep_files, "list_sweep_files", lambda: [])
    at = open_page(TUNING)
    assert any("No recorded sweep" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_the_tuning_page_says_where_the_measured_schedule_falls_short():
    # the chat sweep's EAGLE-3 head-to-head: where its k is 0 the idle drafter costs it against no drafting
    at = open_page(TUNING)
    at.selectbox(key="tune_sweep").set_value("smollm2-chat").run()
    at.selectbox(key="tune_drafter:smollm2-chat").set_value("eagle3 smollm2-135m-eagle3").run()
    assert not at.exception, at.exception
    [warning] = [w.value for w in at.warning if "schedule measured as a row" in w.value]
    assert "16: the schedule (k=0) 227.1 (215.9-238.4) against no drafting 240.7 (238.7-243.3)" in warning
    assert "schedule 646.2, no drafting 639.7" in warning and "at or above every single static config" in warning
    assert "schedule (head-to-head)" in at.dataframe[0].value.columns
    # better than no drafting at c=1 and 2 and summed (639.7 under its maxes summed): the schedule stays
    assert not [i for i in at.info if "So the export is" in i.value]
    assert [c.value for c in at.code][0].count("num_speculative_tokens_per_batch_size") == 1

    # the float32 chat sweep's EAGLE-3 tune picked k=1 where no drafting was best: its idle row was slower still
    at.selectbox(key="tune_sweep").set_value("smollm2-chat-f32").run()
    at.selectbox(key="tune_drafter:smollm2-chat-f32").set_value("eagle3 smollm2-135m-eagle3").run()
    assert not at.exception, at.exception
    [warning] = [w.value for w in at.warning if "schedule measured as a row" in w.value]
    assert "16: the schedule (k=1) 102.8 (97.2-103.4) against no drafting 109.6 (108.4-111.0)" in warning
    assert ("A k=0 range would not close that gap: in the confirmation the drafter loaded at k=0 measured 69.2 "
            "(67.4-69.2) at concurrency 8 against k=1's 74.3 (73.1-74.5); 99.4 (98.3-102.4) at concurrency 16") in warning
    assert "schedule 274.8, no drafting 269.3, static k=1 269.6, static k=3 234.8" in warning
    assert "at or above every single static config" in warning
    assert '"num_speculative_tokens_per_batch_size": [[1, 1, 3], [2, 16, 1]]' in [c.value for c in at.code][0]
    [export] = [m.value for m in at.markdown if m.value.startswith("**Export:**")]
    assert "take the k of the next one up" in export  # how the ranges read, said only for a schedule

    # its ngram tune: the picks' schedule drafts at 1-2 only and summed below no drafting, which is exported
    at.selectbox(key="tune_drafter:smollm2-chat-f32").set_value("ngram lookup 2-4").run()
    assert not at.exception, at.exception
    [warning] = [w.value for w in at.warning if "schedule measured as a row" in w.value]
    assert "schedule 259.5, no drafting 275.7, static k=3 253.6" in warning
    [reason] = [i.value for i in at.info if "So the export is" in i.value]
    assert "no drafting 275.7 (272.2-277.2) against the picks' schedule 259.5 (255.7-264.8)" in reason
    [export] = [m.value for m in at.markdown if m.value.startswith("**Export:**")]
    assert export.startswith("**Export:** no drafting. One k everywhere")
    assert [c.value for c in at.code][0].strip().endswith("SmolLM2-135M-Instruct")  # vllm serve, no speculative config
    at.selectbox(key="tune_sweep").set_value("smollm2-chat").run()

    # the chat sweep's ngram confirmation: its schedule was nowhere better than no drafting, which is exported
    at.selectbox(key="tune_drafter:smollm2-chat").set_value("ngram lookup 2-4").run()
    assert not at.exception, at.exception
    [reason] = [i.value for i in at.info if "So the export is" in i.value]
    assert "no drafting served measurably more in total" in reason and "the export is no drafting" in reason
    assert "head-to-head" in reason
    assert [c.value for c in at.code][0].strip().endswith("SmolLM2-135M-Instruct")  # vllm serve, no speculative config


def _first_screen(at) -> list:
    """The main area's elements in page order, up to the first subheader: what a reader sees before scrolling."""
    shown = []
    for el in list(at.main)[1:]:
        if type(el).__name__ == "Subheader":
            break
        shown.append(el)
    return shown


def test_the_first_screen_answers_first_for_every_recorded_drafter():
    """Issue 42: the export (copyable), one sentence on how sure it is, and the chart that shows why come first,
    once; no recording notes above them. Checked for every recorded sweep and drafter."""
    at = open_page(TUNING)
    for path in sweep_files.list_sweep_files():
        name, sweep = path.parent.name, load_sweep(path)
        at.selectbox(key="tune_sweep").set_value(name).run()
        for drafter in prediction.fixed_k_drafters(sweep):
            at.selectbox(key=f"tune_drafter:{name}").set_value(drafter).run()
            assert not at.exception, at.exception
            pred = prediction.predict(sweep, drafter)
            result = schedule.tuned(pred, sweep, load_confirmation(path.parent, drafter),
                                    sweep_files.load_head_to_heads(path.parent, drafter))
            kinds = [type(el).__name__ for el in _first_screen(at)]
            values = [str(getattr(el, "value", "")) for el in _first_screen(at)]
            assert kinds[:4] == ["Title", "Markdown", "Code", "Markdown"], (name, drafter, kinds)
            assert values[1] == f"#### Serve: {describe_spec(result.exported)}"
            assert values[2] == serve_command_text(sweep.grid.target_model, result.exported, trace=False)
            assert values[3].startswith("**How sure:** in the ") and "within each other's spread" in values[3] \
                or "leads clear of the others' spread" in values[3], values[3]
            assert "runs per config" in values[3]
            assert _first_screen(at)[4].proto.id.endswith("-tune_chart_schedule"), (name, drafter)
            assert not any("Recording notes" in v for v in values)
            assert [c.value for c in at.code].count(values[2]) == 1  # once


def test_the_schedule_chart_draws_one_measurement_set_named_in_its_legend():
    """k=4 at concurrency 8 once measured 119.6, 116.5 and 114.8 on one page: the chart now draws the configs
    measured beside the schedule (the head-to-head), each named with where it was measured, k light to dark."""
    at = open_page(TUNING)
    fig = chart_figure(at, "tune_chart_schedule")
    static = [t for t in fig["data"] if t["meta"]["role"] == "static"]
    assert {t["meta"]["measured_in"] for t in static} == {"head-to-head"}
    assert all(t["name"].endswith("measured in the head-to-head") for t in static)
    colours = [t["line"]["color"] for t in sorted(static, key=lambda t: t["meta"]["k"]) if t["meta"]["k"]]
    assert len(set(colours)) == len(colours)
    explore = [c.value for c in at.caption if c.value.startswith("The stars mark the predicted best k")]
    assert explore and "the export above serves" in explore[0]  # says why its stars differ from the export
