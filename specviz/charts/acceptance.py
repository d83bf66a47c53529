"""One run's acceptance per draft position (the Playground's bar chart)."""

from __future__ import annotations

import textwrap
from html import escape

import plotly.graph_objects as go

from ..metrics import Acceptance


def acceptance_per_position(acc: Acceptance, caption: str) -> go.Figure:
    """Bar per draft position j: the share of drafted steps that accepted more than j drafts.

    The caption is wrapped (about 44 characters a line) so a narrow column does not cut it.
    """
    rates = acc.acceptance_rate_per_pos
    subtitle = "<br>".join(escape(line) for line in textwrap.wrap(caption, 44))
    lines = subtitle.count("<br>") + 1
    fig = go.Figure(go.Bar(
        x=[f"{j + 1}" for j in range(len(rates))], y=rates,
        text=[f"{r:.0%}" for r in rates], textposition="outside",
        hovertemplate="draft position %{x}: %{y:.1%} accepted<extra></extra>",
    ))
    fig.update_layout(
        title=dict(text=f"Acceptance per draft position<br><sup>{subtitle}</sup>"),
        xaxis_title="draft position", yaxis_title="accepted", yaxis_tickformat=".0%",
        # a subtitle line takes about 24 px as drawn, with the title above it (the 5-line k=8 caption at 1440 px)
        yaxis_range=[0, 1.1], height=300 + 24 * lines, margin=dict(t=60 + 24 * lines, b=40, l=40, r=10),
    )
    return fig
