"""AppTest: every page opens on the embedded default and shows what the run file holds."""

import pytest
from streamlit.testing.v1 import AppTest

from specviz.render import output_roles, step_roles
from specviz.trace import list_run_files, load_run


@pytest.fixture
def app():
    at = AppTest.from_file("../app.py", default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def _html(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_recorded_run_opens_with_its_controls(app):
    assert list_run_files(), "sample_runs/ must hold at least one recorded run"
    for key in ("run_file", "request_id"):
        assert app.selectbox(key=key) is not None
    assert [m.label for m in app.metric][:2] == ["engine steps",
                                                 "mean acceptance length"]


def test_every_sample_run_renders_the_counts_in_its_file(app):
    seen = set()
    for path in list_run_files():
        run = load_run(path)
        app.selectbox(key="run_file").set_value(path.name).run()
        assert not app.exception, (path.name, app.exception)
        req = run.requests[0]
        html = _html(app)
        roles = [r for s in req.steps[:60] for _, r in step_roles(s)]
        out_roles = [r for _, r in output_roles(req)]
        for role in ("accepted", "rejected", "correction", "discarded", "bonus", "plain"):
            # each role appears once in the legend, then in the output and in the shown steps
            expected = 1 + out_roles.count(role) + roles.count(role)
            assert html.count(f'class="sv-chip sv-{role}"') == expected, (path.name, role)
        seen |= set(roles)
    assert seen == {"accepted", "rejected", "correction", "discarded", "bonus", "plain"}


def test_playground_opens_on_a_recorded_run_and_offers_every_source(app):
    assert app.radio(key="pg_source").value == "Recorded run"
    assert app.radio(key="pg_source").options == ["Recorded run", "Local engine (specviz starts it)",
                                                  "vLLM server at a URL"]


def test_attach_refuses_a_server_that_is_not_there(app):
    from specviz.engine import free_port

    app.radio(key="pg_source").set_value("vLLM server at a URL").run()
    app.text_input(key="pg_url").set_value(f"http://127.0.0.1:{free_port()}")
    app.button(key="pg_connect").click().run()
    assert not app.exception, app.exception
    assert any("cannot reach a vLLM server" in e.value for e in app.error)


def test_playground_local_engine_controls_without_an_engine(app):
    at = app
    at.radio(key="pg_source").set_value("Local engine (specviz starts it)").run()
    assert not at.exception, at.exception
    assert at.text_area(key="pg_prompt").value == "The weather today is"
    assert at.text_input(key="pg_model").value.endswith("SmolLM2-135M-Instruct")
    assert at.selectbox(key="pg_method").value == "ngram"
    assert at.slider(key="pg_k").value == 3
    assert at.button(key="pg_start") and at.button(key="pg_stop")
    assert not at.button(key="pg_start").disabled


def test_step_through_walks_one_step_at_a_time(app):
    ngram = next(p for p in list_run_files() if "ngram" in p.name)
    app.selectbox(key="run_file").set_value(ngram.name).run()
    app.toggle(key="step_through").set_value(True).run()
    assert not app.exception, app.exception
    assert app.slider(key="step_at").value == 1
    app.button(key="step_next").click().run()
    app.button(key="step_next").click().run()
    assert app.slider(key="step_at").value == 3
    app.button(key="step_prev").click().run()
    assert app.slider(key="step_at").value == 2
    run = load_run(ngram)
    assert any(f"of {len(run.requests[0].steps)}" in m.value for m in app.markdown)
