"""Throughput: what drafting buys per method, per num_speculative_tokens and per concurrency, from a recorded sweep."""

from __future__ import annotations

import streamlit as st

from specviz import ui, ui_imported, ui_sweeps
from specviz.charts import frontier as frontier_charts
from specviz.charts import sweeps as sweep_charts
from specviz.references import MINIMAX_M3_EAGLE3_SPEED_BENCH
from specviz.sweep_table import shown_table
from specviz.sweep_view import (
    SweepSide,
    breakeven_lines,
    by_prompt_set,
    config_at_k,
    csv_bytes,
    drafter_configs,
    measured_as,
    prompt_sets,
)

NONE = "none"
REFERENCE = MINIMAX_M3_EAGLE3_SPEED_BENCH


def init_state() -> None:
    st.session_state.setdefault("tp_compare", NONE)
    st.session_state.setdefault("tp_best_k", False)
    st.session_state.setdefault("tp_show_reference", False)


def _columns(sides: list[SweepSide]):
    return st.columns(len(sides)) if len(sides) > 1 else [st.container()]


def _draw(sides: list[SweepSide], key: str, build) -> None:
    """Place one chart per sweep side by side; `build(side)` returns a figure, or a message to show instead."""
    for i, (side, col) in enumerate(zip(sides, _columns(sides))):
        with col:
            if len(sides) > 1:
                st.markdown(f"**{side.name}**")
            result = build(side)
            if isinstance(result, str):
                st.info(result)
            else:
                st.plotly_chart(result, key=f"{key}_{'ab'[i]}", width="stretch")


init_state()
st.title("Throughput")
st.caption("Output tokens/s per drafting method, per `num_speculative_tokens` (k) and per concurrency, "
           "measured against the baseline (no drafting) on the same engine build, prompts and output length. "
           "Speedup = a cell's output tokens/s ÷ the baseline's at the same concurrency.")

paths = ui_imported.with_opened(ui_sweeps.recorded_sweeps(), key="tp_open", select_key="tp_sweep")  # issue 45: a folder, or vLLM's own
names = list(paths)
ui.keep_valid("tp_sweep", names)
ui.keep_valid("tp_compare", [NONE, *names])

top = st.columns([3, 3, 2, 2])
name_a = top[0].selectbox("Sweep (sample_runs/sweeps/)", names, key="tp_sweep")
name_b = top[1].selectbox("Compare with", [NONE, *[n for n in names if n != name_a]], key="tp_compare",
                          help="Show the same charts for a second sweep beside the first.")
path_a, sources = paths[name_a], ui_sweeps.measured_in(paths[name_a])
if len(sources) > 1:  # the tuner's schedules, each measured head to head with the static configs
    source = st.radio("Cells measured in", list(sources), horizontal=True, key=f"tp_source:{name_a}")
    if source != ui_sweeps.GRID:
        st.caption(ui_sweeps.HEAD_TO_HEAD_CAPTION)
        path_a, name_a = sources[source], f"{name_a} head-to-head"
loaded_a = ui.open_sweep(path_a, name_a)
if loaded_a is None:
    st.stop()
loaded_b = ui.open_sweep(paths[name_b], name_b) if name_b != NONE else None

sets = prompt_sets(loaded_a[1])
ui.keep_valid("tp_prompt_set", sets)
prompt_set = top[3].selectbox("Prompt set", sets, key="tp_prompt_set",
                              help="A sweep is measured on one prompt set; compare sweeps to see others.")
sides = [SweepSide.of(name_a, loaded_a, prompt_set)]
if loaded_b is not None:
    sides.append(SweepSide.of(name_b, loaded_b, prompt_set))

concurrencies = sorted({c for s in sides for c in s.concurrencies()})
ui.keep_valid("tp_concurrency", concurrencies)
concurrency = top[2].selectbox("Concurrency", concurrencies, key="tp_concurrency",
                               help="Requests in flight at once, for the charts against k.")

for side in sides:
    if incomplete := side.incomplete():
        st.warning(incomplete)

# The first chart comes straight after the controls (at 1280 px it must be on the first screen); what the
# cells are and how they were measured follows it, and the recording notes close the page (issue 42).
st.subheader("Throughput vs num_speculative_tokens")
_draw(sides, "tp_chart_tput_k", lambda s: s.missing(concurrency) or sweep_charts.throughput_vs_k(
    s.table, concurrency, s.caption(concurrency)))
for side in sides:
    cpu = (f" '{side.name}' holds CPU figures (vLLM on CPU), not GPU figures: the ratios show the mechanics, "
           "not what a GPU deployment will get." if side.cpu_only() else "")
    st.caption(side.summary() + ". " + measured_as(side.full) + cpu)
    if apart := side.measured_apart():
        st.warning(apart)

st.subheader("Speedup over the baseline vs concurrency")
best_k = st.toggle("Each drafter's best k only", key="tp_best_k")
_draw(sides, "tp_chart_speedup", lambda s: sweep_charts.speedup_vs_concurrency(s.table, s.caption(), best_k=best_k))
for side, col in zip(sides, _columns(sides)):
    col.markdown("\n".join(f"- {line}" for line in breakeven_lines(side.table)) or "No drafters in this sweep.")

st.subheader("Mean acceptance length vs num_speculative_tokens")
_draw(sides, "tp_chart_al_k", lambda s: s.missing(concurrency) or sweep_charts.acceptance_length_vs_k(
    s.table, concurrency, s.caption(concurrency)))

st.subheader("Acceptance per draft position")
configs = drafter_configs(sides[0].table, concurrency)
if configs:
    # Open on the k of the published reference when the sweep has it, else on the largest k.
    opening = config_at_k(configs, REFERENCE.num_speculative_tokens)
    ui.keep_valid("tp_position_config", list(configs), default=opening)
    st.session_state.setdefault("tp_position_config", opening)
    pick, ref_box = st.columns([3, 2])
    config = pick.selectbox("Drafter and k", list(configs), key="tp_position_config")
    show_reference = ref_box.checkbox(
        "Show a published reference", key="tp_show_reference",
        help=f"{REFERENCE.label}: {REFERENCE.source.citation()}. Drawn as a separate line; not measured here.")
    drafter, k = configs[config]

    def _positions(s: SweepSide):
        rates = s.acceptance_rates(drafter, k, concurrency)
        if isinstance(rates, str):
            return rates
        return sweep_charts.acceptance_per_position_vs_reference(
            rates, f"{config} at concurrency {concurrency}", s.caption(concurrency),
            REFERENCE if show_reference else None)

    _draw(sides, "tp_chart_positions", _positions)
    if show_reference:
        src = REFERENCE.source
        st.caption(f"Reference line: {REFERENCE.label} ({REFERENCE.target_model} with {REFERENCE.draft_model}; "
                   f"{REFERENCE.hardware}). Source: {src.citation()}" + (f", <{src.url}>" if src.url else "")
                   + ". Published figures, not measured here; another model, drafter and benchmark.")
else:
    st.info(f"No drafter cells at concurrency {concurrency} in '{sides[0].name}'.")

st.subheader("Latency vs throughput")
_draw(sides, "tp_chart_latency", lambda s: sweep_charts.latency_vs_throughput(s.table, s.caption()))

# ---- issue 45: the frontier per drafting configuration (recorded and imported sweeps alike) ----
st.subheader("Frontier: total vs per-user output tokens/s")
_draw(sides, "tp_chart_frontier", lambda s: frontier_charts.frontier(s.table, s.caption()))
st.caption(frontier_charts.FRONTIER_CAPTION)

st.subheader("Acceptance by prompt set")
combined = by_prompt_set(sides)
if combined is not None:
    st.plotly_chart(sweep_charts.acceptance_by_prompt_set(combined, sweep_charts.sweep_caption(combined)),
                    key="tp_chart_prompt_sets", width="stretch")
else:
    st.info(f"'{sides[0].name}' was measured on one prompt set ('{sides[0].prompt_set}'). Compare it with a sweep "
            "of another prompt set to see acceptance by prompt set.")

st.subheader("All cells")
for i, side in enumerate(sides):
    if len(sides) > 1:
        st.markdown(f"**{side.name}**")
    suffix = "" if i == 0 else "_compare"
    st.dataframe(shown_table(side.full), key=f"tp_table{suffix}", hide_index=True)
    st.download_button("Download as CSV", csv_bytes(side.full), file_name=f"{side.name}.csv",
                       mime="text/csv", key=f"tp_csv{suffix}")

for side in sides:
    ui.sweep_notes(side.sweep, side.name)
