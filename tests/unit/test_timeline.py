"""The acceptance timeline: one bar per step, and the brush's range turned into step rows."""

from __future__ import annotations

import pytest

from specviz.charts import timeline


def test_the_worked_example_as_bars(weather_run):
    """Step 1 prefill (no drafts), step 2 accepts 2 of 4 (sunny and | warm outside), step 3 accepts 3 of 3."""
    t = timeline.timeline_table(weather_run.requests[0])
    rows = [(r.step, r.part, r.y0, r.y1) for r in t.itertuples()]
    assert rows == [(1, "no drafts", 0.0, 0.12),
                    (2, "accepted drafts", 0.0, 2.0), (2, "rejected + discarded drafts", 2.0, 4.0),
                    (3, "accepted drafts", 0.0, 3.0), (3, "all accepted: bonus token", 3.0, 3.25)]
    assert list(t.start) == pytest.approx([0.6, 1.6, 1.6, 2.6, 2.6])
    spec = timeline.acceptance_timeline(weather_run.requests[0]).to_dict()
    assert spec["params"][0]["name"] == timeline.BRUSH and spec["params"][0]["select"]["encodings"] == ["x"]
    assert spec["encoding"]["x"]["field"] == "start"  # the brush reports the range of this field


@pytest.mark.parametrize(("event", "expected"), [
    (None, (1, 60)),
    ({"selection": {"steps": {}}}, (1, 60)),  # cleared
    ({"selection": {"steps": {"start": [3.6, 7.2]}}}, (4, 7)),  # left edges 3.6, 4.6, 5.6, 6.6
    ({"selection": {"steps": {"start": [7.2, 3.6]}}}, (4, 7)),  # dragged right to left
    ({"selection": {"steps": {"start": [0.5, 1.0]}}}, (1, 1)),
    ({"selection": {"steps": {"start": [95.0, 120.0]}}}, (96, 100)),  # past the last step
    ({"selection": {"steps": {"start": [4.7, 5.5]}}}, (1, 60)),  # holds no bar's left edge
    ({"selection": {"other": {"start": [3, 4]}}}, (1, 60)),
])
def test_selected_steps(event, expected):
    assert timeline.selected_steps(event, 100) == expected


def test_few_steps_show_them_all():
    assert timeline.selected_steps(None, 14) == (1, 14)
    assert timeline.selected_steps(None, 0) == (1, 1)
