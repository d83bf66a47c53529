"""Viewer mode (SPECVIZ_VIEWER=1): a shared deployment opens recorded runs and sweeps only."""

import pytest
from page_helpers import open_page
from streamlit.testing.v1 import AppTest

from specviz.viewer import VIEWER_CAPTION, VIEWER_ENV, viewer_mode

# Every control that starts an engine, reaches a server or takes a server-side path, by widget key.
ENGINE_AND_SERVER_CONTROLS = {
    "radio": ["pg_source"],
    "text_input": ["pg_model", "pg_draft_model", "pg_url", "pg_trace_file", "pg_attach_spec", "pg_verify_prompt"],
    "button": ["pg_start", "pg_stop", "pg_connect", "pg_verify"],
}


def _has(at: AppTest, kind: str, key: str) -> bool:
    try:
        getattr(at, kind)(key=key)
    except KeyError:
        return False
    return True


def _captions(at: AppTest) -> list[str]:
    return [c.value for c in at.caption]


@pytest.mark.parametrize("value, on", [("1", True), ("true", True), ("yes", True), ("0", False), ("", False),
                                       ("off", False), ("False", False)])
def test_viewer_mode_reads_the_environment(monkeypatch, value, on):
    monkeypatch.setenv(VIEWER_ENV, value)
    assert viewer_mode() is on
    monkeypatch.delenv(VIEWER_ENV)
    assert viewer_mode() is False


def test_viewer_mode_playground_offers_recorded_runs_only(monkeypatch):
    monkeypatch.setenv(VIEWER_ENV, "1")
    at = open_page()
    for kind, keys in ENGINE_AND_SERVER_CONTROLS.items():
        for key in keys:
            assert not _has(at, kind, key), f"{kind} {key!r} is shown in viewer mode"
    assert VIEWER_CAPTION in _captions(at)
    # the recorded run still renders, and another sample run can be chosen
    assert at.selectbox(key="run_file") is not None and at.selectbox(key="request_id") is not None
    assert [m.label for m in at.metric][:3] == ["engine steps", "tokens per target pass", "mean acceptance length"]
    assert 'class="sv-chip sv-accepted"' in "\n".join(m.value for m in at.markdown)
    other = at.selectbox(key="run_file").options[-1]
    at.selectbox(key="run_file").set_value(other).run()
    assert not at.exception, at.exception
    assert not _has(at, "button", "pg_start")


def test_without_viewer_mode_the_engine_and_attach_controls_are_there(monkeypatch):
    monkeypatch.delenv(VIEWER_ENV, raising=False)
    at = open_page()
    assert VIEWER_CAPTION not in _captions(at)
    assert at.radio(key="pg_source").options == ["Recorded run", "Local engine (specviz starts it)",
                                                 "vLLM server at a URL"]
    at.radio(key="pg_source").set_value("Local engine (specviz starts it)").run()
    assert not at.exception, at.exception
    for kind, key in (("text_input", "pg_model"), ("button", "pg_start"), ("button", "pg_stop"),
                      ("text_input", "pg_verify_prompt"), ("button", "pg_verify")):
        assert _has(at, kind, key), key
    at.radio(key="pg_source").set_value("vLLM server at a URL").run()
    assert not at.exception, at.exception
    for kind, key in (("text_input", "pg_url"), ("text_input", "pg_trace_file"), ("button", "pg_connect")):
        assert _has(at, kind, key), key


@pytest.mark.parametrize("page, timeout, widget", [
    ("app_pages/throughput.py", 60, ("selectbox", "tp_sweep")),
    ("app_pages/tuning.py", 60, ("selectbox", "tune_sweep")),
    ("app_pages/methods.py", 240, ("selectbox", "methods_method")),  # the first run imports vLLM's config
])
def test_viewer_mode_other_pages_open_with_the_caption(monkeypatch, page, timeout, widget):
    monkeypatch.setenv(VIEWER_ENV, "1")
    at = open_page(page, timeout)
    assert VIEWER_CAPTION in _captions(at)
    assert _has(at, *widget)
