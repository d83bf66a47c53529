"""The Tuning page's charts: predicted throughput and acceptance at every k, measured cells beside them."""

from __future__ import annotations

# Figures of a specviz.prediction.Prediction: predicted lines over k per concurrency, the measured sweep
# cells drawn over them as markers labelled with the prediction's gap, so a miss is shown, not hidden.
import plotly.colors
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..prediction import Prediction
from ..schedule import Tuned
from .style import K_SYMBOLS, k_colour
from .sweeps import figure_layout


def _tuning_color(i: int) -> str:
    palette = plotly.colors.qualitative.Plotly
    return palette[i % len(palette)]


def gap_text(err: float | None) -> str:
    """A relative gap as a label: 0.043 -> '+4%', -0.003 -> '±0%' (not '-0%'), None -> ''."""
    if err is None:
        return ""
    return "±0%" if abs(err) < 0.005 else f"{err:+.0%}"


def _gap_position(err: float | None, side: str = "right") -> str:
    """Where a measured marker's gap label goes: away from its prediction, which (with the recommended
    k's star) lies above the marker when the prediction was high (err > 0) and below it when low."""
    return ("bottom " if err is not None and err > 0 else "top ") + side


def _clear_of_bars(label: str, side: str) -> str:
    """A gap label with a no-break space on its marker's side: every error bar at that k runs through the
    markers' centre, and a label set flush beside a marker touched a bar there (code sweep, k=4: c=8's
    "-13%" beside c=16's bar)."""
    if not label:
        return label
    return label + "\u00a0" if side == "left" else "\u00a0" + label


LABEL_OFFSET = 0.05  # a gap label's centre sits about this far (of the axis height) above or below its marker
LABEL_ROOM = 0.1  # two labels on one side of one k closer than this (of the axis height) print over each other


def _label_sides(points: list[tuple[int, int, float, float | None]], y_max: float) -> dict[tuple[int, int], str]:
    """Right or left of its marker per labelled point (concurrency, k, y, gap): at one k, a label goes right
    unless its centre would lie within LABEL_ROOM of a label already there, then left.

    A label's centre is its marker moved LABEL_OFFSET up, or down where the gap is positive (_gap_position).
    Where the concurrencies' curves meet (bfloat16 chat, k=3: c=4 at 84.5, c=8 at 102.3 on a 0-230 axis)
    two labels on one side would print over each other; so would two that point at each other from markers
    further apart (bfloat16 chat ngram, k=1: c=1 at 25.8 labelled above, c=2 at 49.2 labelled below).
    """
    def centre(y: float, gap: float | None) -> float:
        return y / y_max + (-LABEL_OFFSET if gap is not None and gap > 0 else LABEL_OFFSET)

    sides: dict[tuple[int, int], str] = {}
    for k in {p[1] for p in points}:
        placed: dict[str, list[float]] = {"right": [], "left": []}
        for c, _, y, gap in sorted((p for p in points if p[1] == k), key=lambda p: centre(p[2], p[3])):
            at = centre(y, gap)
            room = {side: min((abs(at - o) for o in placed[side]), default=1.0) for side in placed}
            side = "right" if room["right"] >= LABEL_ROOM or room["right"] >= room["left"] else "left"
            placed[side].append(at)
            sides[(c, k)] = side
    return sides


def _acceptance_groups(pred: Prediction) -> list[list[int]]:
    """The concurrencies grouped by their acceptance curve: those whose predicted and measured mean
    acceptance lengths agree (to 0.005) at every k share one group, drawn once.

    Acceptance need not depend on the batch: the float32 chat sweep measured AL 1.46 at k=1 at every
    concurrency, so five coincident lines and five stacked gap labels would hide each other; drawn
    once, as "concurrency 1, 2, 4, 8, 16", they read.
    """
    def curve(c: int) -> list[tuple[int, bool | None, float]]:
        """(k, cut from this cell? (None: a prediction), mean acceptance length): predictions, then cells."""
        return ([(r.num_speculative_tokens, None, r.mean_acceptance_length) for r in pred.rows
                 if r.concurrency == c and r.num_speculative_tokens > 0]
                + [(m.num_speculative_tokens, m.used_for_prediction, m.mean_acceptance_length) for m in pred.measured
                   if m.concurrency == c and m.mean_acceptance_length is not None])

    def same(a: list, b: list) -> bool:
        return [x[:2] for x in a] == [y[:2] for y in b] and all(abs(x[2] - y[2]) <= 0.005 for x, y in zip(a, b))

    groups: list[list[int]] = []
    for c in pred.concurrencies:
        match = next((g for g in groups if same(curve(g[0]), curve(c))), None)
        if match:
            match.append(c)
        else:
            groups.append([c])
    return groups


def _tuning_layout(fig: go.Figure, title: str, caption: str, **layout) -> go.Figure:
    """The sweep figures' layout for a half-width chart; the legend has one entry per concurrency (its
    predicted line and measured markers toggle together) and one for what the markers mean."""
    for t in fig.data:
        m = t.meta if isinstance(t.meta, dict) else {}
        if m.get("concurrency") is not None and m.get("role") in ("predicted", "measured", "gap"):
            t.legendgroup = f"concurrency {m['concurrency']}"
            if m.get("role") == "predicted":
                t.name, t.legendrank = m.get("label", f"concurrency {m['concurrency']}"), 100 + int(m["concurrency"])
            elif m.get("role") == "measured":
                t.showlegend = False
        else:
            t.legendrank = 2000
    if any((t.meta or {}).get("role") == "measured" for t in fig.data if isinstance(t.meta, dict)):
        fig.add_trace(go.Scatter(
            x=[None], y=[None], mode="markers", name="measured cell (◇ the cell acceptance was cut from)",
            marker=dict(color="#888888", size=10), meta=dict(role="legend"), hoverinfo="skip", legendrank=2000,
        ))
    return figure_layout(fig, title, caption, caption_width=100, legend_width_px=1000, **layout)


def tuning_throughput(pred: Prediction, caption: str, k: int | None = None) -> go.Figure:
    """Predicted output tokens/s vs k (0 = baseline) per concurrency; measured cells as markers with the gap.

    Each measured marker (the median of the cell's runs, bars from its min to its max) is labelled
    with (predicted - measured) / measured; the cells whose acceptance was cut at every k are open
    diamonds. A dotted segment joins prediction and measurement, a star marks the recommended k, a
    vertical line the chosen k.
    """
    fig = go.Figure()
    recommended = {r.concurrency: r for r in pred.recommend()}
    labelled = [m for m in pred.measured if not m.used_for_prediction and m.relative_error is not None]
    y_max = max([r.output_tokens_per_s for r in pred.rows] + [m.output_tokens_per_s_max for m in pred.measured], default=1)
    sides = _label_sides([(m.concurrency, m.num_speculative_tokens, m.output_tokens_per_s, m.relative_error)
                          for m in labelled], y_max)
    for i, c in enumerate(pred.concurrencies):
        color = _tuning_color(i)
        rows = [r for r in pred.rows if r.concurrency == c]
        if rows:
            fig.add_trace(go.Scatter(
                x=[r.num_speculative_tokens for r in rows], y=[r.output_tokens_per_s for r in rows],
                mode="lines", line=dict(color=color, width=2), name=f"concurrency {c}: predicted",
                meta=dict(role="predicted", concurrency=c),
                customdata=[[r.tokens_per_step, r.pass_time_s * 1000, r.speedup] for r in rows],
                hovertemplate=(f"concurrency {c}, k=%{{x}}: %{{y:.1f}} output tokens/s predicted<br>"
                               "%{customdata[0]:.2f} tokens per target pass, pass %{customdata[1]:.1f} ms (fitted), "
                               "%{customdata[2]:.2f}x<extra></extra>"),
            ))
        measured = [m for m in pred.measured if m.concurrency == c]
        if measured:
            spread = [(m.output_tokens_per_s_max - m.output_tokens_per_s,
                       m.output_tokens_per_s - m.output_tokens_per_s_min) for m in measured]
            fig.add_trace(go.Scatter(
                x=[m.num_speculative_tokens for m in measured], y=[m.output_tokens_per_s for m in measured],
                error_y=dict(type="data", symmetric=False, array=[u for u, _ in spread],
                             arrayminus=[d for _, d in spread], thickness=1.5, width=4)
                if any(u or d for u, d in spread) else None,
                mode="markers+text",
                text=[_clear_of_bars(gap_text(m.relative_error), sides.get((c, m.num_speculative_tokens), "right"))
                      if not m.used_for_prediction else "" for m in measured],
                textposition=[_gap_position(m.relative_error, sides.get((c, m.num_speculative_tokens), "right"))
                              for m in measured], textfont=dict(color=color),
                marker=dict(color=color, size=10, line=dict(color=color, width=2),
                            symbol=["diamond-open" if m.used_for_prediction else "circle" for m in measured]),
                name=f"concurrency {c}: measured (◇ acceptance cut from it)",
                meta=dict(role="measured", concurrency=c),
                customdata=[[m.predicted_output_tokens_per_s if m.predicted_output_tokens_per_s is not None
                             else float("nan"), "acceptance cut from this cell" if m.used_for_prediction else "checked",
                             f"median of {m.repeats} run(s), {m.output_tokens_per_s_min:.1f}-"
                             f"{m.output_tokens_per_s_max:.1f}", "traced" if m.traced else "untraced, vLLM's counters",
                             f"({gap_text(m.relative_error)}) " if gap_text(m.relative_error) else ""]
                            for m in measured],
                hovertemplate=(f"concurrency {c}, k=%{{x}}: %{{y:.1f}} output tokens/s measured "
                               "(%{customdata[2]}; %{customdata[3]})<br>"
                               "predicted %{customdata[0]:.1f} %{customdata[4]}· %{customdata[1]}<extra></extra>"),
            ))
        gaps = [m for m in measured if m.predicted_output_tokens_per_s is not None and not m.used_for_prediction]
        if gaps:
            fig.add_trace(go.Scatter(
                x=[v for m in gaps for v in (m.num_speculative_tokens, m.num_speculative_tokens, None)],
                y=[v for m in gaps for v in (m.predicted_output_tokens_per_s, m.output_tokens_per_s, None)],
                mode="lines", line=dict(color=color, dash="dot", width=1), name=f"gap, concurrency {c}",
                showlegend=False, meta=dict(role="gap", concurrency=c), hoverinfo="skip",
            ))
        rec = recommended.get(c)
        if rec is not None:
            fig.add_trace(go.Scatter(
                x=[rec.num_speculative_tokens], y=[rec.output_tokens_per_s], mode="markers",
                marker=dict(symbol="star", size=16, color=color, line=dict(color="black", width=1)),
                name="predicted best k (what to serve is the export above)", showlegend=i == 0,
                meta=dict(role="recommended", concurrency=c),
                hovertemplate=f"predicted best at concurrency {c}: k=%{{x}}, %{{y:.1f}} output tokens/s<extra></extra>",
            ))
    ks = sorted({r.num_speculative_tokens for r in pred.rows} | {m.num_speculative_tokens for m in pred.measured})
    if k is not None:
        fig.add_vline(x=k, line=dict(color="#444444", dash="dashdot", width=1),
                      annotation_text=f"k={k}", annotation_position="top")
    return _tuning_layout(fig, f"Throughput vs k, predicted: {pred.drafter}", caption,
                   height=500, xaxis=dict(title_text="num_speculative_tokens (k); 0 = no speculation", tickvals=ks),
                   yaxis=dict(title_text="output tokens/s", rangemode="tozero"))


def tuning_acceptance(pred: Prediction, caption: str, k: int | None = None) -> go.Figure:
    """Predicted mean acceptance length vs k per concurrency (the recorded histogram cut at k), Leviathan's
    closed form (1 - a^(k+1)) / (1 - a) with a fitted at the recorded k as a dotted comparison, and the
    measured cells as markers. Concurrencies with the same curve are drawn once (_acceptance_groups)."""
    fig = go.Figure()
    for i, group in enumerate(_acceptance_groups(pred)):
        c = group[0]
        color = _tuning_color(pred.concurrencies.index(c)) if len(group) == 1 else "#444444"
        label = f"concurrency {', '.join(str(g) for g in group)}"
        rows = [r for r in pred.rows if r.concurrency == c and r.num_speculative_tokens > 0]
        if rows:
            fig.add_trace(go.Scatter(
                x=[r.num_speculative_tokens for r in rows], y=[r.mean_acceptance_length for r in rows],
                mode="lines", line=dict(color=color, width=2), name=f"{label}: predicted (cut at k)",
                meta=dict(role="predicted", concurrency=c, concurrencies=group, label=label),
                hovertemplate=f"{label}, k=%{{x}}: %{{y:.2f}} predicted<extra></extra>",
            ))
            fig.add_trace(go.Scatter(
                x=[r.num_speculative_tokens for r in rows], y=[r.leviathan_mean_acceptance_length for r in rows],
                mode="lines", line=dict(color=color, dash="dot", width=1),
                name="Leviathan et al. closed form, one fitted rate (dotted)", showlegend=i == 0,
                meta=dict(role="leviathan", concurrency=c, concurrencies=group),
                hovertemplate=f"Leviathan et al. 2023, {label}, k=%{{x}}: %{{y:.2f}}<extra></extra>",
            ))
        measured = [m for m in pred.measured if m.concurrency == c and m.mean_acceptance_length is not None]
        if measured:
            predicted = {r.num_speculative_tokens: r.mean_acceptance_length for r in rows}
            gaps = [predicted[m.num_speculative_tokens] / m.mean_acceptance_length - 1
                    if m.num_speculative_tokens in predicted and not m.used_for_prediction else None
                    for m in measured]
            fig.add_trace(go.Scatter(
                x=[m.num_speculative_tokens for m in measured], y=[m.mean_acceptance_length for m in measured],
                mode="markers+text", textposition=[_gap_position(g) for g in gaps], textfont=dict(color=color),
                text=[gap_text(g) for g in gaps],
                marker=dict(color=color, size=10, line=dict(color=color, width=2),
                            symbol=["diamond-open" if m.used_for_prediction else "circle" for m in measured]),
                name=f"{label}: measured", meta=dict(role="measured", concurrency=c, concurrencies=group),
                hovertemplate=f"{label}, k=%{{x}}: %{{y:.2f}} measured (%{{text}})<extra></extra>",
            ))
    ks = sorted({r.num_speculative_tokens for r in pred.rows if r.num_speculative_tokens}
                | {m.num_speculative_tokens for m in pred.measured if m.num_speculative_tokens})
    if ks:
        fig.add_trace(go.Scatter(
            x=ks, y=[j + 1.0 for j in ks], mode="lines", line=dict(color="#bbbbbb", dash="dot"),
            name="ceiling: every draft accepted (k + 1)", meta=dict(role="bound"), hoverinfo="skip",
        ))
    if k is not None:
        fig.add_vline(x=k, line=dict(color="#444444", dash="dashdot", width=1))
    return _tuning_layout(fig, f"Mean acceptance length vs k: {pred.drafter}", caption,
                   height=500, xaxis=dict(title_text="num_speculative_tokens (k)", tickvals=ks),
                   yaxis=dict(title_text="tokens per drafted target pass", rangemode="tozero"))


def schedule_chart(result: Tuned, pred: Prediction, caption: str) -> go.Figure:
    """Measured output tokens/s over concurrency: the sweep's baseline and each static k, and the picks'
    schedule (its measured row where there is one, else the confirmed k's measurement at each concurrency,
    labelled with its k); where the row was measured in the confirmation or its head-to-head, the baseline
    and the static k measured there beside it, dotted (the sweep's curves may come from another day or
    machine); below, the
    schedule's k as a step line over the batch size, as vLLM looks it up, labelled at each measured
    concurrency (there, not on the stars, where they collided with the dotted lines at 1440 px)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.74, 0.26], vertical_spacing=0.05)
    concurrencies = [r.concurrency for r in result.rows]
    measured_schedule = [r for r in result.rows if r.schedule is not None]
    if measured_schedule:
        xs, ys = [r.concurrency for r in measured_schedule], [r.schedule.output_tokens_per_s for r in measured_schedule]
        name = f"the picks' schedule, measured in the {result.schedule_measured_in}"
    else:
        xs, ys = concurrencies, [r.confirmed.output_tokens_per_s for r in result.rows]
        name = f"confirmed k per concurrency, measured in the {result.confirmed_by}"
    # One measurement set: the configs measured beside the schedule in its rounds when there are any, else
    # the sweep's cells. Two sets on one chart gave k=4 at c=8 two unlabelled values (119.6 and 116.5).
    beside = {k: by_c for k, by_c in result.static_beside.items() if all(c in by_c for c in xs)}
    if len(beside) > 1:
        where = result.schedule_measured_in
        curves = {k: [(c, by_c[c].output_tokens_per_s) for c in xs] for k, by_c in sorted(beside.items())}
    else:
        where = "sweep"
        curves = {}
        for m in sorted(pred.measured, key=lambda m: m.concurrency):
            if m.concurrency in concurrencies:
                curves.setdefault(m.num_speculative_tokens, []).append((m.concurrency, m.output_tokens_per_s))
        curves = dict(sorted(curves.items()))
    drafted = [k for k in curves if k]  # k light (smallest) to dark (largest); markers by rank, never the star
    for k, points in curves.items():
        fig.add_trace(go.Scatter(
            x=[c for c, _ in points], y=[y for _, y in points], mode="lines+markers",
            name=("no drafting" if k == 0 else f"static k={k}") + f", measured in the {where}",
            meta=dict(role="static", k=k, measured_in=where),
            line=_BASELINE_LINE if k == 0 else dict(color=k_colour(k, drafted[-1], 0, drafted[0]), width=2.5),
            marker=dict(size=9, color="#7f7f7f" if k == 0 else k_colour(k, drafted[-1], 0, drafted[0]),
                        symbol="circle" if k == 0 else K_SYMBOLS[drafted.index(k) % (len(K_SYMBOLS) - 1)]),
            hovertemplate=("no drafting" if k == 0 else f"k={k}") + f", concurrency %{{x}}: %{{y:.1f}} output tokens/s "
                          f"measured in the {where} (median)<extra></extra>",
        ), row=1, col=1)
    schedule_k = {r.concurrency: result.schedule.k_at(r.concurrency) if result.schedule else 0 for r in result.rows}
    fig.add_trace(go.Scatter(
        x=xs, y=ys, mode="lines+markers", name=name, meta=dict(role="schedule"),
        line=dict(color="#111111", width=3.5), marker=dict(symbol="star", size=15, color="#111111"),
        customdata=[schedule_k[c] for c in xs],
        hovertemplate="schedule at concurrency %{x} (k=%{customdata}): %{y:.1f} output tokens/s<extra></extra>",
    ), row=1, col=1)
    if concurrencies:
        batches = list(range(1, max(concurrencies) + 1))
        fig.add_trace(go.Scatter(
            x=batches, y=[result.schedule.k_at(b) if result.schedule else 0 for b in batches], mode="lines",
            line=dict(color="#111111", width=2.5, shape="hv"), name="k by batch size (the picks)", showlegend=False,
            meta=dict(role="schedule_k"), hovertemplate="batch %{x}: k=%{y}<extra></extra>",
        ), row=2, col=1)
        fig.add_trace(go.Scatter(
            x=xs, y=[schedule_k[c] for c in xs], mode="markers+text", text=[f"k={schedule_k[c]}" for c in xs],
            # right of the point, clear of the step line's drop where a range starts at that concurrency
            textposition=["top right"] * (len(xs) - 1) + ["top left"], textfont=dict(size=13, color="#111111"),
            marker=dict(symbol="star", size=10, color="#111111"),
            showlegend=False, meta=dict(role="schedule_k_label"), hoverinfo="skip",
        ), row=2, col=1)
    fig = figure_layout(fig, f"Static k against the picks' schedule: {pred.drafter}", caption, caption_width=115,
                        height=470)  # with its legend below, the plots fit the first screen at 1280 px
    axis = _log_concurrency(concurrencies)
    fig.update_xaxes(**axis, row=1, col=1)
    fig.update_xaxes(**axis, title_text="concurrency (requests in flight) · batch size", row=2, col=1)
    fig.update_yaxes(title_text="output tokens/s", rangemode="tozero", row=1, col=1)
    k_top = max(schedule_k.values(), default=0)
    fig.update_yaxes(title_text="k", range=[-0.4, k_top + 2], dtick=2, row=2, col=1)  # headroom for the labels
    return fig


_BASELINE_LINE = dict(color="#7f7f7f", dash="dash", width=2)




def _log_concurrency(concurrencies: list[int]) -> dict:
    return dict(type="log", tickvals=concurrencies, ticktext=[str(c) for c in concurrencies])
