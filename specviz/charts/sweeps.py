"""Figures of a sweep table (specviz.sweep_table: one row per measured cell): throughput and speedup
against k and concurrency, acceptance, latency. Each builder takes the cells of one prompt set;
every figure carries its provenance in its subtitle, and CPU figures say plainly that they are CPU
figures. Pure: data in, plotly figure out; pages only place them.
"""

from __future__ import annotations

import math
import textwrap

import pandas as pd
import plotly.graph_objects as go

from ..config import short_model_name
from ..references import Reference
from ..sweep import BASELINE
from . import style as chart_style

_BASELINE_STYLE = dict(color="#7f7f7f", dash="dash", width=2)
_REFERENCE_STYLE = dict(color="#444444", dash="dot", width=2)


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _distinct(values) -> list:
    out: list = []
    for v in values:
        if _present(v) and v not in out:
            out.append(v)
    return out


def _k(value) -> int | None:
    return int(value) if _present(value) else None


def _floats(values) -> list[float | None]:
    return [float(v) if _present(v) else None for v in values]


def _spread_bars(rows: pd.DataFrame, value: str, low: str, high: str) -> dict | None:
    """Plotly error bars from low/high columns around `value` (a cell's min-max over its runs, or an
    interval); None when the table has no such columns or every bar has zero width (one run each)."""
    if low not in rows or high not in rows:
        return None
    mid, lo, hi = _floats(rows[value]), _floats(rows[low]), _floats(rows[high])
    up = [h - m if h is not None and m is not None else 0.0 for m, h in zip(mid, hi)]
    down = [m - lo_ if lo_ is not None and m is not None else 0.0 for m, lo_ in zip(mid, lo)]
    if not any(up) and not any(down):
        return None
    return dict(type="data", symmetric=False, array=up, arrayminus=down, thickness=1.5, width=4)


def fixed_k_drafters(table: pd.DataFrame) -> list[str]:
    """The drafters of a sweep table at a fixed k, in order of appearance: not the baseline, not schedules."""
    static = table[table["schedule"].isna()] if "schedule" in table else table
    return [d for d in _distinct(static["drafter"]) if d != BASELINE]


def schedules(table: pd.DataFrame) -> list[str]:
    """The rows whose k follows the batch size (vLLM's num_speculative_tokens_per_batch_size)."""
    return _distinct(table.loc[table["schedule"].notna(), "drafter"]) if "schedule" in table else []


def _static_ks(rows: pd.DataFrame) -> list[int]:
    """The k of the drafters' fixed-k cells (not the baseline's 0, not a schedule's largest k)."""
    return sorted({int(k) for d in fixed_k_drafters(rows) for k in _cells(rows, d)["num_speculative_tokens"] if _present(k)})


def machines(cells) -> list[str]:
    """The machines sweep cells were measured on, sorted: ['cpu (AMD EPYC)', 'cpu (Intel(R) Xeon(R) Processor)']."""
    return sorted({f"{c.platform} ({c.device_name})" for c in cells})


def recorded_on(cells) -> str:
    """Where and when sweep cells were measured: 'cpu (Intel(R) Xeon(R) Processor), 2026-12-05 07:43-07:58 UTC'."""
    times = [r.created_at for c in cells for r in c.runs]
    where = ", ".join(machines(cells))
    return f"{where}, {time_window(min(times), max(times))}" if times else where


def time_window(first: str, last: str) -> str:
    """'2026-12-05T07:43:10+00:00', '2026-12-05T07:58:02+00:00' -> '2026-12-05 07:43-07:58 UTC'."""
    first, last = first[:16].replace("T", " "), last[:16].replace("T", " ")
    return f"{first}-{last[11:] if last[:10] == first[:10] else last} UTC"


def config_label(drafter: str, k) -> str:
    """'ngram lookup 2-4 k=3'; a schedule's label already says its k ('ngram k by batch 1:4 2-64:1')."""
    k = _k(k)
    return drafter if k is None or drafter == BASELINE or " k by batch " in drafter else f"{drafter} k={k}"


def sweep_caption(table: pd.DataFrame, *, concurrency: int | None = None, model: str | None = None) -> str:
    """Provenance of the cells a figure shows: what was run, on what, with which vLLM.

    "CPU figures, not GPU figures · concurrency 4 · prompt set 'code' · max 48 output tokens ·
     8 requests per cell · cpu (AMD EPYC) · vLLM 0.32.0 · SmolLM2-135M-Instruct"
    """
    rows = table if concurrency is None else table[table["concurrency"] == concurrency]

    def join(column: str, fmt=str) -> str:
        values = _distinct(rows[column])
        return ", ".join(fmt(v) for v in sorted(values)) or "–"

    platforms = [str(p).lower() for p in _distinct(rows["platform"])]
    hardware = ", ".join(f"{p} ({d})" for p, d in _distinct(zip(rows["platform"], rows["device_name"]))) or "–"
    parts = ["CPU figures, not GPU figures"] if platforms and all(p == "cpu" for p in platforms) else []
    parts += [
        f"concurrency {join('concurrency', lambda c: str(int(c)))}",
        f"prompt set {join('prompt_set', lambda p: repr(str(p)))}",
        f"max {join('max_tokens', lambda n: str(int(n)))} output tokens",
        f"{join('num_requests', lambda n: str(int(n)))} requests per cell",
        hardware,
        f"vLLM {join('vllm_version')}",
    ]
    if model:
        parts.append(short_model_name(model))
    return " · ".join(parts)


TITLE_WIDTH = 64  # characters of the bold title on one line: a half-width chart at 1280 px holds about this many


SUBTITLE_LINES = 2  # provenance lines under a chart's title; more pushed the plot 130 px down (issue 42)
SUBTITLE_PX = 14  # plotly draws <sup> at 70% of the 20 px title
SUBTITLE_MIN_PX = 9  # a half-width formula chart at 1440 px holds its two lines of provenance at 9 px


def _wrap_parts(caption: str, width: int) -> list[str]:
    """The caption broken at ' · ' into lines of about `width` characters."""
    lines, line = [], ""
    for part in caption.split(" · "):
        if line and len(line) + 3 + len(part) > width:
            lines.append(line)
            line = part
        else:
            line = f"{line} · {part}" if line else part
    lines.append(line)
    return lines


def _title(title: str, caption: str, width: int = 100) -> dict:
    """Title with the caption below it in at most SUBTITLE_LINES lines, broken at a ' · ' into lines of about
    `width` characters; a caption that needs more gets longer lines in smaller type (down to SUBTITLE_MIN_PX),
    and one that needs more even then gets a third line rather than lines wider than the chart (a half-width
    formula chart at 1280 px cut its 9 px lines at the right), so every part of the provenance stays on it.
    A title longer than TITLE_WIDTH breaks between words
    ('Acceptance per draft position: ngram lookup 2-4 k by batch 1:5 2-16:4 at concurrency 1' ran off a
    1280 px page)."""
    title = "<br>".join(textwrap.wrap(title, TITLE_WIDTH, break_long_words=False, break_on_hyphens=False)) or title
    fit, widest = width, width * SUBTITLE_PX // SUBTITLE_MIN_PX  # lines longer than `widest` at the smallest type
    while len(_wrap_parts(caption, fit)) > SUBTITLE_LINES and fit + 5 <= widest:  # would run off the chart
        fit += 5
    lines = _wrap_parts(caption, fit)
    px = max(SUBTITLE_MIN_PX, round(SUBTITLE_PX * width / fit)) if fit > width else None
    style = (lambda ln: f'<span style="font-size:{px}px">{ln}</span>') if px else (lambda ln: ln)
    return dict(text=title + "".join(f"<br><sup>{style(ln)}</sup>" for ln in lines), x=0, xanchor="left",
                xref="paper", y=1, yref="container", yanchor="top", pad=dict(t=12))


def figure_layout(fig: go.Figure, title: str, caption: str, *, caption_width: int = 100, legend_width_px: int = 1100,
            **layout) -> go.Figure:
    """Title and provenance, then chart_style: short labels, colour by drafter, dash by k, large type."""
    title = _title(title, caption, caption_width)
    n_lines = title["text"].count("<br>")
    fig.update_layout(
        title=title, height=layout.pop("height", 380) + 20 * n_lines,
        margin=dict(t=56 + 20 * n_lines, b=40, l=60, r=10),
        **layout,
    )
    fig = chart_style.declutter_labels(chart_style.large_type(chart_style.restyle(fig)))
    return chart_style.place_legend(fig, width_px=legend_width_px)


def _concurrency_axis(concurrencies: list[int]) -> dict:
    """Log scale when concurrencies span 8x or more (1, 4, 16, 64), with a tick at each measured one."""
    concurrencies = sorted(concurrencies)
    log = len(concurrencies) > 1 and concurrencies[-1] / concurrencies[0] >= 8
    return dict(title_text="concurrency (requests in flight)", type="log" if log else "linear",
                tickvals=concurrencies, ticktext=[str(c) for c in concurrencies])


def _cells(table: pd.DataFrame, drafter: str, k=None, concurrency: int | None = None) -> pd.DataFrame:
    rows = table[table["drafter"] == drafter]
    if k is not None:
        rows = rows[rows["num_speculative_tokens"] == k]
    if concurrency is not None:
        rows = rows[rows["concurrency"] == concurrency]
    return rows


def best_k_rows(table: pd.DataFrame, drafter: str) -> pd.DataFrame:
    """For one drafter, the cell with the highest speedup at each concurrency (cells without one skipped)."""
    rows = _cells(table, drafter)
    rows = rows[rows["speedup"].notna()]
    if rows.empty:
        return rows
    return rows.loc[rows.groupby("concurrency")["speedup"].idxmax()].sort_values("concurrency")


def breakeven_concurrency(table: pd.DataFrame, drafter: str, k: int | None = None) -> int | None:
    """The lowest measured concurrency from which drafting stops paying (speedup < 1 there and at every
    higher measured concurrency); None while it still pays at the highest one measured.

    k=None takes the best k at each concurrency: drafting stops paying when no k beats the baseline.
    Speedups 1.5, 1.2, 0.9, 0.8 at concurrency 1, 4, 16, 64 -> 16; 1.5, 0.9, 1.1 at 1, 4, 16 -> None.
    Cells without a speedup (no baseline at their concurrency) are left out.
    """
    if k is None:
        rows = best_k_rows(table, drafter)
    else:
        rows = _cells(table, drafter, k)
        rows = rows[rows["speedup"].notna()].sort_values("concurrency")
    points = [(int(c), float(s)) for c, s in zip(rows["concurrency"], rows["speedup"])]
    found = None
    for c, s in reversed(points):
        if s >= 1:
            break
        found = c
    return found


def throughput_vs_k(table: pd.DataFrame, concurrency: int, caption: str) -> go.Figure:
    """Output tokens/s against num_speculative_tokens, one line per drafter, the baseline as a level line."""
    rows = table[table["concurrency"] == concurrency]
    ks = _static_ks(rows)
    fig = go.Figure()
    for d in fixed_k_drafters(rows):
        r = _cells(rows, d).sort_values("num_speculative_tokens")
        fig.add_trace(go.Scatter(
            x=[_k(k) for k in r["num_speculative_tokens"]], y=_floats(r["output_tokens_per_s"]),
            error_y=_spread_bars(r, "output_tokens_per_s", "output_tokens_per_s_min", "output_tokens_per_s_max"),
            mode="lines+markers", name=d, meta=dict(role="measured", drafter=d, concurrency=concurrency),
            hovertemplate=f"{d}<br>k=%{{x}}: %{{y:.1f}} output tokens/s (median of the runs)<extra></extra>",
        ))
    base = _cells(rows, BASELINE)
    if not base.empty and ks:
        b = float(base["output_tokens_per_s"].iloc[0])
        fig.add_trace(go.Scatter(
            x=[ks[0] - 0.4, ks[-1] + 0.4], y=[b, b], mode="lines", line=_BASELINE_STYLE,
            name=f"baseline, no drafting ({b:.1f} tokens/s)", meta=dict(role="baseline", concurrency=concurrency),
            hovertemplate=f"baseline: {b:.1f} output tokens/s<extra></extra>",
        ))
    for d in schedules(rows) if ks else []:  # k follows the batch: a level line, as the baseline's
        v = float(_cells(rows, d)["output_tokens_per_s"].iloc[0])
        fig.add_trace(go.Scatter(
            x=[ks[0] - 0.4, ks[-1] + 0.4], y=[v, v], mode="lines", line=dict(dash="dashdot", width=2),
            name=f"{d} ({v:.1f} tokens/s)", meta=dict(role="schedule", drafter=d, concurrency=concurrency),
            hovertemplate=f"{d}: {v:.1f} output tokens/s<extra></extra>",
        ))
    bars = "median, bars: min-max over runs · " if "output_tokens_per_s_min" in rows else ""
    return figure_layout(fig, f"Throughput vs num_speculative_tokens at concurrency {concurrency}", bars + caption,
                   xaxis=dict(title_text="num_speculative_tokens (k)", tickvals=ks),
                   yaxis=dict(title_text="output tokens/s", rangemode="tozero"))


def speedup_vs_concurrency(table: pd.DataFrame, caption: str, *, best_k: bool = False) -> go.Figure:
    """Speedup over the baseline at the same concurrency, per drafter and k (or each drafter's best k).

    A dashed line marks 1 (the baseline) over a faint band where drafting is slower; each drafter's
    break-even concurrency (breakeven_concurrency, best k) is an ✕ on its best-k speedup there, named
    in the legend (role "breakeven"), so labels never print over each other.
    """
    concurrencies = sorted(int(c) for c in _distinct(table["concurrency"]))
    axis = _concurrency_axis(concurrencies)
    fig = go.Figure()
    for d in fixed_k_drafters(table):
        if best_k:
            r = best_k_rows(table, d)
            fig.add_trace(go.Scatter(
                x=[int(c) for c in r["concurrency"]], y=_floats(r["speedup"]), mode="lines+markers+text",
                text=[f"k={_k(k)}" for k in r["num_speculative_tokens"]], textposition="top center",
                name=f"{d} (best k)", meta=dict(role="measured", drafter=d, k="best"),
                hovertemplate=f"{d} %{{text}}<br>concurrency %{{x}}: %{{y:.2f}}x<extra></extra>",
            ))
        else:
            for k in _static_ks(_cells(table, d)):
                r = _cells(table, d, k)
                r = r[r["speedup"].notna()].sort_values("concurrency")
                # a direct label at the line's end: k=1..5 of one drafter run close together at high batch
                fig.add_trace(go.Scatter(
                    x=[int(c) for c in r["concurrency"]], y=_floats(r["speedup"]), mode="lines+markers+text",
                    text=[""] * (len(r) - 1) + [f"k={_k(k)}"] if len(r) else [], textposition="middle right",
                    cliponaxis=False, error_y=_spread_bars(r, "speedup", "speedup_min", "speedup_max"),
                    name=config_label(d, k), meta=dict(role="measured", drafter=d, k=k),
                    hovertemplate=f"{config_label(d, k)}<br>concurrency %{{x}}: %{{y:.2f}}x<extra></extra>",
                ))
        c = breakeven_concurrency(table, d)  # over the static k: a schedule is drawn as its own line below
        if c is not None:  # a marker named in the legend: labels printed in the plot would collide
            best = best_k_rows(table, d)
            y = float(best.loc[best["concurrency"] == c, "speedup"].iloc[0])
            fig.add_trace(go.Scatter(
                x=[c], y=[y], mode="markers", marker=dict(symbol="x-thin-open", size=22),
                name=f"{d}: no k pays from concurrency {c}", meta=dict(role="breakeven", drafter=d, concurrency=c),
                hovertemplate=f"{d}: from concurrency {c} no k beats the baseline (best k %{{y:.2f}}x)<extra></extra>",
            ))
    for d in schedules(table):
        r = _cells(table, d)
        r = r[r["speedup"].notna()].sort_values("concurrency")
        fig.add_trace(go.Scatter(
            x=[int(c) for c in r["concurrency"]], y=_floats(r["speedup"]), mode="lines+markers",
            error_y=_spread_bars(r, "speedup", "speedup_min", "speedup_max"), line=dict(dash="dashdot", width=3),
            marker=dict(symbol="star", size=12), name=d, meta=dict(role="schedule", drafter=d),
            hovertemplate=f"{d}<br>concurrency %{{x}}: %{{y:.2f}}x<extra></extra>",
        ))
    fig.add_hrect(y0=0, y1=1, fillcolor="rgba(214,39,40,0.06)", line_width=0, layer="below")
    fig.add_hline(y=1, line=dict(_BASELINE_STYLE, width=3))
    fig.add_trace(go.Scatter(  # the line's label, in the legend where it cannot cover a data line
        x=[None], y=[None], mode="lines", line=dict(_BASELINE_STYLE, width=3), meta=dict(role="baseline"),
        name="baseline = 1x (shaded below: slower)", hoverinfo="skip", legendrank=1,
    ))
    fig = figure_layout(fig, "Speedup over the baseline vs concurrency" + (" (best k)" if best_k else ""), caption,
                        xaxis=axis, yaxis=dict(title_text="speedup (output tokens/s ÷ baseline's)", rangemode="tozero"))
    return fig.update_layout(margin=dict(r=56))  # room for the end labels


def acceptance_length_vs_k(table: pd.DataFrame, concurrency: int, caption: str) -> go.Figure:
    """Mean acceptance length (1 + accepted / drafts) against k, one line per drafter; k + 1 is the ceiling."""
    rows = table[table["concurrency"] == concurrency]
    ks = _static_ks(rows)
    fig = go.Figure()
    for d in fixed_k_drafters(rows):
        r = _cells(rows, d).sort_values("num_speculative_tokens")
        r = r[r["mean_acceptance_length"].notna()]
        fig.add_trace(go.Scatter(
            x=[_k(k) for k in r["num_speculative_tokens"]], y=_floats(r["mean_acceptance_length"]),
            error_y=_spread_bars(r, "mean_acceptance_length", "mean_acceptance_length_low",
                                 "mean_acceptance_length_high"),
            mode="lines+markers", name=d, meta=dict(role="measured", drafter=d, concurrency=concurrency),
            hovertemplate=f"{d}<br>k=%{{x}}: %{{y:.2f}} tokens per target pass<extra></extra>",
        ))
    if ks:
        fig.add_trace(go.Scatter(
            x=ks, y=[k + 1.0 for k in ks], mode="lines", line=dict(color="#bbbbbb", dash="dot"),
            name="ceiling: every draft accepted (k + 1)", meta=dict(role="bound"), hoverinfo="skip",
        ))
    bars = ("bars: 90% interval over requests · " if _spread_bars(
        rows, "mean_acceptance_length", "mean_acceptance_length_low", "mean_acceptance_length_high") else "")
    return figure_layout(fig, f"Mean acceptance length vs num_speculative_tokens at concurrency {concurrency}",
                   bars + caption,
                   xaxis=dict(title_text="num_speculative_tokens (k)", tickvals=ks),
                   yaxis=dict(title_text="tokens per target pass", rangemode="tozero"))


def acceptance_per_position_vs_reference(rates: list[float], label: str, caption: str,
                                         reference: Reference | None = None) -> go.Figure:
    """Measured acceptance per draft position as bars; a published reference, if given, as a separate
    dotted line whose legend says it was not measured here, with its source under the chart."""
    fig = go.Figure(go.Bar(
        x=list(range(1, len(rates) + 1)), y=[float(r) for r in rates], name=f"measured here: {label}",
        text=[f"{r:.0%}" for r in rates], textposition="outside", meta=dict(role="measured"),
        hovertemplate="draft position %{x}: %{y:.1%} accepted<extra></extra>",
    ))
    n = len(rates)
    if reference is not None and reference.acceptance_rate_per_pos:
        ref = reference.acceptance_rate_per_pos
        n = max(n, len(ref))
        src = reference.source
        fig.add_trace(go.Scatter(
            x=list(range(1, len(ref) + 1)), y=list(ref), mode="lines+markers",
            line=_REFERENCE_STYLE, marker=dict(symbol="diamond-open", size=10, color=_REFERENCE_STYLE["color"]),
            name=reference.legend_name(),
            meta=dict(role="reference", key=reference.key, source=src.citation(), url=src.url),
            hovertemplate=f"published: position %{{x}} about %{{y:.0%}}<br>{reference.label}<extra></extra>",
        ))
        cite = f"Reference: {src.citation()}" + (f" ({src.url})" if src.url else "")
        fig.add_annotation(
            text=f"{cite}<br>{reference.target_model}, {reference.benchmark}, {reference.hardware}",
            xref="paper", yref="paper", x=0, y=-0.42, xanchor="left", yanchor="top", showarrow=False,
            align="left", font=dict(size=10, color=_REFERENCE_STYLE["color"]), name="reference source",
        )
    fig = figure_layout(fig, f"Acceptance per draft position: {label}", caption,
                  xaxis=dict(title_text="draft position", tickvals=list(range(1, n + 1))),
                  yaxis=dict(title_text="accepted (share of drafted steps)", tickformat=".0%", range=[0, 1.1]),
                  height=420 if reference is not None else 380)
    if reference is not None:  # the legend, then the source under it: room for both below the axis
        fig.update_layout(margin=dict(b=190))
        chart_style.place_legend(fig)
        plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
        fig.update_annotations(dict(y=-(chart_style.LEGEND_GAP_PX + 60) / plot_px),
                               selector=dict(name="reference source"))
    return fig


def latency_vs_throughput(table: pd.DataFrame, caption: str) -> go.Figure:
    """One point per cell: time per output token (p50) against output tokens/s.

    One trace per configuration (the baseline, each drafter at each k), points labelled by concurrency
    and joined in concurrency order, so a line shows how a configuration trades latency for throughput.
    """
    fig = go.Figure()
    configs = ([(BASELINE, None)] + [(d, k) for d in fixed_k_drafters(table) for k in _static_ks(_cells(table, d))]
               + [(d, None) for d in schedules(table)])
    for d, k in configs:
        r = _cells(table, d, k)
        r = r[r["time_per_output_token_s_p50"].notna()].sort_values("concurrency")
        if r.empty:
            continue
        name = config_label(d, k)
        fig.add_trace(go.Scatter(
            x=_floats(r["output_tokens_per_s"]), y=[v * 1000 for v in _floats(r["time_per_output_token_s_p50"])],
            mode="lines+markers+text" if d == BASELINE else "lines+markers",  # one row of labels: no pile-up
            # below the baseline's points: at a given throughput the drafters' lines run above it
            text=[f"c={int(c)}" for c in r["concurrency"]], textposition="bottom center",
            name=name, marker=dict(size=9, symbol="square" if d == BASELINE else "circle"),
            line=dict(width=1, dash="dot", color=_BASELINE_STYLE["color"]) if d == BASELINE else dict(width=1),
            meta=dict(role="measured", drafter=d, k=k),
            hovertemplate=f"{name} %{{text}}<br>%{{x:.1f}} output tokens/s<br>%{{y:.1f}} ms per output token (p50)"
                          "<extra></extra>",
        ))
    return figure_layout(fig, "Latency vs throughput (one point per cell)", caption,
                   xaxis=dict(title_text="output tokens/s (all requests)", rangemode="tozero"),
                   yaxis=dict(title_text="time per output token, p50 (ms)", rangemode="tozero"))


def acceptance_by_prompt_set(table: pd.DataFrame, caption: str) -> go.Figure:
    """Mean acceptance length per drafter and k (averaged over concurrencies), one bar group per prompt set."""
    rows = table[(table["drafter"] != BASELINE) & table["mean_acceptance_length"].notna()]
    configs = _distinct(config_label(d, k) for d, k in zip(rows["drafter"], rows["num_speculative_tokens"]))
    fig = go.Figure()
    for ps in _distinct(rows["prompt_set"]):
        r = rows[rows["prompt_set"] == ps]
        means = {}
        for (d, k), g in r.groupby(["drafter", "num_speculative_tokens"], sort=False):
            means[config_label(d, k)] = float(g["mean_acceptance_length"].mean())
        fig.add_trace(go.Bar(
            x=[c for c in configs if c in means], y=[means[c] for c in configs if c in means], name=str(ps),
            meta=dict(role="measured", prompt_set=str(ps)),
            hovertemplate=f"prompt set '{ps}'<br>%{{x}}: %{{y:.2f}} tokens per target pass<extra></extra>",
        ))
    return figure_layout(fig, "Mean acceptance length by prompt set (mean over concurrencies)", caption,
                   barmode="group", xaxis=dict(title_text="drafter and k"),
                   yaxis=dict(title_text="tokens per target pass", rangemode="tozero"))
