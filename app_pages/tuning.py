"""Tuning: what to serve at each batch size, predicted from a sweep, confirmed by measurement, exported as
vLLM's per-batch-size schedule; below it the prediction at every k, to explore."""

from __future__ import annotations

import streamlit as st

from specviz import ui, ui_imported, ui_sweeps
from specviz.acceptance_at_k import CUT_IS_VALID, MIN_DRAFTED_STEPS
from specviz.charts import sweeps as sweep_charts
from specviz.charts import tuning as tuning_charts
from specviz.config import describe_spec
from specviz.prediction import fixed_k_drafters, predict, recorded_ks
from specviz.schedule import (
    export_reason,
    schedule_verdict,
    short_of_best,
    single_run_caveat,
    summed_above_schedule,
    tuned,
)
from specviz.serve_command import python_config, serve_command_text
from specviz.sweep import SweepError
from specviz.sweep_files import load_confirmation, load_head_to_heads
from specviz.sweep_view import (
    MEASURED_IN_SWEEP,
    confidence_sentence,
    explore_vs_export,
    measured_apart_warning,
    recommendation_table,
    refusals_at_k,
    runs_per_cell,
    schedule_column_source,
    schedule_option,
    step_cost_text,
    table_at_k,
    traced_note,
    tune_command,
    untraced_note,
)

st.title("Tuning num_speculative_tokens")
paths = ui_imported.with_opened(ui_sweeps.recorded_sweeps(), key="tune_open", select_key="tune_sweep")  # issue 45: a folder, or vLLM's own
with st.sidebar:
    st.subheader("Sweep")
    ui.keep_valid("tune_sweep", list(paths))
    name = st.selectbox("Recorded sweep (sample_runs/sweeps/)", list(paths), key="tune_sweep")
opened = ui.open_sweep(paths[name], name)
if opened is None:
    st.stop()
sweep, table = opened
names = fixed_k_drafters(sweep)
if not names:
    st.info("This sweep holds only baseline cells: there is no drafter to tune.")
    st.stop()
with st.sidebar:
    # keyed by the sweep (and drafter): a choice made on another sweep never carries over
    drafter = st.selectbox("Drafter", names, key=f"tune_drafter:{name}")
    ks = recorded_ks(sweep, drafter)
    recorded_k = st.selectbox("Predict from the run at k =", ks, index=len(ks) - 1, key=f"tune_recorded_k:{name}:{drafter}",
                              help="This cell's acceptance is cut at every smaller k; the cost of a target pass "
                                   "is fitted across all the sweep's cells. The drafter's cells at other k are drawn "
                                   "over the prediction to show the gap.")

pred = predict(sweep, drafter, recorded_k)
caption = sweep_charts.sweep_caption(table, model=sweep.grid.target_model)
try:
    confirmation = load_confirmation(paths[name].parent, drafter)
    head_to_heads = load_head_to_heads(paths[name].parent, drafter)
except SweepError as e:
    st.error(f"The confirmation of {drafter} cannot be opened: {e}")
    confirmation, head_to_heads = None, []
result = tuned(pred, sweep, confirmation, head_to_heads)
tune_cmd = tune_command(name, drafter)
ui_imported.imported_section(sweep, pred, drafter)  # issue 45: what a sweep read from vLLM's files can and cannot say

# The answer first, once: what to serve (copyable), how sure, and the chart that shows why. Everything
# that qualifies it (the table, the verdicts, provenance, recording notes) comes below.
if not result.rows:
    st.info("Nothing to recommend: every concurrency was refused (see below).")
else:
    st.markdown(f"#### Serve: {describe_spec(result.exported)}")
    st.code(serve_command_text(sweep.grid.target_model, result.exported, trace=False), language="bash", wrap_lines=True)
    if sure := confidence_sentence(result, confirmation or sweep):
        st.markdown(sure)
    st.plotly_chart(tuning_charts.schedule_chart(result, pred, caption), key="tune_chart_schedule", width="stretch")
for refusal in pred.refusals:
    st.warning(f"No prediction — {refusal}")

if result.rows:
    st.subheader("Why: the picks, measured")
    idle = ("; where the baseline won, the drafter loaded at k=0, which is what a k=0 range of a schedule serves"
            if any(r.idle for r in result.rows) else "")
    source = ("picked on the confirmation `specviz tune` measured (the predicted best k, its neighbours and the "
              f"baseline{idle}; {confirmation.grid.repeats} runs each)" if confirmation is not None else
              "picked on the sweep's own cells (every k it recorded); confirm on fresh runs with "
              f"`{tune_cmd}`")
    st.markdown(
        f"At each concurrency the tuner **predicts** the best k from the **{drafter}** run at k={recorded_k}; the "
        f"**confirmed** k is {source}: the best median, or the smallest k whose runs cannot be told apart from it. "
        "Every figure stands beside the **measured baseline**. Output tokens/s; measured figures are medians "
        f"(min-max) over {runs_per_cell(result)}; predicted → measured: the predicted best k, its "
        "prediction and its measured median; speedup: the confirmed k's median over the baseline's"
        + ("; k=0, idle: the drafter loaded at k=0 (median)." if any(r.idle for r in result.rows) else ".")
        + " Each column is one measurement set, named in its header.")
    recommended = recommendation_table(result)
    # widths that fit 1280 px; a header cut short shows whole, with where it was measured, on hover
    widths = {"concurrency": 90, "speedup": 70}
    st.dataframe(recommended, key="tune_recommend", hide_index=True, column_config={
        column: st.column_config.NumberColumn(format="%.2fx", width=70) if column == "speedup" else
        st.column_config.Column(width=widths.get(column, 135 if column.startswith("k=0") else 165), help=column)
        for column in (recommended[0] if recommended else {})
    })
    if where := schedule_column_source(result, confirmation or sweep):
        st.caption(where)
    if result.schedule_measured_in in ("confirmation", "head-to-head"):
        st.caption(f"The chart draws the configs measured beside the schedule in the {result.schedule_measured_in} "
                   f"({sweep_charts.recorded_on(result.schedule_cells)}), in the same rounds; the sweep's own cells "
                   f"({sweep_charts.recorded_on(sweep.cells)}) are in Explore k below.")
    if verdict := schedule_verdict(result):
        box = st.warning if short_of_best(result) else st.info if summed_above_schedule(result) else st.success
        box("**The schedule measured as a row.** " + " ".join(verdict))
    ranges = ("Batch sizes between two measured concurrencies take the k of the next one up; vLLM keeps the last k "
              "for every larger batch. " if result.exported is not None and result.exported.schedule else "")
    st.markdown(f"**Export:** {describe_spec(result.exported)}. {ranges}One k everywhere is exported as a static "
                "config and k = 0 everywhere as none: a k = 0 range is not free (docs/schedule-cost.md).")
    if reason := export_reason(result):
        st.info(reason)
    if caveat := single_run_caveat(result):
        st.warning(caveat)
    st.code(python_config(sweep.grid.target_model, result.exported), language="python")
    if result.exported is not None and result.exported.schedule and result.schedule_measured_in is None:
        st.info(f"This schedule has not been measured yet. `{tune_cmd}` confirms the picks and measures it head to "
                "head with the static configs, in the same rounds. Or run the sweep's command with "
                f"`{schedule_option(result.exported)}` and a new `--out` folder: added to this sweep's folder, it "
                "would be measured in rounds of its own, after the grid.")

st.subheader("Explore k: the prediction at every k")
st.markdown(
    f"Acceptance from the **{drafter}** cell at **k={recorded_k}**, cut at every smaller k; the cost of a target pass "
    "from a model fitted across all the sweep's cells. Measured cells (the median of their runs, bars from min to "
    "max) are drawn over the prediction with their gap: (predicted − measured) / measured. The slider explores; "
    "what to serve is the export above.")
st.caption(explore_vs_export(pred, result))
if pred.step_cost is not None:
    st.caption("Step cost: " + step_cost_text(pred.step_cost))
if note := untraced_note(pred):
    st.info(note)
if note := traced_note(pred):
    st.caption(note)
k_max = max(pred.recorded_k.values(), default=recorded_k)
k = st.slider("num_speculative_tokens (k)", 1, max(k_max, 2), value=k_max, key=f"tune_k:{name}:{drafter}:{recorded_k}",
              help="Drafts proposed per step. Predictions exist up to the recorded k.")
for r in refusals_at_k(pred, k):
    st.warning(f"No prediction — {r}")
st.dataframe(table_at_k(pred, k), key="tune_table", hide_index=True, column_config={
    "acceptance length": st.column_config.NumberColumn(format="%.2f", help="mean acceptance length, as vLLM counts it"),
    "tokens per pass": st.column_config.NumberColumn(format="%.2f", help="output tokens per target pass"),
    "ms per pass": st.column_config.NumberColumn(format="%.1f", help="time per target pass, from the fitted step cost"),
    "predicted tok/s": st.column_config.NumberColumn(format="%.1f", help="output tokens/s"),
    "speedup": st.column_config.NumberColumn(format="%.2fx", help="predicted, over the predicted baseline"),
    MEASURED_IN_SWEEP: st.column_config.TextColumn(help="output tokens/s, median (min-max) of the sweep cell's runs; "
                                                       "untraced: acceptance from vLLM's counters, async or sync "
                                                       "scheduling as the server ran"),
    "gap": st.column_config.TextColumn(help="(predicted - measured) / measured"),
})
# one above the other: side by side, their titles and captions do not fit a 1280 px screen
st.plotly_chart(tuning_charts.tuning_throughput(pred, caption, k), key="tune_chart_tput", width="stretch")
st.plotly_chart(tuning_charts.tuning_acceptance(pred, caption, k), key="tune_chart_al", width="stretch")

with st.expander("How the prediction works"):
    why = CUT_IS_VALID.get(pred.method or "")
    st.markdown(f"""
- **Acceptance**: a step that accepted *a* of the recorded k={recorded_k} drafts accepts min(*a*, k) of k,
  because the first k drafts do not depend on k{f" ({pred.method}: {why})" if why else ""}. Mean acceptance
  length = 1 + E[min(*a*, k)] over drafted steps, as vLLM counts it; per-position rates below k are unchanged.
- **Tokens per target pass** L(k): steps without drafts (prefill, no n-gram match) commit one token and happen
  at the same places whatever k is; only drafted steps get fewer as each commits more.
- **Step cost** (fitted): a target pass over c requests verifies c + Dr tokens, Dr = c · f · k the drafts (f: the
  share of request-steps that had drafts, below 1 when the drafter finds nothing at some steps). Its time is
  base + per request · max(0, c − knee) + per drafted token · Dr, each drafter with its own cost per drafted token
  (drafting it and verifying it). The knee is the batch below which one more request costs nothing measurable (a
  pass bound by reading the weights): it is searched in half requests and kept where the fit is best, 0 unless the
  sweep has three or more concurrencies. Each cell's time per pass is what its measured throughput implies, c · L / output tokens/s;
  the costs are fitted by least squares on relative error across every cell of the sweep, and a
  cost that comes out negative is held at 0. {step_cost_text(pred.step_cost) if pred.step_cost else "Not fitted."}
- **Throughput**: tput(k) = c · L(k) / t(k), k=0 (the baseline) from the same model, so speedups compare like
  with like; the measured cells are drawn beside it, not used as anchors.
- **Leviathan et al. 2023** (dotted): (1 − a^(k+1)) / (1 − a) with one per-token rate *a* fitted at the recorded
  k, for comparison; real per-position rates fall with position, so the prediction uses the measured histogram.
- **Untraced cells**: vLLM's counters give the accepted tokens per draft position, which hold the same histogram
  (steps accepting exactly a drafts = per position a−1 minus per position a), so they are cut at k alike.
- **Refused** (a reason instead of a number): k above the recorded k, drafters whose drafts depend on k
  (dflash, dspark, parallel drafting), no baseline cells, cells with no acceptance figures (neither traced nor
  with vLLM's counters), fewer than {MIN_DRAFTED_STEPS} drafted steps, too few cells to fit the step cost.
""")

st.caption(caption)
if apart := measured_apart_warning(sweep, name):
    st.warning(apart)
ui.sweep_notes(sweep, name)
