"""The tuner on hand-built sweep cells, with the worked numbers of specviz/tuning.py."""

import pytest

from specviz.metrics import StepFigures
from specviz.sweep import BASELINE, Sweep, SweepCell, SweepGrid
from specviz.tuning import (MIN_DRAFTED_STEPS, TuningRefusal, acceptance_rate_per_pos, drafter_refusal,
                            expected_accepted, fit_leviathan_rate, leviathan_tokens_per_step, list_sweep_files,
                            mean_acceptance_length, predict, predict_concurrency, python_config, serve_command,
                            step_time_s, tokens_per_step, tokens_per_step_fixed_share)

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


def test_step_cost_is_linear_in_k_between_the_baseline_and_the_recorded_run():
    assert step_time_s(0.030, 0.045, 5, 1) == pytest.approx(0.033)
    assert step_time_s(0.030, 0.045, 5, 3) == pytest.approx(0.039)
    assert step_time_s(0.030, 0.045, 5, 0) == 0.030 and step_time_s(0.030, 0.045, 5, 5) == 0.045


def test_leviathan_closed_form_and_its_fitted_rate():
    assert leviathan_tokens_per_step(0.5, 3) == 1.875  # 1 + 0.5 + 0.25 + 0.125
    assert fit_leviathan_rate(1.875, 3) == pytest.approx(0.5)
    assert fit_leviathan_rate(4.0, 3) == 1.0 and leviathan_tokens_per_step(1.0, 3) == 4.0


def _worked_sweep(*extra: SweepCell) -> Sweep:
    # baseline 30 tok/s at 30 ms per step; ngram K=3 at 52 tok/s, 36 ms per step, 40 drafted + 20 undrafted steps
    return sweep_of(cell(None, 1, 30.0, steps([0], undrafted=300, step_time=0.030)),
                    cell(3, 1, 52.0, steps(HIST10, undrafted=20, step_time=0.036)), *extra)


def test_throughput_prediction_for_each_anchor():
    N, L3 = 130, 130 / 60  # N = 20 + 40 * 2.75 tokens, over 60 request-steps
    L1 = N / (20 + 110 / 1.75)
    t1 = 0.030 + 0.006 / 3
    expected_k1 = {
        "recorded": 52.0 * L1 / L3 * 0.036 / t1,
        "baseline": 30.0 * L1 * 0.030 / t1,
        "both": 30.0 * L1 * 0.030 / t1 * (52.0 / (30.0 * L3 * 0.030 / 0.036)) ** (1 / 3),
    }
    for anchor, tput in expected_k1.items():
        pred = predict(_worked_sweep(), "ngram lookup 2-4", anchor=anchor)
        row = pred.at(1, 1)
        assert row.output_tokens_per_s == pytest.approx(tput), anchor
        assert row.speedup == pytest.approx(tput / 30.0)
        assert row.mean_acceptance_length == 1.75 and row.tokens_per_step == pytest.approx(L1)
        assert row.engine_step_time_s == pytest.approx(t1)
        assert pred.at(1, 0).output_tokens_per_s == 30.0  # k=0 is the measured baseline under every anchor
        assert [r.num_speculative_tokens for r in pred.rows] == [0, 1, 2, 3]
    assert predict(_worked_sweep(), "ngram lookup 2-4", anchor="recorded").at(1, 3).output_tokens_per_s == 52.0
    assert predict(_worked_sweep(), "ngram lookup 2-4", anchor="both").at(1, 3).output_tokens_per_s == pytest.approx(52)


def test_measured_cells_at_other_k_are_compared_not_used():
    sweep = _worked_sweep(cell(1, 1, 40.0, steps([5, 35], undrafted=20)))
    pred = predict(sweep, "ngram lookup 2-4")
    assert pred.recorded_k == {1: 3}  # the largest k by default
    by_k = {m.num_speculative_tokens: m for m in pred.measured}
    assert [by_k[k].used_for_prediction for k in (0, 1, 3)] == [True, False, True]
    p1 = pred.at(1, 1).output_tokens_per_s
    assert by_k[1].predicted_output_tokens_per_s == p1
    assert by_k[1].relative_error == pytest.approx((p1 - 40.0) / 40.0)
    # predicting from the k=1 run instead refuses k=3, and the k=3 cell becomes the one compared
    from_k1 = predict(sweep, "ngram lookup 2-4", recorded_k=1)
    assert isinstance(from_k1.at(1, 3), TuningRefusal)


def test_recommends_the_k_with_the_highest_predicted_throughput():
    # L(k) barely grows past k=1 (few steps accept 2 or 3) while each k costs 1.67 ms more per step
    s = steps([10, 30, 1, 1], undrafted=10, step_time=0.015)
    L3 = tokens_per_step(s, 3)
    sweep = sweep_of(cell(None, 1, 100.0, steps([0], undrafted=400, step_time=0.010)),
                     cell(3, 1, 100.0 * L3 * 0.010 / 0.015, s))
    pred = predict(sweep, "ngram lookup 2-4")
    tputs = [pred.at(1, k).output_tokens_per_s for k in range(4)]
    assert tputs[1] == pytest.approx(100.0 * tokens_per_step(s, 1) * 0.010 / (0.010 + 0.005 / 3))  # 138.9
    [rec] = pred.recommend()
    assert rec.num_speculative_tokens == 1 == tputs.index(max(tputs))
    assert rec.speculative_config == {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4,
                                      "num_speculative_tokens": 1}


def test_recommends_the_baseline_when_drafting_does_not_pay():
    # drafts are mostly rejected and a drafted step costs 3x a plain one
    sweep = sweep_of(cell(None, 1, 100.0, steps([0], undrafted=400, step_time=0.010)),
                     cell(2, 1, 45.0, steps([30, 5, 1], undrafted=10, step_time=0.030)))
    pred = predict(sweep, "ngram lookup 2-4")
    [rec] = pred.recommend()
    assert rec.num_speculative_tokens == 0 and rec.speculative_config is None and rec.speedup == 1.0
    assert all(r.output_tokens_per_s < 100.0 for r in pred.rows if r.num_speculative_tokens)
    assert "--speculative-config" not in pred.serve_command(0)
    assert "speculative_config" not in pred.python_config(0).split("#")[0]


def test_exported_command_and_python_config_carry_the_chosen_k():
    cmd = serve_command("/m/target", NGRAM | {"num_speculative_tokens": 2})
    assert cmd.startswith("vllm serve /m/target")
    assert '"num_speculative_tokens": 2' in cmd and "--speculative-config '" in cmd
    assert "--scheduler-cls" not in cmd  # a deployment does not need specviz's tracer
    py = python_config("/m/target", NGRAM | {"num_speculative_tokens": 2})
    assert "LLM(" in py and '"num_speculative_tokens": 2,' in py and "'/m/target'" in py
    compile(py, "<export>", "exec")


# ---- refusals -------------------------------------------------------------------------------------


def test_refuses_k_above_the_recorded_k():
    r = predict(_worked_sweep(), "ngram lookup 2-4").at(1, 4)
    assert isinstance(r, TuningRefusal) and r.num_speculative_tokens == 4
    assert "above the recorded num_speculative_tokens=3" in str(r)


@pytest.mark.parametrize("method,config,words", [
    ("dflash", {"model": "/m/dflash"}, "block"),
    ("dspark", {"model": "/m/dspark"}, "parallel"),
    ("mlp_speculator", {"model": "/m/mlp"}, "no mlp_speculator proposer"),
    ("custom_class", {"model": "my.Proposer"}, "custom proposer"),
    ("eagle3", {"model": "/m/eagle3", "parallel_drafting": True}, "parallel_drafting"),
    ("draft_model", {"model": "/m/draft", "rejection_sample_method": "block"}, "rejection_sample_method"),
])
def test_refuses_drafters_whose_drafts_depend_on_k(method, config, words):
    assert words in drafter_refusal(method, config)
    sweep = sweep_of(cell(None, 1, 30.0, steps([0], undrafted=300)),
                     cell(3, 1, 52.0, steps(HIST10, undrafted=20), drafter=method, method=method, config=config))
    pred = predict(sweep, method)
    assert pred.rows == [] and pred.recommend() == []
    assert pred.refusals[0].concurrency is None and words in pred.refusals[0].reason
    assert isinstance(pred.at(1, 1), TuningRefusal)


@pytest.mark.parametrize("method", ["ngram", "suffix", "draft_model", "eagle", "eagle3", "mtp", "medusa"])
def test_autoregressive_and_lookup_drafters_are_cut(method):
    assert drafter_refusal(method, {"model": "/m/x"}) is None


def test_refuses_a_concurrency_without_baseline_but_predicts_the_others():
    sweep = _worked_sweep(cell(3, 4, 120.0, steps(HIST10, undrafted=20)))
    pred = predict(sweep, "ngram lookup 2-4")
    assert pred.concurrencies == [1, 4]
    r = pred.at(4, 2)
    assert isinstance(r, TuningRefusal) and "no baseline" in r.reason
    assert not isinstance(pred.at(1, 2), TuningRefusal)
    assert [rec.concurrency for rec in pred.recommend()] == [1]


def test_refuses_untraced_runs_and_too_few_drafted_steps():
    base = cell(None, 1, 30.0, steps([0], undrafted=300))
    untraced = cell(3, 1, 52.0, steps([0, 0, 0, 0], engine_steps=0, step_time=None))
    r = predict_concurrency(base, untraced)
    assert isinstance(r, TuningRefusal) and "no traced steps" in r.reason
    r = predict_concurrency(cell(None, 1, 30.0, steps([0], engine_steps=0, step_time=None)),
                            cell(3, 1, 52.0, steps(HIST10, undrafted=20)))
    assert isinstance(r, TuningRefusal) and "baseline run has no traced steps" in r.reason
    few = cell(3, 1, 52.0, steps([1, 1, 0, MIN_DRAFTED_STEPS - 3], undrafted=20))
    r = predict_concurrency(base, few)
    assert isinstance(r, TuningRefusal) and f"only {MIN_DRAFTED_STEPS - 1} drafted steps" in r.reason
    assert isinstance(predict_concurrency(None, cell(3, 1, 52.0, steps(HIST10))), TuningRefusal)


def test_list_sweep_files_finds_one_sweep_per_folder(tmp_path):
    for name in ("b", "a"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "sweep.json").write_text("{}")
    (tmp_path / "loose.json").write_text("{}")
    assert [p.parent.name for p in list_sweep_files(tmp_path)] == ["a", "b"]
    assert list_sweep_files(tmp_path / "missing") == []
