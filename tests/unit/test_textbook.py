"""The textbook formulas (specviz.textbook) with the worked numbers of their docstrings, and their charts."""

import json

import pytest
from run_builders import make_run, make_step
from test_tuning import cell, steps, sweep_of

from specviz import textbook as tb
from specviz.acceptance_at_k import mean_acceptance_length
from specviz.charts import textbook as charts
from specviz.runfile import Request
from specviz.step_cost import StepCostFit

# ---- the formulas, one worked example each ---------------------------------------------------------


def test_expected_tokens_per_pass_worked_example():
    assert tb.expected_tokens_per_pass(3, 0.6) == pytest.approx(2.176)  # (1 - 0.1296) / 0.4
    assert tb.expected_tokens_per_pass(3, 0.6) == pytest.approx(1 + 0.6 + 0.36 + 0.216)
    assert tb.expected_tokens_per_pass(3, 1.0) == 4  # every draft accepted: k + 1
    assert tb.expected_tokens_per_pass(3, 0.0) == 1  # none: the correction token alone
    assert tb.expected_tokens_per_pass(0, 0.6) == 1


def test_speedup_worked_example():
    assert tb.textbook_speedup(3, 0.6, 0.1) == pytest.approx(2.176 / 1.3)
    assert round(tb.textbook_speedup(3, 0.6, 0.1), 2) == 1.67
    assert tb.textbook_speedup(3, 0.6, 0.0) == pytest.approx(2.176)  # free drafts: the tokens per pass


def test_break_even_alpha_worked_example():
    assert tb.break_even_alpha(1, 0.1) == pytest.approx(0.1)  # 1 + α = 1.1
    alpha = tb.break_even_alpha(3, 0.1)
    assert alpha == pytest.approx(0.2330, abs=1e-4)
    assert tb.expected_tokens_per_pass(3, alpha) == pytest.approx(1.3)
    assert tb.textbook_speedup(3, alpha, 0.1) == pytest.approx(1.0)  # it is where drafting neither wins nor loses
    assert tb.textbook_speedup(3, alpha + 0.01, 0.1) > 1 > tb.textbook_speedup(3, alpha - 0.01, 0.1)
    assert tb.break_even_alpha(3, 1.0) is None and tb.break_even_alpha(1, 2.5) is None  # c >= 1: never pays
    assert tb.break_even_alpha(3, 0.0) == 0.0
    # a dearer draft or more of them needs a better drafter
    assert tb.break_even_alpha(3, 0.2) > alpha and tb.break_even_alpha(5, 0.1) > alpha


def test_alpha_fitted_from_a_length_and_from_the_first_draft():
    assert tb.alpha_at_length(2.176, 3) == pytest.approx(0.6, abs=1e-6)
    assert tb.alpha_at_length(1.75, 1) == pytest.approx(0.75, abs=1e-9)
    assert tb.first_draft_alpha([1, 1, 0, 2]) == pytest.approx(0.75)  # 3 of 4 steps accepted the first draft
    with pytest.raises(tb.TextbookError, match="no drafted steps"):
        tb.first_draft_alpha([0, 0, 0])


def test_draft_acceptance_rate_is_not_alpha():
    """Under a constant α the draft acceptance rate reads (E - 1) / k: 0.393 for α = 0.6, k = 3."""
    # 1000 steps at k=3 distributed exactly as a constant α = 0.6 gives: P(a) = 0.6^a 0.4 (a < 3), 0.6^3
    result = tb.histogram_vs_formula([400, 240, 144, 216], 3)
    assert result.alpha == pytest.approx(0.6)
    assert result.draft_acceptance_rate == pytest.approx((2.176 - 1) / 3)
    assert result.draft_acceptance_rate < result.alpha


def test_conditional_rates():
    assert tb.conditional_rates([0.8, 0.5, 0.3]) == pytest.approx([0.8, 0.625, 0.6])
    assert tb.conditional_rates([0.5, 0.0, 0.0]) == [0.5, 0.0, None]


def test_over_promise_worked_example():
    assert tb.over_promise(2.44, 2.3) == pytest.approx(0.0609, abs=1e-4)
    assert tb.over_promise(2.3, 2.3) == 0


def test_draft_cost_from_the_step_cost_fit_worked_example():
    fit = StepCostFit(base_s=0.020, per_request_s=0.010, per_drafted_token_s={"d": 0.005}, r2=1.0,
                      median_relative_error=0.0, num_cells=4)
    assert tb.draft_cost(fit, "d", 1) == pytest.approx(5 / 30)
    assert tb.draft_cost(fit, "d", 4) == pytest.approx(20 / 60)
    assert tb.draft_cost(fit, "other", 4) == 0.0
    # the formula's speedup with that c is the fit's own: E * t_baseline / t_drafting (every request drafts)
    for conc, k, alpha in [(1, 3, 0.6), (4, 2, 0.8)]:
        by_fit = tb.expected_tokens_per_pass(k, alpha) * fit.pass_time_s("baseline", conc, 0, 0.0) \
            / fit.pass_time_s("d", conc, k, 1.0)
        assert tb.textbook_speedup(k, alpha, tb.draft_cost(fit, "d", conc)) == pytest.approx(by_fit)


# ---- a run beside the formula -------------------------------------------------------------------


def test_histogram_vs_formula_worked_example():
    result = tb.histogram_vs_formula([6, 6, 6, 12], 3)
    assert result.alpha == pytest.approx(0.8)
    assert result.acceptance_rate_per_pos == pytest.approx([0.8, 0.6, 0.4])
    assert [x.measured for x in result.lengths[:3]] == pytest.approx([1.8, 2.4, 2.8])
    assert [x.formula for x in result.lengths[:3]] == pytest.approx([1.8, 2.44, 2.952])
    assert [x.over_promise for x in result.lengths[:3]] == pytest.approx([0, 0.01667, 0.05429], abs=1e-4)
    assert [x.num_speculative_tokens for x in result.lengths] == tb.FORMULA_KS  # E(k) for k = 1..8
    assert all(x.measured is None for x in result.lengths[3:])  # nothing measured above the recorded k
    assert result.measured_length == pytest.approx(2.8)
    assert result.formula_positions == pytest.approx([0.8, 0.64, 0.512])
    assert "over-promises" in tb.over_promise_text(result)


def test_constant_acceptance_matches_the_formula_and_decay_over_promises_more_at_each_k():
    constant = tb.histogram_vs_formula([400, 240, 144, 216], 3)  # α = 0.6 at every position
    assert all(x.over_promise == pytest.approx(0, abs=1e-12) for x in constant.lengths[:3])
    assert "holds" in tb.over_promise_text(constant)
    decaying = tb.histogram_vs_formula([20, 40, 20, 20], 3)  # per position 0.8, 0.4, 0.2
    promised = [x.over_promise for x in decaying.lengths[:3]]
    assert promised[0] == 0 and 0 < promised[1] < promised[2]
    rising = tb.histogram_vs_formula([50, 0, 0, 50], 3)  # once the first is right, all are: 0.5, 0.5, 0.5
    assert rising.lengths[2].over_promise < 0 and "under-promises" in tb.over_promise_text(rising)


def test_histogram_vs_formula_refuses_what_it_cannot_compare():
    with pytest.raises(tb.TextbookError, match="at least 30"):
        tb.histogram_vs_formula([1, 1, 0, 2], 3)
    with pytest.raises(tb.TextbookError, match="no acceptance figures"):
        tb.histogram_vs_formula([], 3)
    at_one = tb.histogram_vs_formula([10, 30], 1)
    assert "cannot test" in tb.over_promise_text(at_one)
    refused = tb.histogram_vs_formula([6, 6, 6, 12], 3, refusal="dflash drafts a whole block")
    assert [x.measured for x in refused.lengths[:3]] == [None, None, pytest.approx(2.8)]
    assert "cannot be cut" in tb.over_promise_text(refused)


def _run_with(histogram: list[int], k: int):
    """A traced run whose drafted steps accepted a drafts per the histogram (plus a prefill step)."""
    step_list, i = [make_step(0, [], [100])], 1
    for accepted, count in enumerate(histogram):
        for _ in range(count):
            step_list.append(make_step(i, list(range(1, k + 1)), list(range(1, accepted + 1)) + [99]))
            i += 1
    out = [t for s in step_list for t in s.committed_token_ids]
    req = Request(request_id="r0", prompt="p", output_token_ids=out, output_text="x", start_time_s=999.0,
                  first_token_time_s=1000.0, end_time_s=1000.0 + i, finish_reason="length", steps=step_list)
    return make_run([req], k=k)


def test_run_vs_formula_reads_the_run():
    run = _run_with([6, 6, 6, 12], 3)
    result = tb.run_vs_formula(run)
    assert result.alpha == pytest.approx(0.8)
    assert result.measured_length == pytest.approx(mean_acceptance_length([6, 6, 6, 12], 3))
    plain = run.requests[0].model_copy(update={"steps": [make_step(0, [], [100])], "output_token_ids": [100]})
    with pytest.raises(tb.TextbookError, match="without speculative decoding"):
        tb.run_vs_formula(make_run([plain], k=None))


# ---- a sweep beside the formula -----------------------------------------------------------------

D = "ngram lookup 2-4"
BASE = steps([0], undrafted=100)  # a baseline cell's figures: no drafts


def exact_sweep():
    """Cells priced exactly by base 20 ms + 10 ms per request + 5 ms per drafted token (knee 0).

    Baseline: c=1 30 ms per pass -> 33.3 tok/s; c=4 60 ms -> 66.7 tok/s. Drafter at k=2, every step
    drafting, histogram [10, 10, 20] (α = 0.75, L = 2.25): c=1 40 ms -> 56.25 tok/s; c=4 100 ms -> 90 tok/s.
    """
    hist = steps([10, 10, 20], undrafted=0)
    return sweep_of(cell(None, 1, 1 / 0.030, BASE), cell(None, 4, 4 / 0.060, BASE),
                    cell(2, 1, 2.25 / 0.040, hist), cell(2, 4, 4 * 2.25 / 0.100, hist))


def test_sweep_vs_formula_on_an_exactly_priced_sweep():
    result = tb.sweep_vs_formula(exact_sweep(), D, 2)
    assert result.step_cost.base_s == pytest.approx(0.020, abs=1e-6)
    assert [r.concurrency for r in result.rows] == [1, 4]
    assert [r.draft_cost for r in result.rows] == pytest.approx([5 / 30, 20 / 60], abs=1e-4)
    assert result.alpha == pytest.approx(0.75)
    for r in result.rows:
        assert r.alpha == pytest.approx(0.75) and r.drafted_share == 1.0
        assert r.predicted_speedup == pytest.approx(tb.textbook_speedup(2, 0.75, r.draft_cost))
        # the cost is priced exactly and every step drafts: the only gap left is E(k, α) against the measured L
        assert r.relative_gap == pytest.approx(tb.expected_tokens_per_pass(2, 0.75) / 2.25 - 1, abs=1e-4)
    assert result.break_even_at(1, 1) == pytest.approx(5 / 30, abs=1e-4)
    assert result.break_even_at(4, 2) == pytest.approx(tb.break_even_alpha(2, 1 / 3), abs=1e-4)
    assert "did at 100% of the steps" in tb.speedup_gap_text(result)


def test_sweep_vs_formula_refuses_with_a_reason():
    with pytest.raises(tb.TextbookError, match="no cell"):
        tb.sweep_vs_formula(exact_sweep(), D, 5)
    few = sweep_of(cell(None, 1, 30, BASE), cell(None, 4, 60, BASE), cell(2, 1, 50, steps([1, 1, 1])),
                   cell(2, 4, 90, steps([1, 1, 1])))
    with pytest.raises(tb.TextbookError, match="too few drafted steps"):
        tb.sweep_vs_formula(few, D, 2)


def test_closest_drafter_prefers_the_one_that_drafted_most():
    mostly = sweep_of(cell(None, 1, 30, BASE), cell(3, 1, 40, steps([10, 10, 10, 10], undrafted=10)))
    rarely = sweep_of(cell(None, 1, 30, BASE), cell(3, 1, 40, steps([10, 10, 10, 10], undrafted=500)))
    assert tb.closest_drafter({"chat": rarely, "code": mostly}, "ngram", 3) == ("code", D)
    assert tb.closest_drafter({"chat": rarely}, "eagle3", 3) is None
    assert tb.closest_drafter({"chat": rarely}, "ngram", 1) is None


# ---- charts ---------------------------------------------------------------------------------------


def spec(fig) -> dict:
    return json.loads(fig.to_json())


def traces(fig, role: str) -> list[dict]:
    return [t for t in spec(fig)["data"] if (t.get("meta") or {}).get("role") == role]


def test_tokens_per_pass_chart_draws_the_formula_and_the_cut_measurement():
    result = tb.histogram_vs_formula([20, 40, 20, 20], 3)
    fig = charts.tokens_per_pass(result, "prov · vLLM 0.32.0")
    (formula,), (measured,) = traces(fig, "formula"), traces(fig, "measured")
    assert formula["x"] == tb.FORMULA_KS
    assert formula["y"] == pytest.approx([tb.expected_tokens_per_pass(k, 0.8) for k in tb.FORMULA_KS])
    assert measured["x"] == [1, 2, 3] and measured["y"] == pytest.approx([1.8, 2.2, 2.4])
    assert formula["text"][1:3] == [f"{x.over_promise:+.1%}" for x in result.lengths[1:3]]
    assert measured["marker"]["symbol"][-1] == "diamond-open"  # the recorded k
    assert "vLLM 0.32.0" in spec(fig)["layout"]["title"]["text"]


def test_per_position_chart_sets_measured_beside_alpha_powers():
    result = tb.histogram_vs_formula([20, 40, 20, 20], 3)
    fig = charts.per_position(result, "prov")
    (measured,), (formula,) = traces(fig, "measured"), traces(fig, "formula")
    assert measured["y"] == pytest.approx([0.8, 0.4, 0.2])
    assert formula["y"] == pytest.approx([0.8, 0.64, 0.512])
    assert measured["customdata"] == ["80%", "50%", "50%"]  # the conditional rates, in the hover


def test_speedup_and_break_even_charts():
    result = tb.sweep_vs_formula(exact_sweep(), D, 2)
    fig = charts.speedup(result, "prov")
    (formula,), (measured,) = traces(fig, "formula"), traces(fig, "measured")
    assert formula["x"] == [1, 4] and formula["y"] == pytest.approx([r.predicted_speedup for r in result.rows])
    assert measured["y"] == pytest.approx([r.measured_speedup for r in result.rows])
    assert formula["text"] == [f"{r.relative_gap:+.0%}" for r in result.rows]
    fig = charts.break_even(result, "prov")
    lines = traces(fig, "break_even")
    assert [t["meta"]["concurrency"] for t in lines] == [1, 4]
    assert lines[0]["y"] == pytest.approx([tb.break_even_alpha(k, 5 / 30) for k in tb.FORMULA_KS], abs=1e-4)
    assert traces(fig, "alpha")[0]["y"] == pytest.approx([0.75, 0.75])
    assert not spec(fig)["layout"].get("annotations")


def test_break_even_chart_names_the_concurrencies_where_no_alpha_pays():
    result = tb.sweep_vs_formula(exact_sweep(), D, 2)
    dear = result.model_copy(update={"break_even": {1: result.break_even[1], 4: [None] * len(tb.FORMULA_KS)}})
    fig = charts.break_even(dear, "prov")
    assert [t["meta"]["concurrency"] for t in traces(fig, "break_even")] == [1]
    assert "concurrency 4" in spec(fig)["layout"]["annotations"][0]["text"]
