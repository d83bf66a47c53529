"""The worked example, "sunny and warm outside", drawn phase by phase for the Methods page."""

from specviz.runfile import Request, Step
from specviz.view import walkthrough


def test_the_weather_step_phase_by_phase():
    req = walkthrough.weather_request()
    step = req.steps[0]
    assert (step.num_drafts, step.num_accepted, len(step.committed_token_ids)) == (4, 2, 3)
    pages = [walkthrough.phase_html(req, i) for i in range(len(walkthrough.PHASES))]
    assert len(set(pages)) == len(pages)
    assert "sv-accepted" not in pages[0] and pages[0].count("sv-undecided") == 4
    assert pages[1].count("✓") == 2 and pages[1].count("✗") == 1
    assert pages[2].count("sv-chip sv-accepted") == 2 and "sv-correction" not in pages[2]
    assert "sv-chip sv-rejected" in pages[3] and "sv-chip sv-correction" in pages[3] and "sv-discarded" not in pages[3]
    assert "sv-chip sv-discarded" in pages[4] and 'class="sv-output"' in pages[4]
    assert "3 tokens for one target pass" in walkthrough.phase_caption(req, 4)
    assert "'clear', not 'warm'" in walkthrough.phase_caption(req, 1)


def test_phase_views_escape_token_text():
    step = Step(engine_step=1, time_s=1.0, draft_token_ids=[1, 2], sampled_token_ids=[1, 3],
                committed_token_ids=[1, 3], num_accepted=1, draft_texts=["<b>", "<script>x</script>"],
                sampled_texts=["<b>", "&amp;"])
    req = Request(request_id="r", prompt="<i>prompt</i>", output_token_ids=[1, 3], output_text="",
                  start_time_s=0.0, finish_reason=None, steps=[step])
    for i in range(len(walkthrough.PHASES)):
        html = walkthrough.phase_html(req, i)
        assert "<script>" not in html and "<b>" not in html and "<i>" not in html
        assert "&lt;" in html
