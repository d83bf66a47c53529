"""AppTest: a request of thousands of steps is drawn a page at a time (issue 43: 200,000 steps drew 52 MB of step
rows and 22 MB of output, about 45 s per visitor): timeline windows, a bounded page of rows, the first tokens."""

from __future__ import annotations

from run_builders import make_run, make_step
from streamlit.testing.v1 import AppTest

from specviz.runfile import Request, save_run
from specviz.view import render

N = 12_000


def _recorded_view_of(path: str) -> None:
    from pathlib import Path

    from specviz import ui

    ui.recorded_run_view(ui.run_from_bytes(Path(path).read_bytes()))


def test_a_long_request_is_drawn_a_window_and_a_page_at_a_time(tmp_path):
    short = Request(request_id="short", prompt="p", output_token_ids=[5, 1, 2], output_text="x", start_time_s=0.0,
                    finish_reason="length", steps=[make_step(1, [], [5]), make_step(2, [1, 2], [1, 2])])
    long = Request(request_id="long", prompt="q", output_token_ids=[7] * N, output_text="x", start_time_s=0.0,
                   finish_reason="length", steps=[make_step(i, [], [7]) for i in range(3, N + 3)])
    path = save_run(make_run([short, long], k=2), tmp_path / "long.json.gz")
    at = AppTest.from_function(_recorded_view_of, args=(str(path),), default_timeout=120).run()
    at.selectbox(key="request_id").set_value("long").run()
    assert not at.exception
    window = at.number_input(key="step_timeline_long_window")
    assert window.max == N // render.TIMELINE_WINDOW
    assert any(f"The first 5,000 of {N:,} output tokens" in c.value for c in at.caption)
    assert any(f"Step rows 1–60 of {N}" in c.value for c in at.caption)
    assert sum(len(m.value) for m in at.markdown) < 2_000_000  # all 12,000 rows and tokens drew about 4 MB
    window.set_value(3).run()
    assert not at.exception
    assert any(f"Step rows 4001–4060 of {N}" in c.value for c in at.caption)
