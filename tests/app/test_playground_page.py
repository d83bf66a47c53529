"""AppTest: the Playground opens on a recorded run, shows what its file holds, offers every source, steps through."""

import re

from page_helpers import EndedGeneration, html_of

from specviz.roles import output_roles, step_roles
from specviz.runfile import SAMPLE_RUNS_DIR, list_run_files, load_run
from specviz.showcase import example_step, opening_request
from specviz.view.render import step_summary


def test_recorded_run_opens_with_its_controls(app):
    assert list_run_files(), "sample_runs/ must hold at least one recorded run"
    for key in ("run_file", "request_id"):
        assert app.selectbox(key=key) is not None
    assert [m.label for m in app.metric][:3] == ["engine steps", "tokens per target pass",
                                                 "mean acceptance length"]


def test_every_sample_run_renders_the_counts_in_its_file(app):
    seen = set()
    for path in list_run_files():
        run = load_run(path)
        app.selectbox(key="run_file").set_value(str(path.relative_to(SAMPLE_RUNS_DIR))).run()
        assert not app.exception, (path.name, app.exception)
        req = run.requests[opening_request(run)]  # the view opens on the request that shows drafting best
        assert app.selectbox(key="request_id").value == req.request_id
        html = html_of(app)
        roles = [r for s in req.steps[:60] for _, r in step_roles(s)]
        out_roles = [r for _, r in output_roles(req)]
        ex = example_step(req)
        example = [r for _, r in step_roles(req.steps[ex])] if ex is not None else []
        for role in ("accepted", "rejected", "correction", "discarded", "bonus", "plain"):
            # each role appears once in the legend, in the example step, then in the output and the shown steps
            expected = 1 + example.count(role) + out_roles.count(role) + roles.count(role)
            assert len(re.findall(f'class="sv-chip sv-{role}[" ]', html)) == expected, (path.name, role)
        seen |= set(roles)
    assert seen == {"accepted", "rejected", "correction", "discarded", "bonus", "plain"}


def test_playground_opens_on_a_recorded_run_and_offers_every_source(app):
    assert app.radio(key="pg_source").value == "Recorded run"
    assert app.radio(key="pg_source").options == ["Recorded run", "Local engine (specviz starts it)",
                                                  "vLLM server at a URL"]


def test_attach_refuses_a_server_that_is_not_there(app):
    from specviz.serving.local import free_port

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
    app.selectbox(key="run_file").set_value(str(ngram.relative_to(SAMPLE_RUNS_DIR))).run()  # "showcase/..."
    assert 'class="sv-example"' in html_of(app)  # the example step, until presenting
    app.toggle(key="step_through").set_value(True).run()
    assert not app.exception, app.exception
    run = load_run(ngram)
    req = run.requests[opening_request(run)]
    first = example_step(req) + 1  # opens on a step that shows speculation, not on the prefill
    assert app.slider(key="step_at").value == first and req.steps[first - 1].num_accepted > 0
    assert 'class="sv-example"' not in html_of(app)  # one step number on screen: the presenter's
    assert [m.value for m in app.markdown if m.value.startswith("##### Step ")] == [
        f"##### Step {first} of {len(req.steps)}: {step_summary(req.steps[first - 1])}"]
    app.button(key="step_next").click().run()
    app.button(key="step_next").click().run()
    assert app.slider(key="step_at").value == first + 2
    app.button(key="step_prev").click().run()
    assert app.slider(key="step_at").value == first + 1
    # the arrow keys press these buttons in a browser
    [keys] = [h.proto.body for h in app.get("html") if "keydown" in h.proto.body]
    assert '"step_prev"' in keys and '"step_next"' in keys


def test_a_finished_live_generation_offers_every_step_on_its_timeline(app):
    run = load_run(SAMPLE_RUNS_DIR / "showcase" / "ngram-k3-edit-c1.json.gz")
    one = run.model_copy(update={"requests": [max(run.requests, key=lambda r: len(r.steps))]})
    n = len(one.requests[0].steps)
    assert n > 60  # more than the 40 rows a running generation follows
    app.session_state["pg_gen"] = EndedGeneration(one)
    app.radio(key="pg_source").set_value("Local engine (specviz starts it)").run()
    assert not app.exception, app.exception
    assert f"Step rows 1–60 of {n}: drag across the timeline to choose others" in [c.value for c in app.caption]
    assert ">step 1<" in html_of(app)  # the rows open on the first step, not on the last 40
