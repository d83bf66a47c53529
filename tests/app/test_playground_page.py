"""AppTest: every page opens on the embedded default and shows what the run file holds."""

import re

import pytest
from conftest import html_of
from streamlit.testing.v1 import AppTest

from specviz.render import output_roles, step_roles, step_summary
from specviz.runfile import SAMPLE_RUNS_DIR, list_run_files, load_run
from specviz.showcase import example_step, opening_request


def test_recorded_run_opens_with_its_controls(app):
    assert list_run_files(), "sample_runs/ must hold at least one recorded run"
    for key in ("run_file", "request_id"):
        assert app.selectbox(key=key) is not None
    assert [m.label for m in app.metric][:2] == ["engine steps",
                                                 "mean acceptance length"]


def test_every_sample_run_renders_the_counts_in_its_file(app):
    seen = set()
    for path in list_run_files():
        run = load_run(path)
        app.selectbox(key="run_file").set_value(str(path.relative_to(SAMPLE_RUNS_DIR))).run()
        assert not app.exception, (path.name, app.exception)
        req = run.requests[opening_request(run)]  # the view opens on the request that shows drafting best
        assert app.selectbox(key="request_id").value == req.request_id
        html = html_of(app)
        roles = [r for s in req.steps[:60] for _, r in step_roles(s)]
        out_roles = [r for _, r in output_roles(req)]
        ex = example_step(req)
        example = [r for _, r in step_roles(req.steps[ex])] if ex is not None else []
        for role in ("accepted", "rejected", "correction", "discarded", "bonus", "plain"):
            # each role appears once in the legend, in the example step, then in the output and the shown steps
            expected = 1 + example.count(role) + out_roles.count(role) + roles.count(role)
            assert len(re.findall(f'class="sv-chip sv-{role}[" ]', html)) == expected, (path.name, role)
        seen |= set(roles)
    assert seen == {"accepted", "rejected", "correction", "discarded", "bonus", "plain"}


def test_playground_opens_on_a_recorded_run_and_offers_every_source(app):
    assert app.radio(key="pg_source").value == "Recorded run"
    assert app.radio(key="pg_source").options == ["Recorded run", "Local engine (specviz starts it)",
                                                  "vLLM server at a URL"]


def test_attach_refuses_a_server_that_is_not_there(app):
    from specviz.serving.local import free_port

    app.radio(key="pg_source").set_value("vLLM server at a URL").run()
    app.text_input(key="pg_url").set_value(f"http://127.0.0.1:{free_port()}")
    app.button(key="pg_connect").click().run()
    assert not app.exception, app.exception
    assert any("cannot reach a vLLM server" in e.value for e in app.error)


def test_playground_local_engine_controls_without_an_engine(app):
    at = app
    at.radio(key="pg_source").set_value("Local engine (specviz starts it)").run()
    assert not at.exception, at.exception
    assert at.text_area(key="pg_prompt").value == "The weather today is"
    assert at.text_input(key="pg_model").value.endswith("SmolLM2-135M-Instruct")
    assert at.selectbox(key="pg_method").value == "ngram"
    assert at.slider(key="pg_k").value == 3
    assert at.button(key="pg_start") and at.button(key="pg_stop")
    assert not at.button(key="pg_start").disabled


def test_step_through_walks_one_step_at_a_time(app):
    ngram = next(p for p in list_run_files() if "ngram" in p.name)
    app.selectbox(key="run_file").set_value(str(ngram.relative_to(SAMPLE_RUNS_DIR))).run()  # "showcase/..."
    assert 'class="sv-example"' in html_of(app)  # the example step, until presenting
    app.toggle(key="step_through").set_value(True).run()
    assert not app.exception, app.exception
    run = load_run(ngram)
    req = run.requests[opening_request(run)]
    first = example_step(req) + 1  # opens on a step that shows speculation, not on the prefill
    assert app.slider(key="step_at").value == first and req.steps[first - 1].num_accepted > 0
    assert 'class="sv-example"' not in html_of(app)  # one step number on screen: the presenter's
    assert [m.value for m in app.markdown if m.value.startswith("##### Step ")] == [
        f"##### Step {first} of {len(req.steps)}: {step_summary(req.steps[first - 1])}"]
    app.button(key="step_next").click().run()
    app.button(key="step_next").click().run()
    assert app.slider(key="step_at").value == first + 2
    app.button(key="step_prev").click().run()
    assert app.slider(key="step_at").value == first + 1
    [keys] = [h.proto.body for h in app.get("html")]  # the arrow keys press these buttons in a browser
    assert '"step_prev"' in keys and '"step_next"' in keys and "keydown" in keys


# ---- throughput page -------------------------------------------------------------------------------

import json  # noqa: E402

from specviz import tuning  # noqa: E402
from specviz.references import MINIMAX_M3_EAGLE3_SPEED_BENCH  # noqa: E402
from specviz.sweep import BASELINE, load_sweep, save_sweep  # noqa: E402
from specviz.sweep_table import TABLE_COLUMNS, sweep_table  # noqa: E402


def _throughput_page() -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=60)
    at.switch_page("app_pages/throughput.py").run()
    assert not at.exception, at.exception
    return at


def _chart(at: AppTest, key: str) -> dict:
    """The figure JSON of the plotly chart placed with `key`."""
    found = [c for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}")]
    assert len(found) == 1, (key, [c.proto.id for c in at.get("plotly_chart")])
    return json.loads(found[0].proto.spec)


def _sample_sweep():
    files = tuning.list_sweep_files()
    assert files, "sample_runs/sweeps/ must hold at least one recorded sweep"
    return files[0].parent.name, load_sweep(files[0])


def test_throughput_page_opens_on_the_sample_sweep_with_its_controls():
    at = _throughput_page()
    name, sweep = _sample_sweep()
    assert at.selectbox(key="tp_sweep").value == name
    assert at.selectbox(key="tp_compare").value == "none"
    assert at.selectbox(key="tp_concurrency").value == min(sweep.grid.concurrencies)
    assert at.selectbox(key="tp_concurrency").options == [str(c) for c in sorted(sweep.grid.concurrencies)]
    assert at.selectbox(key="tp_prompt_set").value == sweep.cells[0].prompt_set
    assert at.selectbox(key="tp_position_config") is not None
    assert at.checkbox(key="tp_show_reference").value is False
    assert at.toggle(key="tp_best_k").value is False
    assert [b.key for b in at.get("download_button")] == ["tp_csv"]
    assert len(at.dataframe) == 1  # (AppTest keeps no key for a dataframe without selections)
    assert list(at.dataframe[0].value.columns) == TABLE_COLUMNS
    assert len(at.dataframe[0].value) == len(sweep.cells)
    for key in ("tp_chart_tput_k_a", "tp_chart_speedup_a", "tp_chart_al_k_a", "tp_chart_positions_a",
                "tp_chart_latency_a"):
        title = _chart(at, key)["layout"]["title"]["text"]
        assert f"vLLM {sweep.cells[0].vllm_version}" in title and sweep.cells[0].device_name in title, key
    if all(c.platform == "cpu" for c in sweep.cells):
        assert "CPU figures" in _chart(at, "tp_chart_tput_k_a")["layout"]["title"]["text"]


def test_throughput_vs_k_chart_shows_the_table_at_the_chosen_concurrency():
    at = _throughput_page()
    _, sweep = _sample_sweep()
    table = sweep_table(sweep)
    for concurrency in sorted(sweep.grid.concurrencies):
        at.selectbox(key="tp_concurrency").set_value(concurrency).run()
        assert not at.exception, at.exception
        fig = _chart(at, "tp_chart_tput_k_a")
        rows = table[table.concurrency == concurrency]
        for drafter in {d for d in rows.drafter if d != BASELINE}:
            expected = rows[rows.drafter == drafter].sort_values("num_speculative_tokens")
            trace = next(t for t in fig["data"] if t["meta"].get("drafter") == drafter)  # named short: "draft"
            assert trace["x"] == [int(k) for k in expected.num_speculative_tokens]
            assert trace["y"] == pytest.approx(list(expected.output_tokens_per_s))
        baseline = next(t for t in fig["data"] if t["meta"]["role"] == "baseline")
        expected_base = float(rows[rows.drafter == BASELINE].output_tokens_per_s.iloc[0])
        assert baseline["y"] == pytest.approx([expected_base, expected_base])
        speedup = _chart(at, "tp_chart_speedup_a")
        for trace in (t for t in speedup["data"] if t["meta"]["role"] == "measured"):
            k = trace["meta"]["k"]
            expected = table[(table.drafter == trace["meta"]["drafter"]) & (table.num_speculative_tokens == k)]
            assert trace["y"] == pytest.approx(list(expected.sort_values("concurrency").speedup))


def test_published_reference_appears_only_when_asked_for():
    at = _throughput_page()
    roles = [t["meta"]["role"] for t in _chart(at, "tp_chart_positions_a")["data"]]
    assert roles == ["measured"]
    at.checkbox(key="tp_show_reference").check().run()
    assert not at.exception, at.exception
    data = _chart(at, "tp_chart_positions_a")["data"]
    assert [t["meta"]["role"] for t in data] == ["measured", "reference"]
    ref = data[1]
    assert ref["y"] == MINIMAX_M3_EAGLE3_SPEED_BENCH.acceptance_rate_per_pos
    assert ref["name"].startswith("published reference, not measured here")
    assert any("2026-07-13" in c.value for c in at.caption)
    at.checkbox(key="tp_show_reference").uncheck().run()
    assert [t["meta"]["role"] for t in _chart(at, "tp_chart_positions_a")["data"]] == ["measured"]


def test_throughput_page_compares_two_sweeps(tmp_path, monkeypatch):
    name, sweep = _sample_sweep()
    other = sweep.model_copy(update={"cells": [c.model_copy(update={"prompt_set": "chat"}) for c in sweep.cells]})
    other_path = save_sweep(other, tmp_path / "other-chat" / "sweep.json")
    sample_path = tuning.list_sweep_files()[0]
    monkeypatch.setattr(tuning, "list_sweep_files", lambda: [sample_path, other_path])
    at = _throughput_page()
    assert at.selectbox(key="tp_compare").options == ["none", "other-chat"]
    at.selectbox(key="tp_compare").set_value("other-chat").run()
    assert not at.exception, at.exception
    a, b = _chart(at, "tp_chart_tput_k_a"), _chart(at, "tp_chart_tput_k_b")
    assert "prompt set 'chat'" in b["layout"]["title"]["text"]
    assert [t["y"] for t in a["data"]] == [t["y"] for t in b["data"]]  # same cells, other prompt set name
    by_set = _chart(at, "tp_chart_prompt_sets")
    assert sorted(t["name"] for t in by_set["data"]) == sorted(
        [f"{sweep.cells[0].prompt_set} · {name}", "chat · other-chat"])
    assert [b.key for b in at.get("download_button")] == ["tp_csv", "tp_csv_compare"]


def test_throughput_page_without_sweeps_says_how_to_record_one(monkeypatch):
    monkeypatch.setattr(tuning, "list_sweep_files", lambda: [])
    at = _throughput_page()
    assert any("No recorded sweeps" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_methods_page_walks_the_weather_step_and_exports_a_config():
    from specviz.walkthrough import PHASES

    at = AppTest.from_file("../app.py", default_timeout=240)  # the first run imports vLLM's config
    at.switch_page("app_pages/methods.py").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="methods_method").value == "ngram"
    assert at.slider(key="methods_k").value == 3
    assert at.text_input(key="methods_target").value == "Qwen/Qwen3-8B"
    assert at.text_input(key="methods_draft") is not None
    assert at.select_slider(key="methods_phase").value == PHASES[0]
    assert any("--speculative-config" in c.value for c in at.code)

    before = html_of(at)
    at.select_slider(key="methods_phase").set_value(PHASES[3]).run()
    assert not at.exception, at.exception
    after = html_of(at)
    assert after != before
    assert 'class="sv-chip sv-correction"' in after and 'class="sv-chip sv-correction"' not in before

    # choosing a method fills in the example pair from vLLM's docs; the export follows
    at.selectbox(key="methods_method").set_value("eagle3").run()
    assert not at.exception, at.exception
    assert at.text_input(key="methods_draft").value == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert any('"method": "eagle3"' in c.value and "vllm serve meta-llama/Llama-3.1-8B-Instruct" in c.value
               for c in at.code)
    # a method that needs a draft checkpoint, without one: SpecConfig's error, no command
    at.text_input(key="methods_draft").set_value("").run()
    assert any("needs 'model'" in e.value for e in at.error)
    assert not any("--speculative-config" in c.value for c in at.code)


# ---- tuning page ---------------------------------------------------------------------------------

from specviz import schedule as _schedule  # noqa: E402
from specviz import tuning as _tuning  # noqa: E402
from specviz.sweep import BASELINE as _BASELINE  # noqa: E402
from specviz.sweep import load_confirmation as _load_confirmation  # noqa: E402
from specviz.sweep import load_sweep as _load_sweep  # noqa: E402
from specviz.sweep_table import sweep_table as _sweep_table  # noqa: E402
from specviz.tuning import serve_command as _serve_command  # noqa: E402


def _tune_page() -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=60)
    at.switch_page("app_pages/tuning.py").run()
    assert not at.exception, at.exception
    return at


def _tune_chart(at: AppTest, key: str) -> dict:
    found = [c for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}")]
    assert len(found) == 1, (key, [c.proto.id for c in at.get("plotly_chart")])
    return json.loads(found[0].proto.spec)


def _tune_sample():
    files = _tuning.list_sweep_files()
    assert files, "sample_runs/sweeps/ must hold at least one recorded sweep"
    sweep = _load_sweep(files[0])
    return files[0].parent.name, sweep, _tuning.drafters(sweep)[0]


def _tune_keys(name: str, drafter: str, recorded_k: int) -> tuple[str, str, str]:
    """The Tuning page's drafter, recorded-k and slider keys: they carry the sweep (and drafter) they belong to."""
    return f"tune_drafter:{name}", f"tune_recorded_k:{name}:{drafter}", f"tune_k:{name}:{drafter}:{recorded_k}"


def test_tuning_page_opens_on_the_sample_sweep_with_its_controls():
    at = _tune_page()
    name, sweep, drafter = _tune_sample()
    ks = _tuning.recorded_ks(sweep, drafter)
    drafter_key, recorded_key, k_key = _tune_keys(name, drafter, max(ks))
    assert at.selectbox(key="tune_sweep").value == name
    assert at.selectbox(key=drafter_key).value == drafter
    assert at.selectbox(key=recorded_key).value == max(ks)
    assert at.slider(key=k_key).value == max(ks)
    assert len(at.dataframe) == 2  # the recommendations, the table at k (AppTest keeps no key for these)
    assert list(at.dataframe[0].value["concurrency"]) == sorted({c.concurrency for c in sweep.cells})
    assert "output tokens/s (predicted)" in at.dataframe[1].value.columns
    cell = sweep.cells[0]
    for key in ("tune_chart_schedule", "tune_chart_tput", "tune_chart_al"):
        title = _tune_chart(at, key)["layout"]["title"]["text"]
        for part in (f"vLLM {cell.vllm_version}", cell.device_name, f"prompt set '{cell.prompt_set}'",
                     f"max {cell.max_tokens} output tokens", "concurrency"):
            assert part in title, (key, part)


def test_the_tuning_page_exports_the_recommendation_not_the_slider():
    at = _tune_page()
    name, sweep, drafter = _tune_sample()
    pred = _tuning.predict(sweep, drafter)
    result = _schedule.tuned(pred, sweep, _load_confirmation(_tuning.SWEEPS_DIR / name, drafter))
    exported = _serve_command(sweep.grid.target_model, result.exported)
    _, _, k_key = _tune_keys(name, drafter, max(_tuning.recorded_ks(sweep, drafter)))
    for k in (1, 2):
        at.slider(key=k_key).set_value(k).run()
        assert not at.exception, at.exception
        assert [c.value for c in at.code if c.value.startswith("vllm serve")] == [exported]
    recommended = at.dataframe[0].value
    assert [v.split(":")[0] for v in recommended["confirmed"]] == [f"k={r.confirmed_k}" for r in result.rows]
    assert all(v != "not measured" for v in recommended["baseline"])  # beside every figure
    fig = _tune_chart(at, "tune_chart_schedule")
    steps = next(t for t in fig["data"] if t["meta"]["role"] == "schedule_k")
    assert steps["y"][0] == (result.exported.k_at(1) if result.exported else 0)
    statics = {t["meta"]["k"] for t in fig["data"] if t["meta"]["role"] == "static"}
    assert statics == {m.num_speculative_tokens for m in pred.measured}


def test_the_drafter_selector_resets_when_the_sweep_changes():
    files = _tuning.list_sweep_files()
    if len(files) < 2:
        pytest.skip("needs two recorded sweeps")
    at = _tune_page()
    first, second = files[0].parent.name, files[1].parent.name
    drafters = _tuning.drafters(_load_sweep(files[0]))
    at.selectbox(key=f"tune_drafter:{first}").set_value(drafters[-1]).run()
    at.selectbox(key="tune_sweep").set_value(second).run()
    assert not at.exception, at.exception
    shown = at.selectbox(key=f"tune_drafter:{second}").value
    assert shown == _tuning.drafters(_load_sweep(files[1]))[0]
    assert shown in _tune_chart(at, "tune_chart_tput")["layout"]["title"]["text"]  # the page computes what it shows


def test_moving_tune_k_changes_the_predicted_numbers():
    at = _tune_page()
    name, sweep, drafter = _tune_sample()
    pred = _tuning.predict(sweep, drafter)
    _, _, k_key = _tune_keys(name, drafter, max(_tuning.recorded_ks(sweep, drafter)))
    seen = {}
    for k in (1, max(_tuning.recorded_ks(sweep, drafter))):
        at.slider(key=k_key).set_value(k).run()
        assert not at.exception, at.exception
        table = at.dataframe[1].value
        seen[k] = list(table["output tokens/s (predicted)"])
        for row in table.to_dict("records"):
            expected = pred.at(row["concurrency"], k)
            assert row["output tokens/s (predicted)"] == pytest.approx(expected.output_tokens_per_s)
            assert row["mean acceptance length"] == pytest.approx(expected.mean_acceptance_length)
            assert row["tokens per target pass"] == pytest.approx(expected.tokens_per_step)
    assert seen[1] != seen[max(seen)]


def test_tuning_chart_measured_markers_are_the_sweep_table():
    at = _tune_page()
    _, sweep, drafter = _tune_sample()
    table = _sweep_table(sweep)
    fig = _tune_chart(at, "tune_chart_tput")
    measured = [t for t in fig["data"] if t["meta"]["role"] == "measured"]
    assert sorted(t["meta"]["concurrency"] for t in measured) == sorted(set(table.concurrency))
    for trace in measured:
        rows = table[(table.concurrency == trace["meta"]["concurrency"]) & table.schedule.isna()
                     & table.drafter.isin([drafter, _BASELINE])].sort_values("num_speculative_tokens")
        assert trace["x"] == list(rows.num_speculative_tokens)
        assert trace["y"] == pytest.approx(list(rows.output_tokens_per_s))
    # the gap is shown: each measured cell that was predicted but not used carries its relative error
    pred = _tuning.predict(sweep, drafter)
    checked = [m for m in pred.measured if not m.used_for_prediction and m.relative_error is not None]
    labels = [t for tr in measured for t in tr["text"] if t]
    assert labels == [f"{m.relative_error:+.0%}" for m in checked]
    al = _tune_chart(at, "tune_chart_al")
    roles = {t["meta"]["role"] for t in al["data"]}
    assert {"predicted", "leviathan", "measured"} <= roles


def test_tuning_tables_say_not_measured_for_a_k_the_sweep_did_not_measure():
    at = _tune_page()
    name, sweep, drafter = _tune_sample()
    ks = _tuning.recorded_ks(sweep, drafter)
    unmeasured = [k for k in range(1, max(ks)) if k not in ks]
    if not unmeasured:
        pytest.skip("the sample sweep measured every k up to its largest")
    at.slider(key=_tune_keys(name, drafter, max(ks))[2]).set_value(unmeasured[0]).run()
    assert not at.exception, at.exception
    table = at.dataframe[1].value
    for column in ("output tokens/s (measured)", "measured min-max", "measured as", "gap"):
        assert list(table[column]) == ["not measured"] * len(table), column


def test_the_slider_stops_at_the_recorded_k_it_predicts_from():
    at = _tune_page()
    name, sweep, drafter = _tune_sample()
    ks = _tuning.recorded_ks(sweep, drafter)
    if len(ks) < 2:
        pytest.skip("the sample sweep has one k only")
    _, recorded_key, _ = _tune_keys(name, drafter, ks[0])
    at.selectbox(key=recorded_key).set_value(ks[0]).run()
    assert not at.exception, at.exception
    slider = at.slider(key=_tune_keys(name, drafter, ks[0])[2])
    assert slider.value == ks[0] and slider.max == max(ks[0], 2)
    assert not [w for w in at.warning if "above the recorded" in w.value]


def test_tuning_page_without_sweeps_says_how_to_record_one(monkeypatch):
    monkeypatch.setattr(_tuning, "list_sweep_files", lambda: [])
    at = _tune_page()
    assert any("No recorded sweep" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_methods_page_shows_the_trials_that_ran_and_the_errors_of_those_that_did_not(tmp_path, monkeypatch):
    from specviz import catalog

    path = tmp_path / "method_trials.json"
    path.write_text(json.dumps({
        "kind": "specviz.method_trials", "vllm_version": "0.32.0", "platform": "cpu", "device_name": "test cpu",
        "created_at": "2026-12-02T00:00:00+00:00", "trials": [
            {"method": "ngram", "target": "tiny", "draft": None, "ran": True, "error": None,
             "mean_acceptance_length": 2.1, "note": ""},
            {"method": "dspark", "target": "tiny", "draft": "tiny-dspark", "ran": False,
             "error": "ValueError: Model Runner V1 does not support: dspark speculative decoding\nmore",
             "mean_acceptance_length": None, "note": "server did not start"}]}))
    monkeypatch.setattr(catalog, "DEFAULT_TRIALS_PATH", path)
    at = AppTest.from_file("../app.py", default_timeout=240)
    at.switch_page("app_pages/methods.py").run()
    assert not at.exception, at.exception
    [trials] = [d.value for d in at.dataframe if "outcome" in d.value.columns]
    assert trials["method"].tolist() == ["ngram", "dspark"]  # one row per method
    assert trials["outcome"].tolist() == ["ran", "failed"]
    assert trials["why it failed"].tolist()[1] == "ValueError: Model Runner V1 does not support: dspark speculative decoding"
    assert trials["platform"].tolist() == ["cpu (test cpu), vLLM 0.32.0"] * 2
    assert any("on CPU (test cpu)" in c.value and "Llama-architecture targets (tiny" in c.value for c in at.caption)
    [errors] = [e for e in at.expander if e.label.startswith("The full error messages")]  # not one per failure
    assert errors.label == "The full error messages (1 distinct)"
    assert [c.value for c in at.code if "ValueError: Model Runner V1" in c.value] == [
        "ValueError: Model Runner V1 does not support: dspark speculative decoding\nmore"]


def test_methods_config_builder_keeps_what_the_user_typed_and_refuses_a_conflict():
    at = AppTest.from_file("../app.py", default_timeout=240)
    at.switch_page("app_pages/methods.py").run()
    at.text_input(key="methods_target").set_value("my-org/MyTarget-70B").run()
    at.slider(key="methods_k").set_value(5).run()
    at.selectbox(key="methods_method").set_value("eagle3").run()
    assert not at.exception, at.exception
    assert at.text_input(key="methods_target").value == "my-org/MyTarget-70B"  # typed: kept
    assert at.slider(key="methods_k").value == 5  # kept
    assert any("vllm serve my-org/MyTarget-70B" in c.value and '"num_speculative_tokens": 5' in c.value
               for c in at.code)
    at.text_input(key="methods_extra").set_value('{"num_speculative_tokens": 7}').run()
    assert any("num_speculative_tokens is 7 there but 5 above" in e.value for e in at.error)
    assert not any("--speculative-config" in c.value for c in at.code)  # refused, not silently 7
    at.text_input(key="methods_extra").set_value('{"num_speculative_tokens": 5, "draft_tensor_parallel_size": 1}').run()
    assert not at.error and any('"draft_tensor_parallel_size": 1' in c.value for c in at.code)
