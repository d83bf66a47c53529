"""The Methods page's "From the formula to your run" in a real browser: its four charts laid out without
overlap (title above the plot, legend below the axis title, nothing past the chart's right edge) at 1440
and 1280 px, and a screenshot of the section in test-artifacts/."""

from __future__ import annotations

import pytest
from test_browser import ARTIFACTS, TIMEOUT_MS, _wait_idle, app_server, app_url, browser, sync_api  # noqa: F401

pytestmark = pytest.mark.browser

CHARTS = ["textbook_tokens_per_pass", "textbook_per_position", "textbook_speedup", "textbook_break_even"]


def _box(locator) -> dict:
    box = locator.bounding_box()
    assert box is not None, locator
    return box


def _check_layout(page, key: str) -> None:
    chart = page.locator(f".st-key-{key}")
    sync_api.expect(chart.locator(".main-svg").first).to_be_visible()
    svg, title = _box(chart.locator(".main-svg").first), _box(chart.locator(".gtitle").first)
    plot, legend = _box(chart.locator(".nsewdrag").first), _box(chart.locator(".legend").first)
    xtitle = _box(chart.locator(".xtitle").first)
    assert title["y"] + title["height"] <= plot["y"] + 1, (key, "title runs into the plot", title, plot)
    assert title["x"] + title["width"] <= svg["x"] + svg["width"] + 1, (key, "title cut at the right", title, svg)
    assert xtitle["y"] + xtitle["height"] <= legend["y"] + 1, (key, "legend over the axis title", xtitle, legend)
    assert legend["y"] + legend["height"] <= svg["y"] + svg["height"] + 1, (key, "legend cut at the bottom")


@pytest.mark.parametrize("width", [1440, 1280])
def test_formula_section_lays_out_its_charts_and_is_screenshotted(browser, app_url, width):  # noqa: F811
    context = browser.new_context(viewport={"width": width, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(f"{app_url}/methods")
        heading = page.get_by_role("heading", name="From the formula to your run")
        sync_api.expect(heading).to_be_visible()
        _wait_idle(page)
        sync_api.expect(page.locator(".st-key-textbook_break_even .main-svg").first).to_be_attached()
        height = 0
        for _ in range(5):  # streamlit scrolls inside stMain: grow the viewport to its content until it holds
            now = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
            if now <= height:
                break
            height = now
            page.set_viewport_size({"width": width, "height": min(int(height) + 40, 16_000)})
            page.wait_for_timeout(1000)
        assert page.get_by_test_id("stException").count() == 0
        sync_api.expect(page.get_by_text("fitted α", exact=True)).to_be_visible()
        for key in CHARTS:
            _check_layout(page, key)
        top = _box(heading)["y"] - 10
        below = _box(page.locator(".st-key-textbook_break_even"))["y"]
        tables = [b for b in (_box(t) for t in page.get_by_test_id("stDataFrame").all()) if b["y"] > below]
        bottom = tables[0]  # the break-even table, under the break-even chart
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.evaluate("() => document.activeElement?.blur()")
        page.screenshot(path=str(ARTIFACTS / f"methods_formula_section_{width}.png"), full_page=True,
                        clip={"x": 0, "y": top, "width": width, "height": bottom["y"] + bottom["height"] + 10 - top})
    finally:
        context.close()
