"""The Streamlit edge of specviz.textbook: "From the formula to your run" on the Methods page, and its
compact version beside a recorded run in the Playground. Pages call one function each."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from . import textbook, ui, ui_race
from .charts import sweeps as sweep_charts
from .charts import textbook as charts
from .charts.tuning import gap_text
from .prediction import fixed_k_drafters, recorded_ks
from .runfile import Run
from .sweep import Sweep
from .sweep_files import list_sweep_files
from .textbook import TextbookError

EXAMPLE_RUN = "showcase/ngram-k3-edit-c1.json.gz"  # the run the section opens on, when present
CPU_NOTE = "CPU figures, not GPU figures"

INTRO = """
Two formulas from the paper that introduced speculative decoding (Leviathan et al., 2023):

- **Tokens per target pass.** If every draft is accepted with the same chance **α** (once the drafts
  before it were), one pass with **k** drafts commits on average **E(k) = (1 − α^(k+1)) / (1 − α)** tokens,
  the target's correction or bonus token included, as vLLM's *mean acceptance length* counts it.
- **Speedup.** If drafting one token costs **c** of a target pass, drafting is **E(k) / (k·c + 1)** times
  as fast as not drafting. It pays only while E(k) > k·c + 1: below a **break-even α** it loses.

Worked: α = 0.6, k = 3 → (1 − 0.6⁴) / 0.4 = **2.18** tokens per pass; with c = 0.1, 2.18 / 1.3 = **1.67x**.
Below, the same formulas fed with what specviz measured: α is the share of drafted steps whose first
draft was accepted, c comes from a recorded sweep's fitted cost of a pass, and the measurement stands beside
each promise.
"""


def _caption_noting_cpu(run: Run) -> str:
    text = ui.run_caption(run)
    return f"{CPU_NOTE} · {text}" if run.meta.platform.lower() == "cpu" else text


def run_metrics(result: textbook.RunVsFormula, container=st) -> None:
    K = result.num_speculative_tokens
    at_k = result.at(K)
    cols = container.columns(5)
    cols[0].metric("fitted α", f"{result.alpha:.2f}",
                   help="the share of drafted steps whose first draft the target accepted: the formula's α "
                        "where no earlier draft conditions it (not the draft acceptance rate)")
    cols[1].metric(f"formula E(k={K})", f"{at_k.formula:.2f}", help="(1 − α^(k+1)) / (1 − α) tokens per pass")
    cols[2].metric(f"measured at k={K}", f"{result.measured_length:.2f}",
                   help="the run's mean acceptance length (1 + accepted / drafted steps), as vLLM reports it")
    cols[3].metric("formula vs run", f"{at_k.over_promise:+.1%}",
                   help=f"at k={K}: E(k, α) / measured − 1, positive where the formula over-promises")
    cols[4].metric("draft acceptance rate", f"{result.draft_acceptance_rate:.0%}",
                   help="accepted / drafted tokens, as vLLM reports it: drafts after the first rejection count "
                        "as drafted but can never be accepted, so it reads lower than α")


def _run_part(result: textbook.RunVsFormula, caption: str, key: str) -> None:
    run_metrics(result)
    st.markdown(textbook.over_promise_text(result))
    left, right = st.columns(2)
    left.plotly_chart(charts.tokens_per_pass(result, caption), key=f"{key}_tokens_per_pass", width="stretch")
    right.plotly_chart(charts.per_position(result, caption), key=f"{key}_per_position", width="stretch")


def formula_expander(run: Run, key: str = "pg_textbook") -> None:
    """The compact version beside a recorded run: α, E(k) against the measurement, per position."""
    if run.meta.spec is None:
        return
    with st.expander("From the formula to this run (Leviathan et al. 2023's E(k) beside the measurement)"):
        try:
            result = textbook.run_vs_formula(run)
        except TextbookError as e:
            st.info(f"Not set beside the formula: {e}.")
            return
        st.caption("E(k) = (1 − α^(k+1)) / (1 − α) tokens per pass if every draft is accepted with the same "
                   "chance α; here α is the share of drafted steps whose first draft was accepted. The Methods page "
                   "explains it and adds the speedup formula with a sweep's measured draft cost.")
        _run_part(result, _caption_noting_cpu(run), key)


def _speculative_samples() -> list[tuple[str, Run]]:
    return [(name, run) for name, run in ui_race.sample_entries() if run.meta.spec is not None]


def _sweep_comparison_table(result: textbook.SweepVsFormula) -> pd.DataFrame:
    k = result.num_speculative_tokens
    return pd.DataFrame([{
        "concurrency": r.concurrency,
        "c": r.draft_cost,
        "α": r.alpha,
        f"formula E(k={k})": r.formula_tokens_per_pass,
        f"measured at k={k}": r.measured_mean_acceptance_length,
        "steps drafted": r.drafted_share * 100,  # shown as '67%', not '66.67%'
        "formula speedup": r.predicted_speedup,
        "measured speedup": r.measured_speedup,
        "gap": gap_text(r.relative_gap),  # '±0%', never '-0%'
    } for r in result.rows])


def _break_even_table(result: textbook.SweepVsFormula) -> pd.DataFrame:
    """k rows, one column per concurrency: the break-even α, or 'never' where c >= 1."""
    table = {"k": textbook.FORMULA_KS}
    for r in result.rows:
        table[f"concurrency {r.concurrency} (c = {r.draft_cost:.2f})"] = [
            "never (c ≥ 1)" if a is None else f"{a:.2f}" for a in result.break_even[r.concurrency]]
    return pd.DataFrame(table)


def _pick_sweep(run: Run | None) -> tuple[Sweep, pd.DataFrame, str, str, int] | None:
    """The sweep, drafter and k chosen; they open on the drafter closest to the run (textbook.closest_drafter)."""
    paths = {p.parent.name: p for p in list_sweep_files()}
    if not paths:
        st.info("No recorded sweep in sample_runs/sweeps/: record one with `python -m specviz sweep` to set the "
                "speedup formula beside measured throughput.")
        return None
    a, b, c = st.columns(3)
    ui.keep_valid("textbook_sweep", list(paths))
    if "textbook_sweep" not in st.session_state and run is not None:
        opened = {n: sweep for n, p in paths.items() if (sweep := ui.sweep_quietly(p)) is not None}
        closest = textbook.closest_drafter(opened, run.meta.method, run.meta.num_speculative_tokens)
        if closest is not None:
            st.session_state.textbook_sweep, st.session_state.textbook_drafter = closest
            st.session_state.textbook_k = run.meta.num_speculative_tokens
    name = a.selectbox("Recorded sweep", list(paths), key="textbook_sweep")
    opened = ui.open_sweep(paths[name], name)
    if opened is None:
        return None
    sweep, table = opened
    names = fixed_k_drafters(sweep)
    if not names:
        st.info(f"Sweep '{name}' holds only baseline cells: no drafter to set beside the formula.")
        return None
    ui.keep_valid("textbook_drafter", names)
    drafter = b.selectbox("Drafter", names, key="textbook_drafter")
    ks = recorded_ks(sweep, drafter)
    ui.keep_valid("textbook_k", ks, default=max(ks))
    st.session_state.setdefault("textbook_k", max(ks))
    k = c.selectbox("num_speculative_tokens (k)", ks, key="textbook_k")
    return sweep, table, name, drafter, k


def _sweep_part(run: Run | None) -> None:
    picked = _pick_sweep(run)
    if picked is None:
        return
    sweep, table, name, drafter, k = picked
    try:
        result = textbook.sweep_vs_formula(sweep, drafter, k)
    except TextbookError as e:
        st.warning(f"Not set beside the formula: {e}.")
        return
    cpu = all(c.platform.lower() == "cpu" for c in sweep.cells)
    st.caption((f"{CPU_NOTE} · " if cpu else "") + f"sweep '{name}' · {result.provenance}")
    caption = sweep_charts.sweep_caption(table, model=sweep.grid.target_model)  # the charts': shorter
    fit = result.step_cost
    per_token = fit.per_drafted_token_s.get(drafter, 0.0) * 1000
    knee = f" beyond the first {fit.knee_requests:g} requests" if fit.knee_requests else ""
    st.markdown(
        f"**c**, from the sweep's fitted cost of a pass (base {fit.base_s * 1000:.1f} ms + "
        f"{fit.per_request_s * 1000:.2f} ms per request{knee} + {per_token:.2f} ms per drafted token; median error "
        f"{fit.median_relative_error:.1%} over {fit.num_cells} cells): at concurrency C, "
        f"c = C × {per_token:.2f} ms / the baseline pass at C. Drafting is paid per request, the weights are read "
        "once per pass, so **c grows with the batch** and the speedup shrinks.")
    st.dataframe(_sweep_comparison_table(result), key="textbook_comparison", hide_index=True, column_config={
        "c": st.column_config.NumberColumn(format="%.3f", help="fitted cost of drafting one token, in target passes"),
        "α": st.column_config.NumberColumn(format="%.2f", help="share of drafted steps whose first draft was accepted"),
        f"formula E(k={k})": st.column_config.NumberColumn(format="%.2f"),
        f"measured at k={k}": st.column_config.NumberColumn(format="%.2f"),
        "steps drafted": st.column_config.NumberColumn(format="%.0f%%", help="share of steps with drafts"),
        "formula speedup": st.column_config.NumberColumn(format="%.2fx"),
        "measured speedup": st.column_config.NumberColumn(format="%.2fx"),
        "gap": st.column_config.TextColumn(help="formula speedup / measured speedup − 1"),
    })
    st.markdown(textbook.speedup_gap_text(result) + " The Tuning page's model accounts for all of these.")
    for why in result.skipped:
        st.caption(f"Left out: {why}.")
    left, right = st.columns(2)
    left.plotly_chart(charts.speedup(result, caption), key="textbook_speedup", width="stretch")
    right.plotly_chart(charts.break_even(result, caption), key="textbook_break_even", width="stretch")
    st.markdown(f"**Break-even α per k**: drafting k tokens loses when the drafter's α is below it "
                f"({drafter}: α = {result.alpha:.2f} over its k={k} cells).")
    st.dataframe(_break_even_table(result), key="textbook_break_even_table", hide_index=True)
    ui.sweep_notes(sweep, name)  # below the comparison it qualifies


def formula_section() -> None:
    """The Methods page's "From the formula to your run": the formulas, then a recorded run and a sweep."""
    st.subheader("From the formula to your run")
    st.markdown(INTRO)
    samples = _speculative_samples()
    names = [n for n, _ in samples]
    run = None
    if not names:
        st.info("No speculative run in sample_runs/: record one with `python -m specviz record` to set the "
                "formula beside it.")
    else:
        ui.keep_valid("textbook_run", names)
        if "textbook_run" not in st.session_state:
            opening = ui_race.opening_run_name()
            st.session_state.textbook_run = EXAMPLE_RUN if EXAMPLE_RUN in names else \
                opening if opening in names else names[0]
        name = st.selectbox("Recorded run (sample_runs/)", names, key="textbook_run")
        run = dict(samples)[name]
        caption = _caption_noting_cpu(run)
        st.caption(caption)
        try:
            result = textbook.run_vs_formula(run)
        except TextbookError as e:
            st.info(f"This run is not set beside the formula: {e}.")
        else:
            _run_part(result, caption, "textbook")
    st.markdown("**Speedup, from a recorded sweep**")
    _sweep_part(run)
