"""AppTest: the Playground shows the engine's error under a generation whose engine died."""

from __future__ import annotations

from page_helpers import EndedGeneration, open_page
from run_builders import ENGINE_DEAD

from specviz.runfile import Run


def test_the_playground_shows_the_engines_error_under_a_failed_generation(weather_run):
    cut = weather_run.requests[0].model_copy(update={"error": ENGINE_DEAD, "finish_reason": None, "end_time_s": None})
    run = Run.model_validate({"meta": weather_run.meta.model_copy(update={
        "complete": False, "incomplete_reason": ENGINE_DEAD, "run_id": "failed",
        "engine_error": "AssertionError: Synthetic acceptance not supported with CPU sampling"}), "requests": [cut]})
    at = open_page()
    at.session_state["pg_gen"] = EndedGeneration(run)
    at.radio(key="pg_source").set_value("Local engine (specviz starts it)").run()
    assert not at.exception, at.exception
    assert any("engine failed during this run" in e.value for e in at.error)
    assert "AssertionError: Synthetic acceptance not supported with CPU sampling" in [c.value for c in at.code]
