"""Shared AppTest set-up for the page tests: open a page (or the Playground on a local engine), read its
HTML and its charts, find the sample sweep.

A plain module on pytest's pythonpath (beside run_builders.py), for the AppTests in app/ and live/;
the fixtures built on it are in app/conftest.py.
"""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from specviz.sweep import Sweep
from specviz.sweep_files import list_sweep_files, load_sweep

APP = "../app.py"  # AppTest resolves a relative path against the file that calls it: this one


def open_page(page: str | None = None, timeout: int = 60) -> AppTest:
    """The app after its first run, on `page` ("app_pages/methods.py") or the first page; it must not raise."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    if page:
        at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    return at


def local_playground(model: str, prompt: str, max_tokens: int, timeout: int) -> AppTest:
    """The Playground set to start a local engine on `model`, with the prompt and output length typed in."""
    at = open_page(timeout=timeout)
    at.radio(key="pg_source").set_value("Local engine (specviz starts it)").run()
    at.text_input(key="pg_model").set_value(model)
    at.number_input(key="pg_max_tokens").set_value(max_tokens)
    at.text_area(key="pg_prompt").set_value(prompt)
    return at


def html_of(at: AppTest) -> str:
    """Every markdown element of an AppTest, joined: where the token views' HTML lands."""
    return "\n".join(m.value for m in at.markdown)


def chart_figure(at: AppTest, key: str) -> dict:
    """The figure JSON of the plotly chart placed with `key` (exactly one)."""
    found = [c for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}")]
    assert len(found) == 1, (key, [c.proto.id for c in at.get("plotly_chart")])
    return json.loads(found[0].proto.spec)


def sample_sweep() -> tuple[str, Sweep]:
    """The first recorded sweep the pages list: its folder name (the selectbox value) and the sweep."""
    files = list_sweep_files()
    assert files, "sample_runs/sweeps/ must hold at least one recorded sweep"
    return files[0].parent.name, load_sweep(files[0])


class EndedGeneration:
    """Stands in for a LiveGeneration that has ended (by itself, or with its engine dead): follow() gives its
    one-request run, done."""

    def __init__(self, run) -> None:
        self.run = run

    def follow(self):
        yield self.run, True

    def stop(self) -> None:
        pass
