"""The textbook formulas beside the measurement (specviz.textbook): four half-width figures.

    tokens_per_pass   E(k, α) for k = 1..8 against the run's acceptance length cut at each k <= K
    per_position      vLLM's per-position acceptance against α^(j+1), what the formula expects
    speedup           the formula's speedup E(K, α) / (K·c + 1) against the measured one, per concurrency
    break_even        the break-even α per k at each concurrency's c, with the drafter's α across it

Each trace carries meta {"role": ...} so tests (and readers of the spec) can find it.
"""

from __future__ import annotations

import plotly.graph_objects as go

from ..textbook import FORMULA_KS, RunVsFormula, SweepVsFormula
from .style import DRAFTER_COLOURS
from .sweeps import figure_layout
from .tuning import gap_text

FORMULA_COLOUR = "#7f7f7f"
MEASURED_COLOUR = DRAFTER_COLOURS[0]
CONCURRENCY_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
HALF_WIDTH_PX = 620  # about a half-width chart at 1440 px: where place_legend wraps the legend


def signed_share(x: float) -> str:
    """+0.061 -> '+6.1%', -0.003 -> '-0.3%', 0.0004 -> '±0.0%' (never '-0.0%')."""
    return "±0.0%" if abs(x) < 0.0005 else f"{x:+.1%}"


def _layout(fig: go.Figure, title: str, caption: str, caption_width: int = 45, **layout) -> go.Figure:
    """The sweep figures' look for a half-width chart; `caption_width` characters per provenance line."""
    return figure_layout(fig, title, caption, caption_width=caption_width, legend_width_px=HALF_WIDTH_PX, **layout)


def tokens_per_pass(result: RunVsFormula, caption: str, caption_width: int = 45) -> go.Figure:
    """E(k, α) over k = 1..8 (dotted, labelled with its over-promise where the run measured k) and the
    measured acceptance length at each k <= K (the recorded K as an open diamond); the ceiling k + 1."""
    ks = [x.num_speculative_tokens for x in result.lengths]
    measured = [x for x in result.lengths if x.measured is not None]
    K = result.num_speculative_tokens
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=ks, y=[x.formula for x in result.lengths], mode="lines+markers+text",
        line=dict(color=FORMULA_COLOUR, dash="dot", width=2), marker=dict(color=FORMULA_COLOUR, size=7),
        text=["" if x.over_promise is None or x.num_speculative_tokens == 1 else signed_share(x.over_promise)
              for x in result.lengths],
        textposition=["bottom right" if x.over_promise is not None and x.over_promise < 0 else "top left"
                      for x in result.lengths], textfont=dict(color=FORMULA_COLOUR),
        name=f"formula E(k), α = {result.alpha:.2f} (label: formula ÷ run − 1)", meta=dict(role="formula"),
        hovertemplate="k=%{x}: the formula promises %{y:.2f} tokens per pass<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=[x.num_speculative_tokens for x in measured], y=[x.measured for x in measured], mode="lines+markers",
        line=dict(color=MEASURED_COLOUR, width=3),
        marker=dict(color=MEASURED_COLOUR, size=[14 if x.num_speculative_tokens == K else 9 for x in measured],
                    symbol=["diamond-open" if x.num_speculative_tokens == K else "circle" for x in measured],
                    line=dict(color=MEASURED_COLOUR, width=2)),
        name=f"measured (◇ the run at k={K}; below it, cut at k)", meta=dict(role="measured"),
        customdata=[[x.formula, x.over_promise] for x in measured],
        hovertemplate=("k=%{x}: measured %{y:.2f} tokens per drafted pass; formula %{customdata[0]:.2f} "
                       "(%{customdata[1]:+.1%})<extra></extra>")))
    return _layout(fig, "Tokens per pass: formula vs run", caption, caption_width, height=420,
                   xaxis=dict(title_text="num_speculative_tokens (k)", tickvals=ks),
                   yaxis=dict(title_text="tokens per drafted pass", rangemode="tozero"))


def per_position(result: RunVsFormula, caption: str, caption_width: int = 45) -> go.Figure:
    """Bars: the share of drafted steps that accepted draft j (vLLM's per-position rate) and α^j, the
    formula's expectation; the hover adds the conditional rate, the one the formula holds at α."""
    positions = [str(j + 1) for j in range(result.num_speculative_tokens)]
    conditional = ["–" if c is None else f"{c:.0%}" for c in result.conditional_rate_per_pos]
    fig = go.Figure()
    fig.add_trace(go.Bar(
        x=positions, y=result.acceptance_rate_per_pos, name="measured (vLLM's per-position acceptance)",
        marker_color=MEASURED_COLOUR, text=[f"{r:.0%}" for r in result.acceptance_rate_per_pos],
        textposition="outside", meta=dict(role="measured"), customdata=conditional,
        hovertemplate=("draft %{x}: accepted in %{y:.1%} of drafted steps; %{customdata} of those whose "
                       "draft before it was accepted<extra></extra>")))
    fig.add_trace(go.Bar(
        x=positions, y=result.formula_positions, name=f"formula: α^j with α = {result.alpha:.2f}",
        marker_color=FORMULA_COLOUR, text=[f"{r:.0%}" for r in result.formula_positions], textposition="outside",
        meta=dict(role="formula"), hovertemplate="draft %{x}: the formula expects %{y:.1%}<extra></extra>"))
    return _layout(fig, "Per draft position: run vs α^j", caption, caption_width, height=420, barmode="group",
                   xaxis=dict(title_text="draft position j"),
                   yaxis=dict(title_text="drafted steps that accepted draft j", tickformat=".0%", range=[0, 1.15]))


def speedup(result: SweepVsFormula, caption: str) -> go.Figure:
    """Per concurrency: the formula's speedup E(K, α) / (K·c + 1) (dotted, c from the step-cost fit) and the
    measured one (cell over baseline, medians), labelled with the gap; 1x is no gain."""
    rows = result.rows
    xs = [r.concurrency for r in rows]
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=xs, y=[1.0] * len(xs), mode="lines", line=dict(color="#cccccc", width=1),
        name="1x: as fast as no drafting", meta=dict(role="parity"), hoverinfo="skip"))
    fig.add_trace(go.Scatter(
        x=xs, y=[r.predicted_speedup for r in rows], mode="lines+markers+text",
        line=dict(color=FORMULA_COLOUR, dash="dot", width=2), marker=dict(color=FORMULA_COLOUR, size=8),
        text=[gap_text(r.relative_gap) for r in rows],
        textposition=["top center" if r.predicted_speedup >= r.measured_speedup else "bottom center" for r in rows],
        textfont=dict(color=FORMULA_COLOUR),
        name=f"formula E(k)/(k·c+1), k={result.num_speculative_tokens} (label: formula ÷ measured − 1)", meta=dict(role="formula"),
        customdata=[[r.alpha, r.draft_cost, r.formula_tokens_per_pass] for r in rows],
        hovertemplate=("concurrency %{x}: formula %{y:.2f}x (α %{customdata[0]:.2f}, c %{customdata[1]:.2f}, "
                       "E %{customdata[2]:.2f})<extra></extra>")))
    fig.add_trace(go.Scatter(
        x=xs, y=[r.measured_speedup for r in rows], mode="lines+markers",
        line=dict(color=MEASURED_COLOUR, width=3), marker=dict(color=MEASURED_COLOUR, size=10),
        name=f"measured: {result.drafter} (medians over the baseline's)", meta=dict(role="measured"),
        customdata=[[r.output_tokens_per_s, r.baseline_output_tokens_per_s, r.repeats] for r in rows],
        hovertemplate=("concurrency %{x}: measured %{y:.2f}x (%{customdata[0]:.1f} vs %{customdata[1]:.1f} "
                       "output tokens/s, medians of %{customdata[2]} runs)<extra></extra>")))
    log = len(xs) > 1 and xs[-1] / xs[0] >= 8
    return _layout(fig, "Speedup: formula vs sweep", caption, height=420,
                   xaxis=dict(title_text="concurrency (requests in flight)", type="log" if log else "linear",
                              tickvals=xs, ticktext=[str(x) for x in xs]),
                   yaxis=dict(title_text="speedup over no drafting", ticksuffix="x",
                              range=[0, 1.15 * max(1.0, *(r.predicted_speedup for r in rows),
                                                   *(r.measured_speedup for r in rows))]))


def break_even(result: SweepVsFormula, caption: str) -> go.Figure:
    """The break-even α at each k (drafting k tokens loses below it), one line per concurrency's c; the
    drafter's measured α as a horizontal line: where a concurrency's line is above it, drafting k loses."""
    fig = go.Figure()
    for i, r in enumerate(result.rows):
        values = result.break_even[r.concurrency]
        if all(v is None for v in values):
            continue  # c >= 1: no α pays at any k (named in the annotation)
        colour = CONCURRENCY_COLOURS[i % len(CONCURRENCY_COLOURS)]
        fig.add_trace(go.Scatter(
            x=FORMULA_KS, y=values, mode="lines+markers", line=dict(color=colour, width=2),
            marker=dict(color=colour, size=7), name=f"concurrency {r.concurrency} (c = {r.draft_cost:.2f})",
            meta=dict(role="break_even", concurrency=r.concurrency),
            hovertemplate=(f"concurrency {r.concurrency}, c = {r.draft_cost:.2f}: k=%{{x}} pays only above "
                           "α = %{y:.2f}<extra></extra>")))
    never = [r for r in result.rows if result.break_even[r.concurrency][0] is None]
    fig.add_trace(go.Scatter(
        x=[FORMULA_KS[0], FORMULA_KS[-1]], y=[result.alpha] * 2, mode="lines",
        line=dict(color="#000000", dash="dash", width=2), name=f"{result.drafter}: α = {result.alpha:.2f}",
        meta=dict(role="alpha"), hovertemplate=f"the drafter's α: {result.alpha:.2f}<extra></extra>"))
    if never:
        fig.add_annotation(
            x=0.98, y=0.04, xref="paper", yref="paper", xanchor="right", yanchor="bottom", showarrow=False,
            text="c ≥ 1 (no α pays): concurrency " + ", ".join(str(r.concurrency) for r in never),
            font=dict(color="#555555"))
    return _layout(fig, "Break-even α per k", caption, height=420,
                   xaxis=dict(title_text="num_speculative_tokens (k)", tickvals=FORMULA_KS),
                   yaxis=dict(title_text="α below which drafting k loses", range=[0, 1.02]))
