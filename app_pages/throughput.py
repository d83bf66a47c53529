"""Throughput: what drafting buys per method, per num_speculative_tokens and per concurrency, from a recorded sweep."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from specviz import ui
from specviz.charts import sweeps as sweep_charts
from specviz.prompts import workload_name
from specviz.references import MINIMAX_M3_EAGLE3_SPEED_BENCH
from specviz.sweep import BASELINE, Sweep
from specviz.sweep_table import shown_table
from specviz.tuning import list_sweep_files

NONE = "none"
REFERENCE = MINIMAX_M3_EAGLE3_SPEED_BENCH


@dataclass(frozen=True)
class Side:
    """One sweep as shown in one column: its cells of one prompt set."""

    name: str
    sweep: Sweep
    full: pd.DataFrame  # every cell of the sweep
    table: pd.DataFrame  # the cells of the prompt set shown
    prompt_set: str

    @property
    def model(self) -> str:
        return self.sweep.grid.target_model

    def concurrencies(self) -> list[int]:
        return sorted(int(c) for c in self.table["concurrency"].unique())

    def caption(self, concurrency: int | None = None) -> str:
        return sweep_charts.sweep_caption(self.table, concurrency=concurrency, model=self.model)


def init_state() -> None:
    st.session_state.setdefault("tp_compare", NONE)
    st.session_state.setdefault("tp_best_k", False)
    st.session_state.setdefault("tp_show_reference", False)


def _open(name: str, paths: dict[str, Path]) -> tuple[Sweep, pd.DataFrame] | None:
    return ui.open_sweep(paths[name], name)


def _side(name: str, loaded: tuple[Sweep, pd.DataFrame], prompt_set: str | None) -> Side:
    sweep, full = loaded
    sets = [str(p) for p in full["prompt_set"].unique()]
    shown = prompt_set if prompt_set in sets else sets[0]
    return Side(name, sweep, full, full[full["prompt_set"] == shown], shown)


def _columns(sides: list[Side]):
    return st.columns(len(sides)) if len(sides) > 1 else [st.container()]


def _draw(sides: list[Side], key: str, build) -> None:
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


def _missing(side: Side, concurrency: int) -> str | None:
    if concurrency in side.concurrencies():
        return None
    return (f"'{side.name}' has no cells at concurrency {concurrency} (prompt set '{side.prompt_set}'); "
            f"it has {', '.join(map(str, side.concurrencies()))}.")


def _measured_as(table: pd.DataFrame) -> str:
    """How the cells were measured: runs per cell, traced or not, async scheduling on or off."""
    runs = sorted({int(r) for r in table["repeats"]})
    span = str(runs[0]) if len(runs) == 1 else f"{runs[0]}-{runs[-1]}"
    runs_text = ("1 run per cell (no spread)" if runs == [1] else
                 f"{span} runs per cell, interleaved: figures are medians, bars the min-max over runs")
    traced = {bool(t) for t in table["traced"]}
    how = ("traced with the specviz tracer (which needs async scheduling off)" if traced == {True} else
           "untraced, with the server's own defaults: acceptance from vLLM's counters" if traced == {False} else
           "some cells traced (async scheduling off), some untraced (acceptance from vLLM's counters)")
    async_on = {a for a in table["async_scheduling"] if a is not None and a == a}
    scheduling = ("async scheduling on" if async_on == {True} else "async scheduling off" if async_on == {False}
                  else "async scheduling mixed" if async_on else "async scheduling unknown")
    if traced == {True} and async_on == {False}:
        return f"Measured: {runs_text} · {how}."
    return f"Measured: {runs_text} · {how} · {scheduling}."


def _breakeven_lines(side: Side) -> list[str]:
    lines = []
    for d in sweep_charts.drafters(side.table):
        best = sweep_charts.best_k_rows(side.table, d)
        if best.empty:
            lines.append(f"**{d}**: no speedup figures (no baseline at its concurrencies).")
            continue
        c = sweep_charts.breakeven_concurrency(side.table, d)
        top = int(best["concurrency"].max())
        if c is None:
            lines.append(f"**{d}**: some k beats the baseline at every concurrency measured up to {top}.")
        elif c == int(best["concurrency"].min()):
            lines.append(f"**{d}**: no k beats the baseline at any concurrency measured ({c} to {top}).")
        else:
            lines.append(f"**{d}**: drafting stops paying at concurrency {c}: no k beats the baseline "
                         f"from there up to {top}, the highest measured.")
    return lines


init_state()
st.title("Throughput")
st.caption("Output tokens/s per drafting method, per `num_speculative_tokens` (k) and per concurrency, "
           "measured against the baseline (no drafting) on the same engine build, prompts and output length. "
           "Speedup = a cell's output tokens/s ÷ the baseline's at the same concurrency.")

files = list_sweep_files()
if not files:
    st.info("No recorded sweeps in `sample_runs/sweeps/`. Record one with "
            "`python -m specviz sweep --model PATH --drafter '{\"method\": \"ngram\", \"prompt_lookup_max\": 4}' "
            "--k 1,3,5 --concurrency 1,4,16 --prompts builtin:code --out sample_runs/sweeps/NAME`.")
    st.stop()

paths = {p.parent.name: p for p in files}
names = list(paths)
ui.keep_valid("tp_sweep", names)
ui.keep_valid("tp_compare", [NONE, *names])

top = st.columns([3, 3, 2, 2])
name_a = top[0].selectbox("Sweep (sample_runs/sweeps/)", names, key="tp_sweep")
name_b = top[1].selectbox("Compare with", [NONE, *[n for n in names if n != name_a]], key="tp_compare",
                          help="Show the same charts for a second sweep beside the first.")
loaded_a = _open(name_a, paths)
if loaded_a is None:
    st.stop()
loaded_b = _open(name_b, paths) if name_b != NONE else None

prompt_sets = [str(p) for p in loaded_a[1]["prompt_set"].unique()]
ui.keep_valid("tp_prompt_set", prompt_sets)
prompt_set = top[3].selectbox("Prompt set", prompt_sets, key="tp_prompt_set",
                              help="A sweep is measured on one prompt set; compare sweeps to see others.")
sides = [_side(name_a, loaded_a, prompt_set)]
if loaded_b is not None:
    sides.append(_side(name_b, loaded_b, prompt_set))

concurrencies = sorted({c for s in sides for c in s.concurrencies()})
ui.keep_valid("tp_concurrency", concurrencies)
concurrency = top[2].selectbox("Concurrency", concurrencies, key="tp_concurrency",
                               help="Requests in flight at once, for the charts against k.")

for side in sides:
    grid = side.sweep.grid
    st.caption(f"**{side.name}** (workload: {workload_name(side.prompt_set)}; a speedup holds for its workload, "
               f"and the Playground's first screen may show another): target {grid.target_model.rstrip('/').split('/')[-1]} · drafters "
               f"{', '.join(sweep_charts.drafters(side.full)) or 'none'} · k {', '.join(map(str, grid.num_speculative_tokens))} "
               f"· concurrency {', '.join(map(str, grid.concurrencies))} · {len(side.sweep.cells)} cells")
    st.caption(_measured_as(side.full))
    if not side.sweep.complete:
        st.warning(f"'{side.name}' is incomplete: {len(side.sweep.cells)} of {len(side.sweep.expected_keys())} "
                   "cells were measured. Run the same `specviz sweep` command again to finish it.")
    if (side.full["platform"].astype(str).str.lower() == "cpu").all():
        st.info(f"'{side.name}' holds CPU figures (vLLM on CPU), not GPU figures: the ratios show the mechanics, "
                "not what a GPU deployment will get.")

st.subheader("Throughput vs num_speculative_tokens")
_draw(sides, "tp_chart_tput_k", lambda s: _missing(s, concurrency) or sweep_charts.throughput_vs_k(
    s.table, concurrency, s.caption(concurrency)))

st.subheader("Speedup over the baseline vs concurrency")
best_k = st.toggle("Each drafter's best k only", key="tp_best_k")
_draw(sides, "tp_chart_speedup", lambda s: sweep_charts.speedup_vs_concurrency(s.table, s.caption(), best_k=best_k))
for side, col in zip(sides, _columns(sides)):
    col.markdown("\n".join(f"- {line}" for line in _breakeven_lines(side)) or "No drafters in this sweep.")

st.subheader("Mean acceptance length vs num_speculative_tokens")
_draw(sides, "tp_chart_al_k", lambda s: _missing(s, concurrency) or sweep_charts.acceptance_length_vs_k(
    s.table, concurrency, s.caption(concurrency)))

st.subheader("Acceptance per draft position")
rows_a = sides[0].table[(sides[0].table["concurrency"] == concurrency) & (sides[0].table["drafter"] != BASELINE)]
configs = {sweep_charts.config_label(d, k): (d, int(k)) for d, k in zip(rows_a["drafter"], rows_a["num_speculative_tokens"])}
if configs:
    ui.keep_valid("tp_position_config", list(configs))
    # Open on the k of the published reference when the sweep has it, else on the largest k.
    st.session_state.setdefault("tp_position_config", next(
        (label for label, (_, k) in configs.items() if k == REFERENCE.num_speculative_tokens), list(configs)[-1]))
    pick, ref_box = st.columns([3, 2])
    config = pick.selectbox("Drafter and k", list(configs), key="tp_position_config")
    show_reference = ref_box.checkbox(
        "Show a published reference", key="tp_show_reference",
        help=f"{REFERENCE.label}: {REFERENCE.source.citation()}. Drawn as a separate line; not measured here.")
    drafter, k = configs[config]

    def _positions(s: Side):
        cell = s.table[(s.table["drafter"] == drafter) & (s.table["num_speculative_tokens"] == k)
                       & (s.table["concurrency"] == concurrency)]
        if cell.empty:
            return f"'{s.name}' has no cell {config} at concurrency {concurrency}."
        rates = list(cell["acceptance_rate_per_pos"].iloc[0])
        if not rates:
            return f"'{s.name}': {config} at concurrency {concurrency} verified no drafts."
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

st.subheader("Acceptance by prompt set")
parts = []
for side in sides:
    t = side.full.copy()
    if len(sides) > 1:
        t["prompt_set"] = [f"{p} · {side.name}" for p in t["prompt_set"]]
    parts.append(t)
combined = pd.concat(parts, ignore_index=True)
if combined["prompt_set"].nunique() > 1:
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
    st.download_button("Download as CSV", side.full.to_csv(index=False).encode(), file_name=f"{side.name}.csv",
                       mime="text/csv", key=f"tp_csv{suffix}")
