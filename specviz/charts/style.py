"""Charts a stakeholder reads from two metres: short labels, colour by drafter, dash and marker by k, large type.

Applied by specviz.charts to every sweep figure after it is built (pure: a figure in, the same figure
restyled). The builders tag each measured trace with meta {"role": "measured", "drafter": <full
label>, "k": <int, "best" or absent>}; from those tags:

    name        "draft k=3", "ngram k=1", "eagle3 (best k)"   (short_names: the method, or the method
                and its model / lookup range when two drafters of one method share a sweep)
    colour      one hue family per drafter, in the order the drafters appear (k_colour): a drafter drawn at
                several k goes light to dark as k grows, so k reads as an ordered scale and methods as hues
    dash/marker one per k (solid circle, dash square, dot diamond, ...), the same k alike on every drafter
    hover       the full configuration ("draft_model smollm2-135m-draft use_heterogeneous_vocab=True k=3")

and `place_legend` puts a horizontal legend a fixed number of pixels below the plot area, so it never
runs into the axis title whatever the figure's height.
"""

from __future__ import annotations

import plotly.colors
import plotly.graph_objects as go

BASELINE = "baseline"  # as specviz.sweep names it (not imported: sweep imports the engine)

FONT_SIZE = 15
TITLE_SIZE = 20
AXIS_TITLE_SIZE = 16
TICK_SIZE = 14
LEGEND_SIZE = 14
LEGEND_GAP_PX = 82  # from the bottom of the plot area to the top of the legend: tick labels and axis title fit

DRAFTER_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
K_DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
K_SYMBOLS = ["circle", "square", "diamond", "triangle-up", "cross", "star"]
SHORT_METHODS = {"draft_model": "draft"}
# one sequential scale per drafter (its hue family): light to dark as k grows. YlGnBu first: its steps differ
# in hue as well as lightness, where five steps of "Blues" read as one blue (issue 42)
DRAFTER_SCALES = ["YlGnBu", "OrRd", "Greens", "Purples"]  # as DRAFTER_COLOURS: blue, red, green, purple
K_SCALE_FROM = 0.4  # the light end of a scale is near white: start where a line still shows on white


def k_colour(k: int, k_max: int, drafter_index: int = 0, k_min: int = 1) -> str:
    """The colour of k (k_min..k_max) in drafter `drafter_index`'s scale, light (k_min) to dark (k_max).
    k_colour(1, 5) is a light green-blue, k_colour(5, 5) a dark navy; a lone k is the scale's middle-dark."""
    scale = DRAFTER_SCALES[drafter_index % len(DRAFTER_SCALES)]
    at = 0.75 if k_max <= k_min else K_SCALE_FROM + (1 - K_SCALE_FROM) * (k - k_min) / (k_max - k_min)
    return plotly.colors.sample_colorscale(scale, [min(max(at, 0.0), 1.0)])[0]


def short_names(drafters: list[str]) -> dict[str, str]:
    """Short, unique names for sweep drafter labels (specviz.sweep.drafter_label).

    ["ngram lookup 2-4", "draft_model smollm2-135m-draft use_heterogeneous_vocab=True", "eagle3 smollm2-135m-eagle3"]
        -> "ngram", "draft", "eagle3"
    ["ngram lookup 2-4", "ngram lookup 1-3"] -> "ngram 2-4", "ngram 1-3"
    Names still equal after that keep their full label.
    """
    def method(d: str) -> str:
        word = d.split()[0] if d.split() else d
        return SHORT_METHODS.get(word, word)

    first = {d: method(d) for d in drafters}
    out = {}
    for d in drafters:
        if list(first.values()).count(first[d]) == 1:
            out[d] = first[d]
        else:
            rest = [w for w in d.split()[1:] if w != "lookup"]
            out[d] = f"{first[d]} {rest[0]}" if rest else first[d]
    values = list(out.values())
    return {d: (d if values.count(v) > 1 else v) for d, v in out.items()}


def _meta(trace) -> dict:
    return trace.meta if isinstance(trace.meta, dict) else {}


def _split_config(label: str) -> tuple[str, int | None]:
    """'ngram lookup 2-4 k=3' -> ('ngram lookup 2-4', 3) (charts.config_label, reversed)."""
    head, sep, tail = label.rpartition(" k=")
    return (head, int(tail)) if sep and tail.isdigit() else (label, None)


def restyle(fig: go.Figure) -> go.Figure:
    """Short names, colour per drafter, dash and marker per k (see the module docstring)."""
    traces = list(fig.data)
    order: list[str] = []
    for t in traces:
        m = _meta(t)
        if m.get("role") in ("measured", "breakeven") and m.get("drafter") not in (None, BASELINE):
            if m["drafter"] not in order:
                order.append(m["drafter"])
        elif m.get("prompt_set") is not None:  # acceptance by prompt set: bars over "drafter k=K" labels
            for x in t.x or []:
                d, _ = _split_config(str(x))
                if d not in order:
                    order.append(d)
    names = short_names(order)
    colours = {d: DRAFTER_COLOURS[i % len(DRAFTER_COLOURS)] for i, d in enumerate(order)}
    ks = sorted({m["k"] for t in traces if isinstance((m := _meta(t)).get("k"), int)})
    ks_of = {d: sorted({m["k"] for t in traces if (m := _meta(t)).get("drafter") == d and isinstance(m.get("k"), int)})
             for d in order}
    for t in traces:
        m = _meta(t)
        d = m.get("drafter")
        if m.get("prompt_set") is not None and t.type == "bar":
            full = [str(x) for x in t.x or []]
            t.update(x=[_short_config(x, names) for x in full], customdata=full,
                     hovertemplate=(t.hovertemplate or "").replace("%{x}", "%{customdata}"))
            continue
        if d is None or m.get("role") not in ("measured", "breakeven"):
            continue
        if d == BASELINE:
            t.update(name="baseline (no drafting)", line=dict(color="#555555", width=2.5),
                     marker=dict(color="#555555", size=10))
            continue
        k = m.get("k")
        colour = colours[d]
        if isinstance(k, int) and len(ks_of[d]) > 1:  # several k of one drafter: its scale, light to dark
            colour = k_colour(k, ks_of[d][-1], order.index(d), ks_of[d][0])
        if m["role"] == "breakeven" and len(ks_of[d]) > 1:  # the darkest of its k colours, as its largest k
            colour = k_colour(ks_of[d][-1], ks_of[d][-1], order.index(d), ks_of[d][0])
        if m["role"] == "breakeven":
            t.update(name=f"{names[d]}: no k pays from concurrency {m.get('concurrency')}", legendgroup=d,
                     marker=dict(color=colour, line=dict(color=colour, width=3)))
            continue
        suffix = f" k={k}" if isinstance(k, int) else " (best k)" if k == "best" else ""
        style = dict(name=names[d] + suffix, legendgroup=d,
                     line=dict(color=colour, width=3), marker=dict(color=colour, size=10))
        if isinstance(k, int):
            j = ks.index(k)
            style["line"]["dash"] = K_DASHES[j % len(K_DASHES)]
            style["marker"]["symbol"] = K_SYMBOLS[j % len(K_SYMBOLS)]
        if t.text is not None:
            style["textfont"] = dict(color=colour)
        t.update(**style)
        if t.error_y is not None and t.error_y.array is not None:
            t.update(error_y=dict(color=colour))
    return fig


def _short_config(label: str, names: dict[str, str]) -> str:
    d, k = _split_config(label)
    return names.get(d, d) + ("" if k is None else f" k={k}")


def large_type(fig: go.Figure) -> go.Figure:
    """Type sizes for a room: base, title, axis titles, ticks and legend."""
    fig.update_layout(font=dict(size=FONT_SIZE), title_font=dict(size=TITLE_SIZE),
                      legend=dict(font=dict(size=LEGEND_SIZE)), hoverlabel=dict(font_size=FONT_SIZE))
    fig.update_xaxes(title_font=dict(size=AXIS_TITLE_SIZE), tickfont=dict(size=TICK_SIZE), automargin=True)
    fig.update_yaxes(title_font=dict(size=AXIS_TITLE_SIZE), tickfont=dict(size=TICK_SIZE), automargin=True)
    return fig


def declutter_labels(fig: go.Figure, min_gap: float = 0.06) -> go.Figure:
    """Hide point labels that would print over another at the same x (closer than `min_gap` of the y span).

    The label stays in the hover (`text` is untouched; a per-point texttemplate of "" hides it on the
    plot). Labels are kept bottom-up: of two labels 1% apart at k=3, the lower one stays.
    """
    ys = [y for t in fig.data for y in (t.y or []) if isinstance(y, (int, float))]
    if not ys:
        return fig
    span = (max(ys) - min(min(ys), 0)) or 1.0
    points = []  # (x, y, trace index, point index)
    for ti, t in enumerate(fig.data):
        if t.type != "scatter" or "text" not in (t.mode or "") or t.text is None or isinstance(t.text, str):
            continue
        for pi, (x, y, text) in enumerate(zip(t.x or [], t.y or [], t.text)):
            if text and isinstance(y, (int, float)):
                points.append((x, y, ti, pi))
    hidden: set[tuple[int, int]] = set()
    for x in {p[0] for p in points}:
        kept = None
        for _, y, ti, pi in sorted((p for p in points if p[0] == x), key=lambda p: p[1]):
            if kept is not None and y - kept < min_gap * span:
                hidden.add((ti, pi))
            else:
                kept = y
    for ti in {ti for ti, _ in hidden}:
        t = fig.data[ti]
        t.texttemplate = ["" if (ti, pi) in hidden else "%{text}" for pi in range(len(t.x))]
    return fig


LEGEND_ROW_PX = 26


def legend_rows(fig: go.Figure, width_px: int) -> int:
    """About how many rows a horizontal legend takes at `width_px` (entries packed left to right)."""
    if fig.layout.showlegend is False or (len(fig.data) == 1 and fig.layout.showlegend is None
                                          and fig.data[0].showlegend is not True):
        return 0  # plotly draws no legend for a lone trace unless asked
    names = [t.name for t in fig.data if t.showlegend is not False and t.name]
    rows, used = (1 if names else 0), 0.0
    for name in names:
        w = 48 + 0.55 * LEGEND_SIZE * len(name)  # the symbol, then the text
        if used and used + w > width_px:
            rows, used = rows + 1, 0.0
        used += w
    return rows


def place_legend(fig: go.Figure, gap_px: int = LEGEND_GAP_PX, width_px: int = 1100) -> go.Figure:
    """A horizontal legend `gap_px` below the plot area, with the bottom margin (and the figure) grown to hold
    it, so plotly need not shrink the plot to fit it. `width_px` is about the chart's width on the page."""
    height = fig.layout.height or 450
    margin = fig.layout.margin
    below = gap_px + legend_rows(fig, width_px) * LEGEND_ROW_PX + 8
    extra = max(below - (margin.b or 0), 0)
    fig.update_layout(height=height + extra, margin=dict(b=(margin.b or 0) + extra))
    plot_px = max(fig.layout.height - (fig.layout.margin.t or 0) - fig.layout.margin.b, 100)
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-gap_px / plot_px, xanchor="left", x=0))
    return fig
