"""The latency-throughput frontier of a sweep table: output tokens/s per user against total output tokens/s.

One curve per drafting configuration (the baseline, each drafter at each k, each schedule) with concurrency along
it, and the Pareto-optimal cells marked: those no other cell beats on both axes. Tokens/s per user is the cell's
output tokens/s divided by its concurrency, as `vllm bench sweep plot_pareto` divides output_throughput by the
user count, so a recorded sweep and an imported vLLM sweep draw the same figure. Pure: table in, figure out.

    fig = frontier(sweep_table(sweep), sweep_caption(table))
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ..sweep import BASELINE
from .sweeps import _BASELINE_STYLE, _cells, _floats, _static_ks, config_label, figure_layout, fixed_k_drafters, schedules

FRONTIER_CAPTION = ("One line per drafting configuration, concurrency along it (c=1 at the right: most per user). "
                    "Ringed: the Pareto-optimal cells, which no other cell beats on both axes; per user = the cell's "
                    "output tokens/s ÷ its concurrency, as `vllm bench sweep plot_pareto` divides it.")
PARETO_STYLE = dict(color="#111111", width=1.5, dash="solid")


def per_user(output_tokens_per_s: float, concurrency: int) -> float:
    """Output tokens/s each of `concurrency` requests in flight gets: 120 tokens/s at c=4 -> 30 per user."""
    return output_tokens_per_s / concurrency


def pareto_optimal(points: list[tuple[float, float]]) -> list[bool]:
    """Which (per user, total) points no other point beats on both axes (>= on both, > on one).

    [(30, 120), (20, 100), (10, 150)] -> [True, False, True]: (20, 100) is below and left of (30, 120).
    """
    return [not any(x2 >= x and y2 >= y and (x2 > x or y2 > y) for x2, y2 in points) for x, y in points]


def frontier_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The cells with a throughput, with per_user_output_tokens_per_s, config and pareto columns added."""
    rows = table[table["output_tokens_per_s"].notna() & (table["output_tokens_per_s"] > 0)].copy()
    rows["per_user_output_tokens_per_s"] = [per_user(float(t), int(c))
                                            for t, c in zip(rows["output_tokens_per_s"], rows["concurrency"])]
    rows["config"] = [config_label(d, k) for d, k in zip(rows["drafter"], rows["num_speculative_tokens"])]
    rows["pareto"] = pareto_optimal(list(zip(rows["per_user_output_tokens_per_s"], rows["output_tokens_per_s"])))
    return rows


def frontier(table: pd.DataFrame, caption: str) -> go.Figure:
    """Total output tokens/s against output tokens/s per user, a line per configuration, the frontier marked.

    Each line runs from its highest concurrency (most total, least per user) to its lowest; the black line
    joins the Pareto-optimal cells, each ringed, so the configuration to serve at a latency target is read off
    where the frontier crosses it.
    """
    rows = frontier_rows(table)
    fig = go.Figure()
    configs = ([(BASELINE, None)] + [(d, k) for d in fixed_k_drafters(table) for k in _static_ks(_cells(table, d))]
               + [(d, None) for d in schedules(table)])
    for d, k in configs:
        r = _cells(rows, d, k).sort_values("concurrency")
        if r.empty:
            continue
        name = config_label(d, k)
        fig.add_trace(go.Scatter(
            x=_floats(r["per_user_output_tokens_per_s"]), y=_floats(r["output_tokens_per_s"]),
            mode="lines+markers+text" if d == BASELINE else "lines+markers",
            text=[f"c={int(c)}" for c in r["concurrency"]], textposition="bottom center",
            name=name, marker=dict(size=9, symbol="square" if d == BASELINE else "circle"),
            line=dict(width=1, dash="dot", color=_BASELINE_STYLE["color"]) if d == BASELINE else dict(width=1),
            meta=dict(role="measured", drafter=d, k=k),
            hovertemplate=f"{name} %{{text}}<br>%{{x:.1f}} output tokens/s per user<br>%{{y:.1f}} output "
                          "tokens/s in all<extra></extra>",
        ))
    best = rows[rows["pareto"]].sort_values("per_user_output_tokens_per_s")
    if not best.empty:
        fig.add_trace(go.Scatter(
            x=_floats(best["per_user_output_tokens_per_s"]), y=_floats(best["output_tokens_per_s"]),
            mode="lines+markers", name="Pareto frontier", line=PARETO_STYLE,
            marker=dict(size=17, symbol="circle-open", color=PARETO_STYLE["color"], line=dict(width=2)),
            text=[f"{cfg} c={int(c)}" for cfg, c in zip(best["config"], best["concurrency"])],
            meta=dict(role="pareto"),
            hovertemplate="Pareto-optimal: %{text}<br>%{x:.1f} per user · %{y:.1f} in all<extra></extra>",
        ))
    return figure_layout(fig, "Frontier: total output tokens/s vs output tokens/s per user", caption,
                         xaxis=dict(title_text="output tokens/s per user (a cell's tokens/s ÷ its concurrency)",
                                    rangemode="tozero"),
                         yaxis=dict(title_text="output tokens/s (all requests)", rangemode="tozero"))
