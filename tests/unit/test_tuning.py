"""The tuner on hand-built sweep cells, with the worked numbers of specviz/prediction.py and step_cost.py."""

import pytest

from specviz.acceptance_at_k import (
    MIN_DRAFTED_STEPS,
    acceptance_rate_per_pos,
    drafted_share,
    drafter_refusal,
    expected_accepted,
    fit_leviathan_rate,
    leviathan_tokens_per_step,
    mean_acceptance_length,
    tokens_per_step,
    tokens_per_step_fixed_share,
)
from specviz.config import SpecConfig
from specviz.metrics import StepFigures
from specviz.prediction import TuningRefusal, predict, predict_concurrency
from specviz.serve_command import python_config, serve_command_text
from specviz.step_cost import StepCostFit, fit_step_cost, measured_pass
from specviz.sweep import BASELINE, Sweep, SweepCell, SweepGrid
from specviz.sweep_files import list_sweep_files

NGRAM = {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}


def steps(histogram=(), undrafted=0, engine_steps=100, step_time=0.03) -> StepFigures:
    return StepFigures(accepted_histogram=list(histogram), num_steps_without_drafts=undrafted,
                       num_engine_steps=engine_steps, engine_step_time_s=step_time)


def cell(k: int | None, c: int, tput: float, figures: StepFigures, *, drafter="ngram lookup 2-4",
         method="ngram", config: dict | None = None) -> SweepCell:
    spec = None if k is None else (config or NGRAM) | {"method": method, "num_speculative_tokens": k}
    return SweepCell(
        drafter=BASELINE if k is None else drafter, method=None if k is None else method,
        num_speculative_tokens=k, speculative_config=spec, concurrency=c, prompt_set="unit", num_requests=8,
        max_tokens=48, num_output_tokens=384, wall_time_s=384 / tput, output_tokens_per_s=tput,
        request_output_tokens_per_s_p50=None, time_per_output_token_s_p50=None, time_per_output_token_s_p90=None,
        time_to_first_token_s_p50=None, time_to_first_token_s_p90=None, mean_acceptance_length=None,
        draft_acceptance_rate=None, num_drafts=0, num_draft_tokens=0, num_accepted_tokens=0,
        num_accepted_tokens_per_pos=[], acceptance_rate_per_pos=[], steps=figures, counters_match=None,
        run_file="runs/x.json.gz", engine_ready_after_s=None, created_at="2026-12-02T00:00:00+00:00",
        vllm_version="0.32.0", platform="cpu", device_name="test cpu",
    )


def sweep_of(*cells: SweepCell) -> Sweep:
    grid = SweepGrid(target_model="/m/target", drafters=[NGRAM], num_speculative_tokens=[1, 3],
                     concurrencies=sorted({c.concurrency for c in cells}), prompts="builtin:code",
                     num_requests=8, max_tokens=48)
    return Sweep(grid=grid, cells=list(cells))


# The docstring's example: K=3, drafted steps accepting 0, 1, 3, 3 -> histogram [1, 1, 0, 2]; x10 for enough steps.
HIST = [1, 1, 0, 2]
HIST10 = [10, 10, 0, 20]


def test_acceptance_is_the_recorded_histogram_cut_at_k():
    assert expected_accepted(HIST, 2) == 1.25
    assert [mean_acceptance_length(HIST, k) for k in (1, 2, 3)] == [1.75, 2.25, 2.75]
    assert acceptance_rate_per_pos(HIST, 3) == [0.75, 0.5, 0.5]
    assert acceptance_rate_per_pos(HIST, 2) == [0.75, 0.5]  # positions below k are unchanged


def test_tokens_per_target_pass_keeps_the_steps_without_drafts():
    s = steps(HIST, undrafted=2)  # N = 2 + 4 * 2.75 = 13 tokens over 6 request-steps
    assert tokens_per_step(s, 0) == 1.0
    assert tokens_per_step(s, 3) == pytest.approx(13 / 6)  # = the recorded run
    assert tokens_per_step(s, 2) == pytest.approx(13 / (2 + 11 / 2.25))  # 1.887
    assert tokens_per_step(s, 1) == pytest.approx(13 / (2 + 11 / 1.75))  # 1.569
    # the simpler model holding the share of drafted steps fixed (f = 4/6)
    assert tokens_per_step_fixed_share(s, 1) == pytest.approx(1.5)
    assert tokens_per_step_fixed_share(s, 3) == pytest.approx(13 / 6)


def test_leviathan_closed_form_and_its_fitted_rate():
    assert leviathan_tokens_per_step(0.5, 3) == 1.875  # 1 + 0.5 + 0.25 + 0.125
    assert fit_leviathan_rate(1.875, 3) == pytest.approx(0.5)
    assert fit_leviathan_rate(4.0, 3) == 1.0 and leviathan_tokens_per_step(1.0, 3) == 4.0


# The docstring's step cost: base 20 ms, 10 ms per request, 5 ms per drafted token. Cells built so that
# their time per pass (c * L / tokens/s) is exactly that: baselines (L = 1) and ngram at K=2 with every
# request-step drafted (f = 1) and the histogram [16, 8, 16] (L(2) = 2.0, L(1) = 1.6).
HIST_K2 = [16, 8, 16]


def _pass_s(c: int, drafted: float) -> float:
    return 0.020 + 0.010 * c + 0.005 * drafted


def _fit_sweep(*extra: SweepCell) -> Sweep:
    return sweep_of(cell(None, 1, 1 / _pass_s(1, 0), steps([0], undrafted=100)),
                    cell(None, 4, 4 / _pass_s(4, 0), steps([0], undrafted=100)),
                    cell(2, 1, 2.0 / _pass_s(1, 2), steps(HIST_K2)),
                    cell(2, 4, 4 * 2.0 / _pass_s(4, 8), steps(HIST_K2)), *extra)


def test_drafted_share_and_the_measured_pass_time():
    s = steps(HIST, undrafted=2)  # N = 13
    assert drafted_share(s, 3) == pytest.approx(4 / 6)
    assert drafted_share(s, 1) == pytest.approx((11 / 1.75) / (2 + 11 / 1.75))  # 0.759
    assert drafted_share(s, 0) == 0.0
    t, drafted = measured_pass(cell(3, 2, 60.0, s))  # 2 requests x 13/6 tokens per pass at 60 tokens/s
    assert t == pytest.approx(2 * 13 / 6 / 60) and drafted == pytest.approx(2 * 4 / 6 * 3)
    t, drafted = measured_pass(cell(None, 4, 120.0, steps([0], undrafted=100)))
    assert t == pytest.approx(4 / 120) and drafted == 0
    assert measured_pass(cell(3, 1, 50.0, steps([]))) is None  # no acceptance figures


def test_step_cost_fit_recovers_the_worked_costs():
    fit = fit_step_cost(_fit_sweep().cells)
    assert isinstance(fit, StepCostFit)
    assert fit.base_s == pytest.approx(0.020) and fit.per_request_s == pytest.approx(0.010)
    assert fit.per_drafted_token_s == {"ngram lookup 2-4": pytest.approx(0.005)}
    assert fit.r2 == pytest.approx(1.0) and fit.median_relative_error == pytest.approx(0, abs=1e-9)
    assert fit.num_cells == 4 and fit.held_at_zero == []
    assert fit.pass_time_s("ngram lookup 2-4", 4, 1, 1.0) == pytest.approx(0.080)  # 20 + 40 + 5 x 4 ms


def test_step_cost_fit_finds_the_knee_below_which_a_request_costs_nothing():
    # StepCostFit's worked example: baseline passes of 40, 40, 40, 80 ms at c = 1, 2, 4, 8 (flat until the
    # batch passes 4 requests, then 10 ms per request), and an ngram k=2 cell at c = 1, 8 with 5 ms per drafted token
    def pass_s(c: int, drafted: float) -> float:
        return 0.040 + 0.010 * max(0, c - 4) + 0.005 * drafted

    sweep = sweep_of(*[cell(None, c, c / pass_s(c, 0), steps([0], undrafted=100)) for c in (1, 2, 4, 8)],
                     *[cell(2, c, c * 2.0 / pass_s(c, 2 * c), steps(HIST_K2)) for c in (1, 8)])
    fit = fit_step_cost(sweep.cells)
    assert fit.knee_requests == 4.0
    assert fit.base_s == pytest.approx(0.040) and fit.per_request_s == pytest.approx(0.010)
    assert fit.per_drafted_token_s == {"ngram lookup 2-4": pytest.approx(0.005)}
    assert fit.median_relative_error == pytest.approx(0, abs=1e-9)
    assert fit.pass_time_s("ngram lookup 2-4", 2, 1, 1.0) == pytest.approx(0.040 + 0.005 * 2)
    # with two concurrencies only, no knee is tried (any bend fits two points)
    assert fit_step_cost(_fit_sweep().cells).knee_requests == 0.0


def test_step_cost_fit_on_noisy_cells_reports_how_well_it_fits():
    # the k=2 cell at c=4 ran 10% slow: its pass took 110 ms instead of 100
    sweep = sweep_of(*_fit_sweep().cells[:3], cell(2, 4, 4 * 2.0 / 0.110, steps(HIST_K2)),
                     cell(None, 2, 2 / _pass_s(2, 0), steps([0], undrafted=100)))
    fit = fit_step_cost(sweep.cells)
    assert 0.9 < fit.r2 < 1 and 0 < fit.median_relative_error < 0.1 and fit.num_cells == 5


def test_a_negative_drafting_cost_is_held_at_zero():
    # drafted passes faster than the same batch without drafts: noise, not a negative cost
    sweep = sweep_of(*_fit_sweep().cells[:2], cell(2, 1, 2.0 / 0.025, steps(HIST_K2)),
                     cell(2, 4, 4 * 2.0 / 0.050, steps(HIST_K2)))
    fit = fit_step_cost(sweep.cells)
    assert fit.held_at_zero == ["ngram lookup 2-4"] and fit.per_drafted_token_s == {"ngram lookup 2-4": 0.0}
    assert fit.per_request_s >= 0


def test_too_few_cells_to_fit_the_step_cost_is_refused():
    sweep = sweep_of(*_fit_sweep().cells[:3])  # 3 cells for 3 costs
    reason = fit_step_cost(sweep.cells)
    assert isinstance(reason, str) and "too few cells" in reason
    pred = predict(sweep, "ngram lookup 2-4")
    assert pred.rows == [] and pred.step_cost is None and "too few cells" in pred.refusals[0].reason


def test_throughput_is_c_times_tokens_per_pass_over_the_fitted_pass_time():
    # a measured k=1 cell that fits the costs exactly (L = 1.25 at 35 ms) but accepted less than the cut says
    pred = predict(_fit_sweep(cell(1, 1, 1.25 / _pass_s(1, 1), steps([30, 10]))), "ngram lookup 2-4")
    # the module docstring's worked example: c=4, k=1 -> 4 x 1.6 / 0.080 = 80 tokens/s, baseline 4 / 0.060
    row = pred.at(4, 1)
    assert row.tokens_per_step == pytest.approx(1.6) and row.pass_time_s == pytest.approx(0.080)
    assert row.output_tokens_per_s == pytest.approx(80.0) and row.speedup == pytest.approx(80 / (4 / 0.060))
    assert row.mean_acceptance_length == pytest.approx(1.6)
    assert pred.at(4, 0).output_tokens_per_s == pytest.approx(4 / 0.060)  # the baseline, from the same model
    assert pred.at(1, 1).output_tokens_per_s == pytest.approx(1.6 / 0.035)
    # at c=4, k=1 and k=2 both make 80 tokens/s: the smaller k wins; at c=1, k=2 (50 tokens/s) does
    assert [(r.concurrency, r.num_speculative_tokens) for r in pred.recommend()] == [(1, 2), (4, 1)]
    # measured cells are compared, the k=2 cells are where the acceptance was cut
    by_key = {(m.concurrency, m.num_speculative_tokens): m for m in pred.measured}
    assert [by_key[(1, k)].used_for_prediction for k in (0, 1, 2)] == [False, False, True]
    assert by_key[(1, 1)].relative_error == pytest.approx(1.6 / 1.25 - 1)
    assert pred.recorded_k == {1: 2, 4: 2}
    assert isinstance(predict(_fit_sweep(), "ngram lookup 2-4", recorded_k=1).at(1, 1), TuningRefusal)


def test_an_untraced_cell_is_cut_from_vllms_per_position_counters():
    from specviz.metrics import Summary, counted_step_figures

    # the docstring: 10 drafts at k=3, accepted per position [6, 4, 1], 40 output tokens
    summary = Summary.model_validate(dict(
        run_id="u", complete=True, method="ngram", num_speculative_tokens=3, concurrency=1, prompt_set="unit",
        max_tokens=40, num_requests=1, num_output_tokens=40, num_steps=0, vllm_version="0.32.0", platform="cpu",
        device_name="test cpu", mean_acceptance_length=2.1, draft_acceptance_rate=11 / 30, num_drafts=10,
        num_draft_tokens=30, num_accepted_tokens=11, num_accepted_tokens_per_pos=[6, 4, 1],
        acceptance_rate_per_pos=[0.6, 0.4, 0.1], request_acceptance_lengths=[], output_tokens_per_s=20.0,
        request_output_tokens_per_s_p50=None, time_to_first_token_s_p50=None, time_to_first_token_s_p90=None,
        time_per_output_token_s_p50=None, time_per_output_token_s_p90=None, counters_match=None))
    figures = counted_step_figures(summary)
    assert figures.accepted_histogram == [4, 2, 3, 1] and figures.num_steps_without_drafts == 19
    assert figures.num_engine_steps == 0 and figures.engine_step_time_s is None
    # cut at k=1: 6 of 10 drafted steps accepted the first draft
    assert mean_acceptance_length(figures.accepted_histogram, 1) == pytest.approx(1.6)
    untraced = cell(2, 1, 2.0 / _pass_s(1, 2), steps(HIST_K2, engine_steps=0, step_time=None))
    untraced = untraced.model_copy(update={"runs": [r.model_copy(update={"traced": False, "async_scheduling": True})
                                                          for r in untraced.runs]})
    pred = predict(sweep_of(*_fit_sweep().cells[:2], untraced, _fit_sweep().cells[3]), "ngram lookup 2-4")
    assert not pred.refusals and pred.at(1, 1).output_tokens_per_s == pytest.approx(1.6 / 0.035)
    from specviz.sweep_view import table_at_k

    row = {r["concurrency"]: r for r in table_at_k(pred, 2)}[1]
    assert row["measured tok/s (sweep)"] == f"{2.0 / _pass_s(1, 2):.1f} · untraced, async" and row["gap"] != "not measured"


def _costed_sweep(histogram: list[int], per_drafted_s: float) -> Sweep:
    """Baselines at c=1, 4 and the drafter at K = len(histogram) - 1 (every step drafted), timed exactly by
    base 20 ms + 10 ms per request + per_drafted_s per drafted token."""
    K = len(histogram) - 1
    L = tokens_per_step(steps(histogram), K)
    return sweep_of(*(cell(None, c, c / (0.020 + 0.010 * c), steps([0], undrafted=100)) for c in (1, 4)),
                    *(cell(K, c, c * L / (0.020 + 0.010 * c + per_drafted_s * c * K), steps(histogram))
                      for c in (1, 4)))


def test_recommends_the_k_with_the_highest_predicted_throughput():
    # L(k) barely grows past k=1 (few steps accept 2 or 3) while each drafted token costs 5 ms
    hist = [10, 30, 1, 1]
    pred = predict(_costed_sweep(hist, 0.005), "ngram lookup 2-4")
    tputs = [pred.at(1, k).output_tokens_per_s for k in range(4)]
    assert tputs == pytest.approx([1 / 0.030, (1 + 32 / 42) / 0.035, (1 + 34 / 42) / 0.040, (1 + 35 / 42) / 0.045])
    rec = pred.recommend()[0]
    assert rec.concurrency == 1 and rec.num_speculative_tokens == 1 == tputs.index(max(tputs))
    assert rec.spec.to_vllm() == {"method": "ngram", "num_speculative_tokens": 1, "prompt_lookup_min": 2,
                                  "prompt_lookup_max": 4}


def test_recommends_the_baseline_when_drafting_does_not_pay():
    # drafts are mostly rejected and each drafted token costs 30 ms
    pred = predict(_costed_sweep([30, 5, 1], 0.030), "ngram lookup 2-4")
    for rec in pred.recommend():
        assert rec.num_speculative_tokens == 0 and rec.spec is None and rec.speedup == 1.0
    assert all(r.speedup < 1 for r in pred.rows if r.num_speculative_tokens)
    assert "--speculative-config" not in serve_command_text("/m/target", None, trace=False)
    assert "speculative_config" not in python_config("/m/target", None).split("#")[0]


def test_exported_command_and_python_config_carry_the_chosen_k():
    spec = SpecConfig.from_dict(NGRAM | {"num_speculative_tokens": 2})
    cmd = serve_command_text("/m/target", spec, trace=False)
    assert cmd.startswith("vllm serve /m/target")
    assert '"num_speculative_tokens": 2' in cmd and "--speculative-config '" in cmd
    assert "--scheduler-cls" not in cmd  # a deployment does not need specviz's tracer
    py = python_config("/m/target", spec)
    assert "LLM(" in py and '"num_speculative_tokens": 2,' in py and "'/m/target'" in py
    compile(py, "<export>", "exec")


# ---- refusals -------------------------------------------------------------------------------------


def test_refuses_k_above_the_recorded_k():
    r = predict(_fit_sweep(), "ngram lookup 2-4").at(1, 3)
    assert isinstance(r, TuningRefusal) and r.num_speculative_tokens == 3
    assert "above the recorded num_speculative_tokens=2" in str(r)


@pytest.mark.parametrize("method,config,words", [
    ("dflash", {"model": "/m/dflash"}, "block"),
    ("dspark", {"model": "/m/dspark"}, "parallel"),
    ("mlp_speculator", {"model": "/m/mlp"}, "no mlp_speculator proposer"),
    ("custom_class", {"model": "my.Proposer"}, "custom proposer"),
    ("eagle3", {"model": "/m/eagle3", "parallel_drafting": True}, "parallel_drafting"),
    ("draft_model", {"model": "/m/draft", "rejection_sample_method": "block"}, "rejection_sample_method"),
])
def test_refuses_drafters_whose_drafts_depend_on_k(method, config, words):
    assert words in drafter_refusal(SpecConfig.from_recorded(config | {"method": method, "num_speculative_tokens": 3}))
    sweep = sweep_of(cell(None, 1, 30.0, steps([0], undrafted=300)),
                     cell(3, 1, 52.0, steps(HIST10, undrafted=20), drafter=method, method=method, config=config))
    pred = predict(sweep, method)
    assert pred.rows == [] and pred.recommend() == []
    assert pred.refusals[0].concurrency is None and words in pred.refusals[0].reason
    assert isinstance(pred.at(1, 1), TuningRefusal)


@pytest.mark.parametrize("method", ["ngram", "suffix", "draft_model", "eagle", "eagle3", "mtp", "medusa"])
def test_autoregressive_and_lookup_drafters_are_cut(method):
    assert drafter_refusal(SpecConfig.from_recorded({"method": method, "model": "/m/x", "num_speculative_tokens": 3})) is None


def test_a_schedule_is_not_cut_and_no_drafting_has_nothing_to_cut():
    scheduled = SpecConfig.from_dict(NGRAM | {"num_speculative_tokens": 4,
                                              "num_speculative_tokens_per_batch_size": [[1, 1, 4], [2, 64, 1]]})
    assert "measured as a row of its own" in drafter_refusal(scheduled)
    assert "nothing to cut" in drafter_refusal(None)


def test_a_concurrency_without_its_own_baseline_is_predicted_from_the_fit_but_none_at_all_is_refused():
    sweep = _fit_sweep(cell(2, 2, 2 * 2.0 / _pass_s(2, 4), steps(HIST_K2)))  # no baseline at c=2
    pred = predict(sweep, "ngram lookup 2-4")
    assert pred.concurrencies == [1, 2, 4] and not pred.refusals
    assert pred.at(2, 0).output_tokens_per_s == pytest.approx(2 / _pass_s(2, 0))
    no_baseline = sweep_of(*[c for c in sweep.cells if c.drafter != BASELINE])
    pred = predict(no_baseline, "ngram lookup 2-4")
    assert pred.rows == [] and "no baseline cells" in pred.refusals[0].reason


def test_refuses_cells_without_acceptance_figures_and_too_few_drafted_steps():
    fit = fit_step_cost(_fit_sweep().cells)
    blind = cell(3, 1, 52.0, steps([], engine_steps=0, step_time=None))  # untraced, no counters either
    r = predict_concurrency(blind, fit)
    assert isinstance(r, TuningRefusal) and "no acceptance figures" in r.reason
    few = cell(3, 1, 52.0, steps([1, 1, 0, MIN_DRAFTED_STEPS - 3], undrafted=20))
    r = predict_concurrency(few, fit)
    assert isinstance(r, TuningRefusal) and f"only {MIN_DRAFTED_STEPS - 1} drafted steps" in r.reason


def test_list_sweep_files_finds_one_sweep_per_folder(tmp_path):
    for name in ("b", "a"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "sweep.json").write_text("{}")
    (tmp_path / "loose.json").write_text("{}")
    assert [p.parent.name for p in list_sweep_files(tmp_path)] == ["a", "b"]
    assert list_sweep_files(tmp_path / "missing") == []
