"""AppTest: the Throughput page opens on the sample sweep; its charts are the sweep's table; it compares two sweeps."""

import pytest
from page_helpers import chart_figure, open_page, sample_sweep

from specviz import sweep_files
from specviz.references import MINIMAX_M3_EAGLE3_SPEED_BENCH
from specviz.sweep import BASELINE
from specviz.sweep_files import save_sweep
from specviz.sweep_table import TABLE_COLUMNS, sweep_table

THROUGHPUT = "app_pages/throughput.py"


def test_throughput_page_opens_on_the_sample_sweep_with_its_controls():
    at = open_page(THROUGHPUT)
    name, sweep = sample_sweep()
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
        title = chart_figure(at, key)["layout"]["title"]["text"]
        assert f"vLLM {sweep.cells[0].vllm_version}" in title and sweep.cells[0].device_name in title, key
    if all(c.platform == "cpu" for c in sweep.cells):
        assert "CPU figures" in chart_figure(at, "tp_chart_tput_k_a")["layout"]["title"]["text"]


def test_throughput_vs_k_chart_shows_the_table_at_the_chosen_concurrency():
    at = open_page(THROUGHPUT)
    _, sweep = sample_sweep()
    table = sweep_table(sweep)
    for concurrency in sorted(sweep.grid.concurrencies):
        at.selectbox(key="tp_concurrency").set_value(concurrency).run()
        assert not at.exception, at.exception
        fig = chart_figure(at, "tp_chart_tput_k_a")
        rows = table[table.concurrency == concurrency]
        for drafter in {d for d in rows.drafter if d != BASELINE}:
            expected = rows[rows.drafter == drafter].sort_values("num_speculative_tokens")
            trace = next(t for t in fig["data"] if t["meta"].get("drafter") == drafter)  # named short: "draft"
            assert trace["x"] == [int(k) for k in expected.num_speculative_tokens]
            assert trace["y"] == pytest.approx(list(expected.output_tokens_per_s))
        baseline = next(t for t in fig["data"] if t["meta"]["role"] == "baseline")
        expected_base = float(rows[rows.drafter == BASELINE].output_tokens_per_s.iloc[0])
        assert baseline["y"] == pytest.approx([expected_base, expected_base])
        speedup = chart_figure(at, "tp_chart_speedup_a")
        for trace in (t for t in speedup["data"] if t["meta"]["role"] == "measured"):
            k = trace["meta"]["k"]
            expected = table[(table.drafter == trace["meta"]["drafter"]) & (table.num_speculative_tokens == k)]
            assert trace["y"] == pytest.approx(list(expected.sort_values("concurrency").speedup))


def test_published_reference_appears_only_when_asked_for():
    at = open_page(THROUGHPUT)
    roles = [t["meta"]["role"] for t in chart_figure(at, "tp_chart_positions_a")["data"]]
    assert roles == ["measured"]
    at.checkbox(key="tp_show_reference").check().run()
    assert not at.exception, at.exception
    data = chart_figure(at, "tp_chart_positions_a")["data"]
    assert [t["meta"]["role"] for t in data] == ["measured", "reference"]
    ref = data[1]
    assert ref["y"] == MINIMAX_M3_EAGLE3_SPEED_BENCH.acceptance_rate_per_pos
    assert ref["name"].startswith("published reference, not measured here")
    assert any("2026-07-13" in c.value for c in at.caption)
    at.checkbox(key="tp_show_reference").uncheck().run()
    assert [t["meta"]["role"] for t in chart_figure(at, "tp_chart_positions_a")["data"]] == ["measured"]


def test_throughput_page_compares_two_sweeps(tmp_path, monkeypatch):
    name, sweep = sample_sweep()
    other = sweep.model_copy(update={"cells": [c.model_copy(update={"prompt_set": "chat"}) for c in sweep.cells]})
    other_path = save_sweep(other, tmp_path / "other-chat" / "sweep.json")
    sample_path = sweep_files.list_sweep_files()[0]
    monkeypatch.setattr(sweep_files, "list_sweep_files", lambda: [sample_path, other_path])
    at = open_page(THROUGHPUT)
    assert at.selectbox(key="tp_compare").options == ["none", "other-chat"]
    at.selectbox(key="tp_compare").set_value("other-chat").run()
    assert not at.exception, at.exception
    a, b = chart_figure(at, "tp_chart_tput_k_a"), chart_figure(at, "tp_chart_tput_k_b")
    assert "prompt set 'chat'" in b["layout"]["title"]["text"]
    assert [t["y"] for t in a["data"]] == [t["y"] for t in b["data"]]  # same cells, other prompt set name
    by_set = chart_figure(at, "tp_chart_prompt_sets")
    assert sorted(t["name"] for t in by_set["data"]) == sorted(
        [f"{sweep.cells[0].prompt_set} · {name}", "chat · other-chat"])
    assert [b.key for b in at.get("download_button")] == ["tp_csv", "tp_csv_compare"]


def test_throughput_page_without_sweeps_says_how_to_record_one(monkeypatch):
    monkeypatch.setattr(sweep_files, "list_sweep_files", lambda: [])
    at = open_page(THROUGHPUT)
    assert any("No recorded sweeps" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_throughput_page_warns_of_a_row_measured_after_the_rest(tmp_path, monkeypatch):
    name, sweep = sample_sweep()
    assert sweep.rows_measured_apart() == {}  # recorded in interleaved rounds
    drafter, k = next((c.drafter, c.num_speculative_tokens) for c in sweep.cells if c.drafter != BASELINE)

    def added_later(cell):  # as if `specviz sweep` had added this row to the finished sweep
        if (cell.drafter, cell.num_speculative_tokens) != (drafter, k):
            return cell
        return cell.model_copy(update={"runs": [r.model_copy(update={"created_at": "2027-01-01T00:00:00+00:00"})
                                                for r in cell.runs]})

    moved = sweep.model_copy(update={"cells": [added_later(c) for c in sweep.cells]})
    monkeypatch.setattr(sweep_files, "list_sweep_files", lambda: [save_sweep(moved, tmp_path / "added" / "sweep.json")])
    at = open_page(THROUGHPUT)
    assert not at.exception, at.exception
    [warning] = [w.value for w in at.warning if "rounds of their own" in w.value]
    assert f"{drafter} k={k} (2027-01-01 00:00-00:00 UTC)" in warning and "new --out folder" in warning


def test_throughput_page_draws_a_head_to_head_the_schedule_beside_the_static_k():
    """What to build 4: the Throughput page draws the baseline, each static k and the schedule per concurrency.
    The recorded schedules live in their head-to-heads (the same rounds as the static configs), not in the grids."""
    from specviz import ui_sweeps
    from specviz.sweep_files import SWEEPS_DIR, load_sweep

    at = open_page(THROUGHPUT)
    name, _ = sample_sweep()
    radio = at.radio(key=f"tp_source:{name}")
    head_to_head = next(o for o in radio.options if o.startswith("head-to-head: "))
    assert radio.value == ui_sweeps.GRID
    assert ui_sweeps.HEAD_TO_HEAD_CAPTION not in [c.value for c in at.caption]
    radio.set_value(head_to_head).run()
    assert not at.exception, at.exception
    assert ui_sweeps.HEAD_TO_HEAD_CAPTION in [c.value for c in at.caption]
    measured = load_sweep(ui_sweeps.measured_in(SWEEPS_DIR / name / "sweep.json")[head_to_head])
    speedup = chart_figure(at, "tp_chart_speedup_a")
    schedule = next(t for t in speedup["data"] if t["meta"]["role"] == "schedule")
    assert len(schedule["x"]) == len(measured.grid.concurrencies)
    statics = {t["meta"]["k"] for t in speedup["data"] if t["meta"]["role"] == "measured"}
    assert statics == set(measured.grid.num_speculative_tokens)
    assert [t for t in speedup["data"] if t["meta"]["role"] == "baseline"]
