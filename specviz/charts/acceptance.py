"""One run's acceptance per draft position (the Playground's bar chart)."""

from __future__ import annotations

import plotly.graph_objects as go

from ..metrics import Acceptance


def acceptance_per_position(acc: Acceptance, caption: str) -> go.Figure:
    """Bar per draft position j: the share of drafted steps that accepted more than j drafts."""
    rates = acc.acceptance_rate_per_pos
    fig = go.Figure(go.Bar(
        x=[f"{j + 1}" for j in range(len(rates))], y=rates,
        text=[f"{r:.0%}" for r in rates], textposition="outside",
        hovertemplate="draft position %{x}: %{y:.1%} accepted<extra></extra>",
    ))
    fig.update_layout(
        title=dict(text=f"Acceptance per draft position<br><sup>{caption}</sup>"),
        xaxis_title="draft position", yaxis_title="accepted", yaxis_tickformat=".0%",
        yaxis_range=[0, 1.1], height=300, margin=dict(t=60, b=40, l=40, r=10),
    )
    return fig
