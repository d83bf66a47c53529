"""From the tuner's picks to a schedule: candidates, the pick on measurement, the ranges, the page's table."""

import pytest
from test_tuning import HIST10, NGRAM, cell, steps, sweep_of

from specviz.config import SCHEDULE_FIELD, BatchSizeRange, SpecConfig
from specviz.prediction import predict
from specviz.schedule import (
    EngineCost,
    Measured,
    confirmation_candidates,
    confirmation_grid,
    confirmation_rows,
    export_reason,
    needs_idle_row,
    pick_on_measurement,
    picks_schedule,
    schedule_for,
    schedule_label,
    schedule_verdict,
    summed_above_schedule,
    tuned,
)
from specviz.sweep import Sweep
from specviz.sweep_files import confirmation_folder, load_confirmation, save_sweep
from specviz.sweep_view import recommendation_table, schedule_column_source


def m(k: int, median: float, low: float, high: float) -> Measured:
    return Measured(k=k, output_tokens_per_s=median, low=low, high=high, repeats=3)


def test_the_pick_prefers_the_smaller_k_when_the_runs_cannot_tell_them_apart():
    # the module docstring's worked numbers: k=3 has the best median, k=2 is level with it
    k2, k3 = m(2, 83.1, 81.0, 84.0), m(3, 84.0, 82.5, 86.0)
    assert k2.level_with(k3) and k3.level_with(k2)
    assert pick_on_measurement([m(0, 70.0, 69.0, 71.0), k2, k3]).k == 2
    # k=2's median below k=3's min: k=3 is measurably better
    assert pick_on_measurement([m(2, 82.0, 81.0, 84.0), k3]).k == 3
    # level one way only (k=3's median is above k=2's max): not level
    assert pick_on_measurement([m(2, 83.1, 81.0, 83.5), k3]).k == 3
    assert pick_on_measurement([m(0, 30.0, 29.0, 31.0), m(1, 25.8, 25.0, 26.5)]).k == 0


def test_the_schedule_covers_each_batch_size_up_to_the_next_measured_concurrency():
    assert schedule_for({1: 4, 2: 2, 4: 2, 8: 1, 16: 0}) == [
        BatchSizeRange(first=1, last=1, k=4), BatchSizeRange(first=2, last=4, k=2),
        BatchSizeRange(first=5, last=8, k=1), BatchSizeRange(first=9, last=16, k=0)]
    spec = picks_schedule(SpecConfig.from_dict(NGRAM | {"num_speculative_tokens": 5}), {1: 4, 2: 2, 4: 2, 8: 1, 16: 0})
    assert spec.num_speculative_tokens == 4  # the largest k the schedule uses
    assert spec.to_vllm()["num_speculative_tokens_per_batch_size"] == [[1, 1, 4], [2, 4, 2], [5, 8, 1], [9, 16, 0]]
    assert [spec.k_at(b) for b in (1, 3, 8, 12, 64)] == [4, 2, 1, 0, 0]  # vLLM keeps the last k for larger batches
    assert schedule_label(spec) == "ngram lookup 2-4 k by batch 1:4 2-4:2 5-8:1 9-16:0"


def test_one_k_everywhere_is_a_static_config_and_zero_everywhere_is_no_config():
    ngram = SpecConfig.from_dict(NGRAM | {"num_speculative_tokens": 5})
    static = picks_schedule(ngram, {1: 2, 4: 2, 16: 2})
    assert static.schedule is None and static.num_speculative_tokens == 2
    assert picks_schedule(ngram, {1: 0, 4: 0}) is None


# ---- from a prediction -------------------------------------------------------------------------------

def _sweep() -> Sweep:
    """Baselines and ngram k=1..3 at c=1 and 4, one run each; k=3 (HIST10) is the cell the tuner cuts."""
    base = {1: 33.3, 4: 66.7}
    measured = {(1, 1): 40.0, (1, 2): 42.0, (1, 3): 41.5, (4, 1): 70.0, (4, 2): 66.0, (4, 3): 60.0}
    return sweep_of(*(cell(None, c, t, steps([0], undrafted=100)) for c, t in base.items()),
                    *(cell(k, c, t, steps(HIST10[:k + 1] if k < 3 else HIST10, undrafted=20))
                      for (c, k), t in measured.items()))


def test_candidates_are_the_predicted_best_its_neighbours_and_the_baseline():
    pred = predict(_sweep(), "ngram lookup 2-4")
    best = {r.concurrency: r.num_speculative_tokens for r in pred.recommend()}
    candidates = confirmation_candidates(pred)
    for c, k in best.items():
        assert candidates[c] == sorted({0} | {j for j in (k - 1, k, k + 1) if 0 <= j <= 3})
    grid = confirmation_grid(_sweep(), pred, repeats=3)
    assert grid.repeats == 3 and grid.schedules == []
    keys = Sweep(grid=grid).expected_keys()
    assert sorted((k, c) for _, k, c in keys) == sorted((k, c) for c, ks in candidates.items() for k in ks)


def test_tuned_picks_on_the_sweeps_own_cells_and_finds_the_schedule_row(tmp_path):
    sweep = _sweep()
    pred = predict(sweep, "ngram lookup 2-4")
    result = tuned(pred, sweep, None)
    assert result.confirmed_by == "sweep" and result.schedule_measured_in is None
    assert {r.concurrency: r.confirmed_k for r in result.rows} == {1: 2, 4: 1}  # one run each: best median
    assert result.exported.to_vllm()["num_speculative_tokens_per_batch_size"] == [[1, 1, 2], [2, 4, 1]]
    table = recommendation_table(result)
    # each header names the measurement set its figures come from
    assert table[0]["baseline (sweep)"] == "33.3" and table[0]["speedup"] == 1.26
    assert table[0]["predicted → measured (sweep)"] == "k=3: 49.8 → 41.5"  # the prediction beside its median
    assert table[1]["schedule (not measured)"] == "k=1: not measured" and table[0]["confirmed (sweep)"] == "k=2: 42.0"
    static = result.model_copy(update={"schedule": result.schedule.with_k(2)})
    assert not any(h.startswith("schedule") for h in recommendation_table(static)[0])  # one k: no schedule column

    # the exported schedule measured as a row of the confirmation: it stands beside the picks
    label = schedule_label(result.exported)
    row = cell(2, 4, 69.0, steps([1, 1, 1], undrafted=20), drafter=label,
               config=result.exported.to_vllm())
    confirmation = Sweep(grid=sweep.grid, cells=[*sweep.cells, row])
    save_sweep(confirmation, confirmation_folder(tmp_path, pred.drafter) / "sweep.json")
    assert confirmation_folder(tmp_path, pred.drafter).parts[-2:] == ("confirm", "ngram_lookup_2-4")
    result = tuned(pred, sweep, load_confirmation(tmp_path, pred.drafter))
    assert result.confirmed_by == "confirmation" and result.schedule_measured_in == "confirmation"
    assert recommendation_table(result)[1]["schedule (confirmation)"] == "k=1: 69.0"
    assert load_confirmation(tmp_path, "eagle3 x") is None


def test_engine_cost_counts_one_start_per_configuration_and_round():
    sweep = _sweep()
    cost = EngineCost.of(sweep.cells)
    assert cost.runs == 8 and cost.engine_starts == 4  # baseline, k=1, 2, 3 in one round
    assert cost.run_seconds == pytest.approx(sum(r.wall_time_s for c in sweep.cells for r in c.runs))


def test_the_throughput_charts_draw_a_schedule_row_as_its_own_line():
    from specviz.charts import sweeps as charts
    from specviz.sweep_table import shown_table, sweep_table

    sweep = _sweep()
    spec = picks_schedule(predict(sweep, "ngram lookup 2-4").spec, {1: 2, 4: 1})
    label = schedule_label(spec)
    rows = [cell(2, c, t, steps([1, 1, 1], undrafted=20), drafter=label, config=spec.to_vllm())
            for c, t in ((1, 41.0), (4, 69.0))]
    table = sweep_table(Sweep(grid=sweep.grid, cells=[*sweep.cells, *rows]))
    assert charts.fixed_k_drafters(table) == ["ngram lookup 2-4"] and charts.schedules(table) == [label]
    assert list(shown_table(table).loc[table.drafter == label, "schedule"]) == ["1: k=2 · 2-4: k=1"] * 2
    level = [t for t in charts.throughput_vs_k(table, 4, "cap").data if (t.meta or {}).get("role") == "schedule"]
    assert len(level) == 1 and list(level[0].y) == [69.0, 69.0]
    line = [t for t in charts.speedup_vs_concurrency(table, "cap").data if (t.meta or {}).get("role") == "schedule"]
    assert list(line[0].x) == [1, 4] and list(line[0].y) == pytest.approx([41.0 / 33.3, 69.0 / 66.7])
    assert charts.config_label(label, 2) == label  # its label already says its k


def test_recorded_on_says_where_and_when_cells_were_measured():
    from specviz.charts.sweeps import recorded_on

    cells = _sweep().cells  # the test cells' runs were all created at 2026-12-02T00:00:00
    assert recorded_on(cells) == "cpu (test cpu), 2026-12-02 00:00-00:00 UTC"
    assert recorded_on([]) == ""


def test_the_verdict_names_where_the_measured_schedule_falls_short_and_sums_it_against_no_drafting():
    # the chat confirmation's EAGLE-3 figures: the schedule within the pick's spread at c=1 and c=8, short at c=16
    from specviz.schedule import ConfirmationRow, Tuned

    def row(c, pick, base, sched):
        return ConfirmationRow(concurrency=c, predicted_k=pick.k, predicted_output_tokens_per_s=1.0,
                               candidates=[base, pick] if pick.k else [base], confirmed_k=pick.k, schedule=sched)

    spec = SpecConfig.parse('{"method": "ngram", "num_speculative_tokens": 1}').with_schedule(
        [BatchSizeRange(first=1, last=1, k=1), BatchSizeRange(first=2, last=16, k=0)])
    rows = [row(1, m(1, 23.5, 21.2, 28.3), m(0, 18.5, 16.8, 20.7), m(1, 22.9, 22.7, 25.1)),
            row(16, m(0, 219.1, 212.4, 258.0), m(0, 219.1, 212.4, 258.0), m(0, 161.1, 151.2, 206.4))]
    beside = {0: {1: m(0, 18.5, 16.8, 20.7), 16: m(0, 219.1, 212.4, 258.0)},
              1: {1: m(1, 23.5, 21.2, 28.3), 16: m(1, 145.5, 136.1, 152.2)}}
    result = Tuned(rows=rows, schedule=spec, exported=spec, confirmed_by="confirmation",
                   schedule_measured_in="confirmation", static_beside=beside)
    short, why, sums = schedule_verdict(result)
    assert short == ("Below the spread of the best static config measured beside it (in the confirmation) at "
                     "concurrency 16: the schedule (k=0) 161.1 (151.2-206.4) against no drafting 219.1 (212.4-258.0) "
                     "(output tokens/s, median (min-max)).")
    assert "Where its k is 0 the schedule drafts nothing" in why
    assert ("schedule 184.0, no drafting 237.6, static k=1 169.0; each concurrency's best static config 242.6. "
            "The schedule is 22.6% below no drafting.") in sums
    # measured level with the best at each concurrency and above every static config summed: it says so
    level = [r.model_copy(update={"schedule": m(r.confirmed_k, 23.6 if r.concurrency == 1 else 220.0, 20.0, 260.0)})
             for r in rows]
    within, sums = schedule_verdict(result.model_copy(update={"rows": level}))
    assert within.startswith("At every concurrency measured the schedule's median lies within or above the spread")
    assert sums.endswith("The schedule is at or above every single static config.")
    assert summed_above_schedule(result).k == 0  # the page shows a summed shortfall as info, not success
    wide = [r.model_copy(update={"schedule": r.schedule.model_copy(update={"high": 215.0})}) if r.concurrency == 16
            else r for r in rows]  # the schedule's runs summed now reach 240.1, above no drafting's 237.6
    assert schedule_verdict(result.model_copy(update={"rows": wide}))[-1].endswith(
        "22.6% below no drafting, whose sum lies inside the schedule's runs summed (173.9-240.1).")
    assert summed_above_schedule(result.model_copy(update={"rows": level})) is None
    assert schedule_verdict(result.model_copy(update={"schedule": spec.with_k(1)})) == []  # static: no verdict
    unmeasured = [r.model_copy(update={"schedule": None}) for r in rows]
    assert schedule_verdict(result.model_copy(update={"rows": unmeasured})) == []


def test_a_static_config_the_measured_schedule_beats_nowhere_is_exported_instead():
    from specviz.schedule import replacing_config, summed

    # chat, ngram (the confirmation, AMD EPYC, 3 runs per cell): schedule 1: k=0 · 2: k=2 · 3-16: k=0
    schedule = {1: m(0, 31.2, 30.9, 32.0), 2: m(2, 59.8, 59.7, 60.4), 4: m(0, 118.7, 117.5, 120.7),
                8: m(0, 177.7, 170.7, 183.8), 16: m(0, 226.8, 218.3, 261.9)}
    none = {1: m(0, 33.4, 32.4, 34.2), 2: m(0, 59.5, 58.7, 60.5), 4: m(0, 130.4, 129.3, 131.8),
            8: m(0, 188.3, 188.1, 193.1), 16: m(0, 243.9, 237.5, 245.7)}  # c=2: 59.8 within 58.7-60.5
    k2 = {2: m(2, 62.8, 56.7, 62.9)}  # not measured at every concurrency: does not compete
    level = replacing_config(schedule, {0: none, 2: k2})
    assert level.k == 0 and round(level.output_tokens_per_s, 1) == 655.5
    total = summed(list(schedule.values()), 2)
    assert (round(total.output_tokens_per_s, 1), round(total.low, 1), round(total.high, 1)) == (614.2, 597.1, 658.8)

    # code, ngram, head-to-head (AMD EPYC): the schedule (1: k=5 · 2-16: k=4) sums 618.4 against k=4's 616.2, and at c=1
    # its 60.1 lies above k=4's max 57.0: it stays
    code = {1: m(5, 60.1, 57.4, 60.4), 2: m(4, 101.1, 100.9, 101.2), 4: m(4, 137.3, 136.3, 138.4),
            8: m(4, 159.4, 155.8, 163.9), 16: m(4, 160.5, 160.3, 175.3)}
    k4 = {1: m(4, 56.9, 54.1, 57.0), 2: m(4, 100.0, 86.4, 100.5), 4: m(4, 136.7, 108.6, 139.3),
          8: m(4, 156.1, 154.3, 163.7), 16: m(4, 166.6, 165.5, 178.8)}
    assert replacing_config(code, {4: k4}) is None
    # the same, head to head on the Intel Xeon (3 runs each): k=4 sums 381.9 against the schedule's 378.9, but not above its
    # maxes summed (387.0), and at c=1 the schedule's 31.7 lies above k=4's max 30.4: it stays
    xeon = {1: m(5, 31.7, 29.7, 32.0), 2: m(4, 49.3, 48.3, 49.8), 4: m(4, 73.0, 69.8, 75.8),
            8: m(4, 101.0, 96.6, 103.7), 16: m(4, 123.9, 117.5, 125.8)}
    xeon_k4 = {1: m(4, 28.1, 27.0, 30.4), 2: m(4, 47.7, 45.8, 49.6), 4: m(4, 75.9, 71.4, 76.3),
               8: m(4, 100.4, 92.4, 106.3), 16: m(4, 129.8, 115.5, 131.9)}
    assert replacing_config(xeon, {4: xeon_k4}) is None
    # (chat, EAGLE-3, where the schedule stays, is checked on the recorded confirmation: tests/app/test_tuning_page.py)
    # chat, ngram, head-to-head: the schedule (1: k=1 · 2-4: k=2 · 5-16: k=0) measured better than no drafting at
    # c=2 alone (61.4 against 60.6 at most), but no drafting's 667.9 summed lies above the schedule's maxes
    # summed, 636.0: no drafting replaces it
    chat = {1: m(1, 33.1, 33.0, 33.1), 2: m(2, 61.4, 61.0, 61.9), 4: m(2, 125.9, 125.2, 127.3),
            8: m(0, 182.4, 175.0, 183.1), 16: m(0, 230.0, 228.1, 230.5)}
    chat_none = {1: m(0, 34.2, 33.8, 34.6), 2: m(0, 60.1, 59.9, 60.6), 4: m(0, 129.2, 128.2, 131.1),
                 8: m(0, 196.5, 189.8, 200.8), 16: m(0, 248.0, 242.0, 278.0)}
    assert replacing_config(chat, {0: chat_none}).output_tokens_per_s == pytest.approx(667.9, abs=0.2)  # rounded medians


def test_tuned_exports_the_static_config_and_says_why_once_the_schedule_row_measured_no_better():
    sweep = _sweep()
    pred = predict(sweep, "ngram lookup 2-4")
    schedule = tuned(pred, sweep, None).schedule  # 1: k=2 · 2-4: k=1
    label = schedule_label(schedule)
    # static k=1 measured 40.0 and 70.0, k=2 42.0 and 66.0 (one run each): both hold up against a schedule
    # row of 40.0 and 70.0, k=1 with the higher sum; against 41.0 and 90.0 none does
    for row, exported in (((40.0, 70.0), schedule.with_k(1)), ((41.0, 90.0), schedule)):
        rows = [cell(2, c, t, steps([1, 1, 1], undrafted=20), drafter=label, config=schedule.to_vllm())
                for c, t in zip((1, 4), row)]
        result = tuned(pred, Sweep(grid=sweep.grid, cells=[*sweep.cells, *rows]), None)
        assert result.schedule == schedule and result.exported == exported, row
        reason = export_reason(result)
        assert (reason is None) == (exported == schedule)
        if reason:
            assert "ngram k=1 was nowhere measurably worse" in reason and "the export is ngram k=1" in reason


def test_k0_of_a_schedule_competes_as_the_drafter_idle_not_as_the_baseline():
    """Where the baseline wins, k = 0 of a schedule is the drafter loaded and idle: measured as its own row."""
    base = {1: 33.3, 4: 75.0}  # the baseline wins c=4 against k=1's 70.0
    measured = {(1, 1): 40.0, (1, 2): 42.0, (1, 3): 41.5, (4, 1): 70.0, (4, 2): 66.0, (4, 3): 60.0}
    sweep = sweep_of(*(cell(None, c, t, steps([0], undrafted=100)) for c, t in base.items()),
                     *(cell(k, c, t, steps(HIST10[:k + 1] if k < 3 else HIST10, undrafted=20))
                       for (c, k), t in measured.items()))
    pred = predict(sweep, "ngram lookup 2-4")
    rows = confirmation_rows(pred, sweep)
    assert {r.concurrency: r.confirmed_k for r in rows} == {1: 2, 4: 0} and needs_idle_row(rows)
    idle = pred.spec.idle()
    assert idle.drafts_nothing and idle.k_at(1) == idle.k_at(64) == 0 and idle.num_speculative_tokens == pred.spec.k

    def with_idle(tput: float) -> Sweep:
        row = cell(pred.spec.k, 4, tput, steps([0], undrafted=100), drafter=schedule_label(idle), config=idle.to_vllm())
        return Sweep(grid=sweep.grid, cells=[*sweep.cells, row])

    # ngram loaded and idle measured 66.0 at c=4: k=1 (70.0) beats it, so the schedule drafts there too
    rows = confirmation_rows(pred, with_idle(66.0))
    assert {r.concurrency: r.confirmed_k for r in rows} == {1: 2, 4: 1} and not needs_idle_row(rows)
    assert rows[1].idle.k == 0 and rows[1].idle.output_tokens_per_s == 66.0 and rows[1].baseline.output_tokens_per_s == 75.0
    result = tuned(pred, with_idle(66.0), None)
    assert result.schedule.to_vllm()[SCHEDULE_FIELD] == [[1, 1, 2], [2, 4, 1]]
    table = recommendation_table(result)
    assert [t["k=0, idle (sweep)"] for t in table] == ["not measured", "66.0"] and table[1]["baseline (sweep)"] == "75.0"
    # idle at 72.0 beats every k there: k=0 stays, and the pick's figure is the idle row's, not the baseline's
    rows = confirmation_rows(pred, with_idle(72.0))
    assert rows[1].confirmed_k == 0 and rows[1].confirmed.output_tokens_per_s == 72.0


def test_picks_of_one_k_that_no_drafting_beats_everywhere_export_no_speculative_config():
    """The idle drafter lost to k=2 everywhere, and no drafting beat k=2 everywhere: serve without drafting."""
    base = {1: 45.0, 4: 75.0}
    measured = {(1, 1): 40.0, (1, 2): 42.0, (1, 3): 41.5, (4, 1): 70.0, (4, 2): 71.0, (4, 3): 60.0}
    sweep = sweep_of(*(cell(None, c, t, steps([0], undrafted=100)) for c, t in base.items()),
                     *(cell(k, c, t, steps(HIST10[:k + 1] if k < 3 else HIST10, undrafted=20))
                       for (c, k), t in measured.items()))
    pred = predict(sweep, "ngram lookup 2-4")
    idle = pred.spec.idle()
    idle_cells = [cell(pred.spec.k, c, t, steps([0], undrafted=100), drafter=schedule_label(idle), config=idle.to_vllm())
                  for c, t in ((1, 38.0), (4, 66.0))]
    result = tuned(pred, sweep, Sweep(grid=sweep.grid, cells=[*sweep.cells, *idle_cells]))
    assert {r.concurrency: r.confirmed_k for r in result.rows} == {1: 2, 4: 2}
    assert result.schedule == pred.spec.with_k(2) and result.exported is None
    assert result.replaced_by.k == 0 and result.schedule_sum.output_tokens_per_s == 113.0
    assert export_reason(result) == (
        "Measured beside the picks (ngram k=2 at every concurrency) in the confirmation, no drafting served "
        "measurably more in total (summed over the concurrencies, no drafting 120.0 against the picks (ngram k=2 at "
        "every concurrency) 113.0: its median sum above the picks' maxes summed). So the export is no drafting.")


@pytest.mark.parametrize("sweep_name, drafter, confirmation, other_hardware", [
    ("smollm2-code", "ngram lookup 2-4", None, False),  # confirmed and head to head on Intel Xeons
    # the code sweep's first confirmation, on an AMD EPYC (the same picks), beside the Xeon head-to-head
    ("smollm2-code", "ngram lookup 2-4", "confirm/ngram_lookup_2-4/confirmation-amd-epyc/sweep.json", True),
    ("smollm2-chat-f32", "ngram lookup 2-4", None, False),
])
def test_the_tables_schedule_column_says_it_came_from_the_head_to_head(sweep_name, drafter, confirmation,
                                                                       other_hardware):
    from specviz.sweep_files import SWEEPS_DIR, load_head_to_heads, load_sweep

    folder = SWEEPS_DIR / sweep_name
    sweep = load_sweep(folder / "sweep.json")
    confirm = load_sweep(folder / confirmation) if confirmation else load_confirmation(folder, drafter)
    result = tuned(predict(sweep, drafter), sweep, confirm, load_head_to_heads(folder, drafter))
    said = schedule_column_source(result, confirm)
    assert said.startswith("The schedule column was measured in the head-to-head (cpu (")
    assert ("on other hardware" in said) == other_hardware, said
    assert "not against the confirmed column" in said
    assert schedule_column_source(result.model_copy(update={"schedule_measured_in": "confirmation"}), confirm) is None


def test_a_prediction_refused_at_every_concurrency_is_said_before_any_confirmation_starts():
    """A one-run sweep with too few drafted steps once reached the grid as an empty list, and tune printed
    pydantic's 'List should have at least 1 item'."""
    from specviz.prediction import TuningRefusal
    from specviz.sweep import SweepError
    from specviz.sweep_files import SWEEPS_DIR, load_sweep

    sweep = load_sweep(SWEEPS_DIR / "smollm2-chat-f32" / "sweep.json")
    refused = predict(sweep, "ngram lookup 2-4").model_copy(update={"rows": [], "refusals": [
        TuningRefusal(concurrency=c, reason="only 17 drafted steps in the k=3 run (at least 30 needed)")
        for c in (1, 2)]})
    with pytest.raises(SweepError, match=r"predicted no concurrency.*c=1: only 17 drafted steps.*c=2: only 17"):
        confirmation_grid(sweep, refused)


def test_picks_and_checks_on_single_runs_carry_a_caveat():
    """Tuned from one run with --repeats 1, the verdict called 33.0 'below' 33.1 and a 1.8% higher sum
    'measurably more': with one run per cell no spread says what is noise."""
    from specviz.schedule import single_run_caveat
    from specviz.sweep_files import SWEEPS_DIR, load_head_to_heads, load_sweep

    folder, drafter = SWEEPS_DIR / "smollm2-code", "ngram lookup 2-4"
    sweep = load_sweep(folder / "sweep.json")
    result = tuned(predict(sweep, drafter), sweep, load_confirmation(folder, drafter), load_head_to_heads(folder, drafter))
    assert single_run_caveat(result) is None  # 3 runs in every cell
    one = result.rows[0].candidates[0].model_copy(update={"repeats": 1})
    row = result.rows[0].model_copy(update={"candidates": [one, *result.rows[0].candidates[1:]]})
    caveat = single_run_caveat(result.model_copy(update={"rows": [row, *result.rows[1:]]}))
    assert caveat.startswith("Some cells here are a single run") and "--repeats 3" in caveat


def test_a_miss_where_the_schedule_serves_the_static_configs_own_k_says_how_often_alike_configs_miss():
    """The 5-run code head-to-head: 114.8 (111.8-118.9) at c=8 against static k=4's 116.5 (115.0-117.9), serving
    k=4 there. The page showed only 'Below the spread'."""
    from specviz.schedule import alike_miss_chance
    from specviz.sweep_files import SWEEPS_DIR, load_head_to_heads, load_sweep

    assert [alike_miss_chance(n) for n in (1, 2, 3, 5)] == [2, None, 5, 12]
    folder, drafter = SWEEPS_DIR / "smollm2-code", "ngram lookup 2-4"
    sweep = load_sweep(folder / "sweep.json")
    result = tuned(predict(sweep, drafter), sweep, load_confirmation(folder, drafter), load_head_to_heads(folder, drafter))
    said = schedule_verdict(result)
    assert said[0].startswith("Below the spread of the best static config measured beside it (in the head-to-head) "
                              "at concurrency 8: the schedule (k=4)")
    assert said[1] == ("At concurrency 8 the schedule serves the k of the static config beside it; the two differ "
                       "only at the smaller batches a cell passes through as its requests finish. Two configs that "
                       "serve alike, 5 runs each, fall below each other's spread like this 1 time in 12.")
    assert said[-1].endswith("The schedule is at or above every single static config.")
