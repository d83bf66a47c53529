"""Tuning: predict acceptance and throughput at every num_speculative_tokens from one run per concurrency."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from specviz import charts
from specviz.config import ConfigError
from specviz.sweep import Sweep, SweepError, load_sweep, sweep_table
from specviz.tuning import (ANCHOR_FORMULA, CUT_IS_VALID, DEFAULT_ANCHOR, MIN_DRAFTED_STEPS, Prediction, TuningRefusal, drafters,
                            list_sweep_files, predict, recorded_ks)


@st.cache_data(show_spinner=False)
def _load(path: str, mtime_ns: int) -> tuple[Sweep, pd.DataFrame]:
    sweep = load_sweep(path)
    return sweep, sweep_table(sweep)


def _keep_valid(key: str, options: list) -> None:
    if key in st.session_state and st.session_state[key] not in options:
        del st.session_state[key]


def _at_k(pred: Prediction, k: int) -> pd.DataFrame:
    """One row per concurrency at k: predicted figures, the measured cell if any, and the gap."""
    measured = {(m.concurrency, m.num_speculative_tokens): m for m in pred.measured}
    rows = []
    for c in pred.concurrencies:
        row = pred.at(c, k)
        m = measured.get((c, k))
        if isinstance(row, TuningRefusal):
            rows.append({"concurrency": c, "output tokens/s (measured)": m.output_tokens_per_s if m else None,
                         "refused": row.reason})
            continue
        rows.append({
            "concurrency": c,
            "mean acceptance length": row.mean_acceptance_length,
            "tokens per target pass": row.tokens_per_step,
            "step time (ms)": row.engine_step_time_s * 1000,
            "output tokens/s (predicted)": row.output_tokens_per_s,
            "speedup vs baseline": row.speedup,
            "output tokens/s (measured)": m.output_tokens_per_s if m else None,
            "gap": m.relative_error if m and not m.used_for_prediction else None,
        })
    return pd.DataFrame(rows)


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
    _keep_valid("tune_sweep", list(paths))
    name = st.selectbox("Recorded sweep (sample_runs/sweeps/)", list(paths), key="tune_sweep")
try:
    sweep, table = _load(str(paths[name]), paths[name].stat().st_mtime_ns)
except (SweepError, OSError) as e:
    st.error(f"Sweep '{name}' cannot be opened: {e}")
    st.stop()
names = drafters(sweep)
if not names:
    st.info("This sweep holds only baseline cells: there is no drafter to tune.")
    st.stop()
with st.sidebar:
    _keep_valid("tune_drafter", names)
    drafter = st.selectbox("Drafter", names, key="tune_drafter")
    ks = recorded_ks(sweep, drafter)
    _keep_valid("tune_recorded_k", ks)
    recorded_k = st.selectbox("Predict from the run at k =", ks, index=len(ks) - 1, key="tune_recorded_k",
                              help="Only this run and the baseline go into the prediction; the drafter's cells at "
                                   "other k are drawn over it to show the gap.")

pred = predict(sweep, drafter, recorded_k)
caption = charts.sweep_caption(table, model=sweep.grid.target_model)
st.caption(caption)
st.markdown(
    f"From the **{drafter}** run at **k={recorded_k}** and the baseline, at each concurrency: predicted mean "
    "acceptance length, tokens per target pass and output tokens/s for every smaller k. Measured cells are "
    "drawn over the prediction with their gap: (predicted − measured) / measured.")
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
    "step time (ms)": st.column_config.NumberColumn(format="%.1f"),
    "output tokens/s (predicted)": st.column_config.NumberColumn(format="%.1f"),
    "speedup vs baseline": st.column_config.NumberColumn(format="%.2fx"),
    "output tokens/s (measured)": st.column_config.NumberColumn(format="%.1f"),
    "gap": st.column_config.NumberColumn(format="percent"),
})

left, right = st.columns(2)
left.plotly_chart(charts.tuning_throughput(pred, caption, k), key="tune_chart_tput", width="stretch")
right.plotly_chart(charts.tuning_acceptance(pred, caption, k), key="tune_chart_al", width="stretch")

st.subheader("Recommended k per concurrency")
recs = pred.recommend()
if recs:
    measured = {(m.concurrency, m.num_speculative_tokens): m.output_tokens_per_s for m in pred.measured}
    st.dataframe(pd.DataFrame([{
        "concurrency": r.concurrency,
        "recommended k": r.num_speculative_tokens,
        "output tokens/s (predicted)": r.output_tokens_per_s,
        "speedup vs baseline": r.speedup,
        "output tokens/s (measured at that k)": measured.get((r.concurrency, r.num_speculative_tokens)),
    } for r in recs]), key="tune_recommend", hide_index=True, column_config={
        "output tokens/s (predicted)": st.column_config.NumberColumn(format="%.1f"),
        "speedup vs baseline": st.column_config.NumberColumn(format="%.2fx"),
        "output tokens/s (measured at that k)": st.column_config.NumberColumn(format="%.1f"),
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
- **Step cost** (an assumption): engine step time linear in k between the baseline (k=0) and the recorded run.
- **Throughput** (anchor '{DEFAULT_ANCHOR}'): {ANCHOR_FORMULA[DEFAULT_ANCHOR]}, K={recorded_k};
  k=0 is the measured baseline.
- **Leviathan et al. 2023** (dotted): (1 − a^(k+1)) / (1 − a) with one per-token rate *a* fitted at the recorded
  k, for comparison; real per-position rates fall with position, so the prediction uses the measured histogram.
- **Refused** (a reason instead of a number): k above the recorded k, drafters whose drafts depend on k
  (dflash, dspark, parallel drafting), no baseline at that concurrency, untraced runs, fewer than
  {MIN_DRAFTED_STEPS} drafted steps.
""")
