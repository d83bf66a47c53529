"""Tuning: predict acceptance and throughput at every num_speculative_tokens from one run per concurrency."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from specviz import ui
from specviz.charts import sweeps as sweep_charts
from specviz.charts import tuning as tuning_charts
from specviz.config import ConfigError
from specviz.tuning import (
    CUT_IS_VALID,
    MIN_DRAFTED_STEPS,
    Prediction,
    StepCostFit,
    TuningRefusal,
    drafters,
    list_sweep_files,
    predict,
    recorded_ks,
)


def _at_k(pred: Prediction, k: int) -> pd.DataFrame:
    """One row per concurrency at k: predicted figures, the measured cell if any, and the gap."""
    measured = {(m.concurrency, m.num_speculative_tokens): m for m in pred.measured}
    rows = []
    for c in pred.concurrencies:
        row = pred.at(c, k)
        m = measured.get((c, k))
        if isinstance(row, TuningRefusal):
            rows.append({"concurrency": c, "output tokens/s (measured)": _measured(m), "refused": row.reason})
            continue
        rows.append({
            "concurrency": c,
            "mean acceptance length": row.mean_acceptance_length,
            "tokens per target pass": row.tokens_per_step,
            "time per pass (ms, fitted)": row.pass_time_s * 1000,
            "output tokens/s (predicted)": row.output_tokens_per_s,
            "speedup vs baseline": row.speedup,
            "output tokens/s (measured)": _measured(m),
            "measured min-max": _spread(m),
            "measured as": _how(m),
            "gap": f"{m.relative_error:+.1%}" if m else NOT_MEASURED,  # at the recorded k too: the fitted cost's own miss
        })
    return pd.DataFrame(rows)


NOT_MEASURED = "–"  # a k the sweep did not record: shown as a dash, not as "None"


def _measured(m) -> str:
    """The measured median output tokens/s as text ('76.0'), or a dash when the sweep has no such cell."""
    return f"{m.output_tokens_per_s:.1f}" if m else NOT_MEASURED


def _spread(m) -> str:
    """'76.0-80.1 (3 runs)', '1 run', or a dash when the sweep has no such cell."""
    if m is None:
        return NOT_MEASURED
    if m.repeats == 1:
        return "1 run"
    return f"{m.output_tokens_per_s_min:.1f}-{m.output_tokens_per_s_max:.1f} ({m.repeats} runs)"


def _how(m) -> str:
    """How the cell was measured: traced (async scheduling off) or untraced (server defaults)."""
    if m is None:
        return NOT_MEASURED
    scheduling = {True: "async scheduling on", False: "async scheduling off", None: "async scheduling unknown"}
    return f"{'traced' if m.traced else 'untraced, vLLM counters'}, {scheduling[m.async_scheduling]}"


def _fit_text(fit: StepCostFit) -> str:
    """The fitted step cost in words, with how well it fits."""
    drafted = ", ".join(f"{d} {v * 1000:.2f} ms" for d, v in fit.per_drafted_token_s.items()) or "none"
    held = f" Held at 0 (fitted below zero): {', '.join(fit.held_at_zero)}." if fit.held_at_zero else ""
    knee = f" beyond the first {fit.knee_requests:g}" if fit.knee_requests else ""
    return (f"Time per target pass = **{fit.base_s * 1000:.1f} ms + {fit.per_request_s * 1000:.2f} ms per request in "
            f"the batch{knee} + per drafted token** ({drafted}). Least squares on relative error over the sweep's "
            f"{fit.num_cells} cells (baseline and every drafter): R² **{fit.r2:.3f}**, median error "
            f"**{fit.median_relative_error:.1%}** per cell.{held}")


st.title("Tuning num_speculative_tokens")
files = list_sweep_files()
if not files:
    st.info("No recorded sweep in sample_runs/sweeps/. Record one (baseline plus a drafter at a few k, at the "
            "concurrencies you serve) with `python -m specviz sweep --model PATH --drafter '{\"method\": \"ngram\", "
            "\"prompt_lookup_max\": 4}' --k 1,3,5 --concurrency 1,4,16 --out sample_runs/sweeps/NAME`.")
    st.stop()
paths = {p.parent.name: p for p in files}
with st.sidebar:
    st.subheader("Sweep")
    ui.keep_valid("tune_sweep", list(paths))
    name = st.selectbox("Recorded sweep (sample_runs/sweeps/)", list(paths), key="tune_sweep")
opened = ui.open_sweep(paths[name], name)
if opened is None:
    st.stop()
sweep, table = opened
names = drafters(sweep)
if not names:
    st.info("This sweep holds only baseline cells: there is no drafter to tune.")
    st.stop()
with st.sidebar:
    ui.keep_valid("tune_drafter", names)
    drafter = st.selectbox("Drafter", names, key="tune_drafter")
    ks = recorded_ks(sweep, drafter)
    ui.keep_valid("tune_recorded_k", ks)
    recorded_k = st.selectbox("Predict from the run at k =", ks, index=len(ks) - 1, key="tune_recorded_k",
                              help="This cell's acceptance is cut at every smaller k; the cost of a target pass "
                                   "is fitted across all the sweep's cells. The drafter's cells at other k are drawn "
                                   "over the prediction to show the gap.")

pred = predict(sweep, drafter, recorded_k)
caption = sweep_charts.sweep_caption(table, model=sweep.grid.target_model)
st.caption(caption)
st.markdown(
    f"Acceptance from the **{drafter}** cell at **k={recorded_k}**, cut at every smaller k; the cost of a target pass "
    "from a model fitted across all the sweep's cells. Predicted: mean acceptance length, tokens per target pass and "
    "output tokens/s at each concurrency. Measured cells (the median of their runs, bars from min to max) are drawn "
    "over the prediction with their gap: (predicted − measured) / measured.")
if pred.step_cost is not None:
    st.caption("Step cost: " + _fit_text(pred.step_cost))
untraced = [m for m in pred.measured if not m.traced]
if untraced:
    st.info(f"{len(untraced)} of the {len(pred.measured)} cells shown were measured untraced, with the server's own "
            "defaults: their acceptance comes from vLLM's spec-decode counters (per draft position), which the "
            "tuner cuts at k as it cuts a traced histogram.")
if any(m.traced for m in pred.measured):
    st.caption("Traced cells ran with async scheduling off (the tracer needs it): on GPUs, where vLLM schedules "
               "asynchronously by default, serving throughput can differ. Record an untraced sweep "
               "(`specviz sweep --untraced`) to measure it as served.")
for refusal in pred.refusals:
    st.warning(f"No prediction — {refusal}")

k_max = max(ks)
if st.session_state.get("tune_k", 0) > k_max:
    del st.session_state["tune_k"]
st.session_state.setdefault("tune_k", min(recorded_k, k_max))
k = st.slider("num_speculative_tokens (k)", 1, max(k_max, 2), key="tune_k",
              help="Drafts proposed per step. Predictions exist up to the recorded k.")

at_k = _at_k(pred, k)
for r in (pred.at(c, k) for c in pred.concurrencies):
    if isinstance(r, TuningRefusal) and r.concurrency is not None and r not in pred.refusals:
        st.warning(f"No prediction — {r}")
st.dataframe(at_k, key="tune_table", hide_index=True, column_config={
    "mean acceptance length": st.column_config.NumberColumn(format="%.2f"),
    "tokens per target pass": st.column_config.NumberColumn(format="%.2f"),
    "time per pass (ms, fitted)": st.column_config.NumberColumn(format="%.1f"),
    "output tokens/s (predicted)": st.column_config.NumberColumn(format="%.1f"),
    "speedup vs baseline": st.column_config.NumberColumn(format="%.2fx"),
})

left, right = st.columns(2)
left.plotly_chart(tuning_charts.tuning_throughput(pred, caption, k), key="tune_chart_tput", width="stretch")
right.plotly_chart(tuning_charts.tuning_acceptance(pred, caption, k), key="tune_chart_al", width="stretch")

st.subheader("Recommended k per concurrency")
recs = pred.recommend()
if recs:
    measured = {(m.concurrency, m.num_speculative_tokens): m for m in pred.measured}
    rec_rows = []
    for r in recs:
        m = measured.get((r.concurrency, r.num_speculative_tokens))
        rec_rows.append({
            "concurrency": r.concurrency,
            "recommended k": r.num_speculative_tokens,
            "output tokens/s (predicted)": r.output_tokens_per_s,
            "speedup vs baseline": r.speedup,
            "output tokens/s (measured at that k)": _measured(m),
            "measured min-max": _spread(m),
        })
    st.dataframe(pd.DataFrame(rec_rows), key="tune_recommend", hide_index=True, column_config={
        "output tokens/s (predicted)": st.column_config.NumberColumn(format="%.1f"),
        "speedup vs baseline": st.column_config.NumberColumn(format="%.2fx"),
    })
    st.caption("The k with the highest predicted output tokens/s among 0..recorded k; k=0 means serving without "
               f"speculation pays more. {caption}")
else:
    st.info("Nothing to recommend: every concurrency was refused (see above).")

st.subheader(f"Serve with k={k}")
try:
    st.code(pred.serve_command(k), language="bash")
    st.code(pred.python_config(k), language="python")
except ConfigError as e:
    st.warning(f"The recorded config cannot be exported for this vLLM: {e}")

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
  cost that comes out negative is held at 0. {_fit_text(pred.step_cost) if pred.step_cost else "Not fitted."}
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
