"""The race replays two requests at the pace the tracer recorded them; the pair and the opening run are found."""

from __future__ import annotations

import json
import re

import pytest
from run_builders import make_run

from specviz import race, showcase
from specviz.race import Lane, Race, advance, find_baseline, matching_request
from specviz.runfile import SAMPLE_RUNS_DIR, Request, Step, StreamChunk, list_run_files, load_run
from specviz.view import race_html

PROMPT = "<|user|>Rename total to subtotal<|assistant|>"
OUTPUT = [11, 12, 13, 14, 15, 16]


def _step(i: int, t: float, drafts: list[int], sampled: list[int]) -> Step:
    return Step(engine_step=i, time_s=t, draft_token_ids=drafts, sampled_token_ids=sampled,
                committed_token_ids=sampled, num_accepted=len(sampled) - 1 if drafts else 0,
                draft_texts=[f"d{x}" for x in drafts], sampled_texts=[f"t{x}" for x in sampled])


def baseline_request(rid: str = "b0", prompt: str = PROMPT) -> Request:
    """Sent at 100.0; one token per step at 100.2, 100.4, ..., 101.2; the client has it all at 101.25."""
    steps = [_step(i, 100.2 + 0.2 * i, [], [tok]) for i, tok in enumerate(OUTPUT)]
    return Request(request_id=rid, prompt=prompt, output_token_ids=OUTPUT, output_text="", start_time_s=100.0,
                   first_token_time_s=100.21, end_time_s=101.25, finish_reason="length", steps=steps)


def speculative_request(rid: str = "s0", prompt: str = PROMPT) -> Request:
    """Sent at 200.0; prefill at 200.2 (1 token), 2 accepted + correction at 200.45, 1 + correction at 200.7."""
    steps = [_step(0, 200.2, [], [11]), _step(1, 200.45, [12, 13, 99], [12, 13, 14]),
             _step(2, 200.7, [15, 98], [15, 16])]
    return Request(request_id=rid, prompt=prompt, output_token_ids=OUTPUT, output_text="", start_time_s=200.0,
                   first_token_time_s=200.21, end_time_s=200.75, finish_reason="length", steps=steps)


@pytest.fixture
def the_race() -> Race:
    return Race(Lane.from_request(baseline_request(), "baseline"),
                Lane.from_request(speculative_request(), "ngram k=3"))


def test_tokens_appear_at_the_recorded_step_times(the_race):
    b, s = the_race.baseline, the_race.speculative
    assert b.event_s == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0, 1.2])
    assert s.event_s == pytest.approx([0.2, 0.45, 0.7])
    assert (b.finish_s, s.finish_s) == (pytest.approx(1.25), pytest.approx(0.75))
    # just before and at each recorded step: the tokens it committed appear exactly then
    for t, base_tokens, spec_tokens in [(0.0, 0, 0), (0.19, 0, 0), (0.2, 1, 1), (0.44, 2, 1), (0.45, 2, 4),
                                        (0.5, 2, 4), (0.69, 3, 4), (0.7, 3, 6), (1.19, 5, 6), (1.2, 6, 6)]:
        state = the_race.at(t)
        assert (state.baseline.tokens, state.speculative.tokens) == (base_tokens, spec_tokens), t


def test_the_worked_example_of_the_docstring(the_race):
    mid = the_race.at(0.5)
    assert (mid.baseline.tokens, mid.baseline.passes) == (2, 2)
    assert (mid.speculative.tokens, mid.speculative.passes, mid.speculative.tokens_per_pass) == (4, 2, 2.0)
    assert [role for _, role in mid.speculative.pieces] == ["plain", "accepted", "accepted", "correction"]
    assert mid.speculative.newest == 3  # the step at 0.45 added three tokens

    spec_done = the_race.at(0.75)
    assert spec_done.speculative.finished and not spec_done.baseline.finished
    assert spec_done.speculative.elapsed_s == pytest.approx(0.75)
    assert (spec_done.baseline.tokens, spec_done.speculative.tokens, spec_done.speculative.passes) == (3, 6, 3)
    assert not spec_done.finished

    end = the_race.at(5.0)  # past the end: both lanes stop at their own finish
    assert end.finished and end.t == pytest.approx(1.25)
    assert end.baseline.elapsed_s == pytest.approx(1.25) and end.speculative.elapsed_s == pytest.approx(0.75)
    assert the_race.duration_s == pytest.approx(1.25)
    assert the_race.speedup == pytest.approx((6 / 0.75) / (6 / 1.25))  # 1.67x
    assert the_race.passes_saved == 3 and the_race.same_output


def test_replay_speed_scales_wall_time_to_recorded_time(the_race):
    # a presenter at 0.25x watches the 1.25 s race for 5 s of wall clock; at 4x for 0.3125 s
    for speed in race.SPEEDS:
        t, wall, ticks = 0.0, 0.0, 0
        while t < the_race.duration_s:
            t = advance(t, 0.05, speed, the_race.duration_s)
            wall += 0.05
            ticks += 1
        assert wall == pytest.approx(the_race.duration_s / speed, abs=0.05), speed
    assert advance(1.0, 10.0, 4.0, the_race.duration_s) == pytest.approx(1.25)  # never past the end
    assert advance(0.5, -1.0, 1.0, 1.25) == 0.5  # a clock that went back does not rewind


def test_a_short_race_opens_slowed_down_to_be_watchable():
    assert race.default_speed(1.17) == 0.25  # lasts 4.7 s
    assert race.default_speed(3.0) == 0.5
    assert race.default_speed(6.0) == 1.0  # never faster than recorded by default
    assert race.default_speed(0.2) == 0.25


def test_single_step_visits_every_recorded_event_in_order(the_race):
    t, seen = 0.0, []
    while t < the_race.duration_s:
        t = the_race.next_event(t)
        seen.append(round(t, 3))
    assert seen == [0.2, 0.4, 0.45, 0.6, 0.7, 0.75, 0.8, 1.0, 1.2, 1.25]
    assert the_race.previous_event(0.7) == pytest.approx(0.6)
    assert the_race.previous_event(0.2) == 0.0


def test_untraced_request_replays_its_stream_chunks():
    chunks = [StreamChunk(time_s=10.3, token_ids=[1], text="Hi"), StreamChunk(time_s=10.5, token_ids=[2, 3],
                                                                                text=" there you")]
    req = Request(request_id="u", prompt="p", output_token_ids=[1, 2, 3], output_text="Hi there you",
                  start_time_s=10.0, first_token_time_s=10.3, end_time_s=10.6, finish_reason="stop",
                  stream_chunks=chunks)
    lane = Lane.from_request(req, "attached")
    assert lane.source == "chunks"
    state = lane.at(0.5)
    assert (state.tokens, state.passes, [p for p, _ in state.pieces]) == (3, 2, ["Hi", " there you"])


def test_steps_stamped_by_another_clock_are_anchored_to_the_first_token():
    req = speculative_request()
    shifted = [s.model_copy(update={"time_s": s.time_s + 3600}) for s in req.steps]  # an hour off
    lane = Lane.from_request(req.model_copy(update={"steps": shifted}), "remote")
    assert lane.reanchored
    assert lane.event_s == pytest.approx([0.21, 0.46, 0.71])


def test_finds_the_baseline_with_the_same_prompts():
    spec = make_run([speculative_request("s0"), speculative_request("s1", "other prompt")], k=3, run_id="spec")
    base = make_run([baseline_request("b0"), baseline_request("b1", "other prompt")], k=None, run_id="base")
    other_prompts = make_run([baseline_request("x0", "unrelated")], k=None, run_id="x")
    other_concurrency = make_run([baseline_request("c0")], k=None, run_id="c", concurrency=4)
    pair = find_baseline(spec, [("x", other_prompts), ("c", other_concurrency), ("base", base), ("spec", spec)])
    assert pair is not None and pair.baseline_name == "base" and pair.shared_prompts == 2
    assert matching_request(base, spec.requests[1]).request_id == "b1"
    assert find_baseline(spec, [("x", other_prompts), ("c", other_concurrency)]) is None
    lane_race = race.race_for(pair, spec.requests[0], race.spec_label(spec))
    assert lane_race.speculative.label == "ngram k=3" and lane_race.speedup == pytest.approx(5 / 3)


def _sample_entries():
    return [(str(p.relative_to(SAMPLE_RUNS_DIR)), load_run(p)) for p in list_run_files()]


def test_every_speculative_sample_run_finds_its_recorded_baseline():
    entries = _sample_entries()
    for name, run in entries:
        if not race.is_speculative(run):
            continue
        pair = find_baseline(run, entries)
        assert pair is not None, name
        assert pair.baseline.meta.concurrency == run.meta.concurrency
        requests = race.raceable_requests(pair)
        assert requests, name
        r = race.race_for(pair, requests[0], race.spec_label(run))
        assert r.speedup is not None and r.baseline.num_tokens and r.speculative.num_tokens, name


def test_the_app_opens_on_a_speculative_sample_run_with_a_baseline():
    entries = _sample_entries()
    name = showcase.opening_run(entries)
    run = dict(entries)[name]
    assert race.is_speculative(run) and run.meta.concurrency == 1
    assert find_baseline(run, entries) is not None
    showcased = [(n, r) for n, r in entries if n.startswith("showcase/") and showcase.showable(r)]
    pool = [r for n, r in (showcased or entries) if showcase.showable(r) and r.meta.concurrency == 1
            and find_baseline(r, entries) is not None]
    assert name.startswith("showcase/") == bool(showcased)  # sample_runs/showcase/ wins when it has one
    from specviz.metrics import run_acceptance
    assert run_acceptance(run).mean_acceptance_length == max(run_acceptance(r).mean_acceptance_length for r in pool)
    req = run.requests[showcase.opening_request(run)]
    assert any(s.num_accepted for s in req.steps)
    assert any(s.draft_token_ids and s.num_accepted < s.num_drafts for s in req.steps)


def test_showcase_folder_wins_when_it_holds_a_speculative_run():
    spec = make_run([speculative_request()], k=3, run_id="spec")
    better = make_run([speculative_request()], k=5, run_id="better")
    entries = [("showcase/a.json.gz", spec), ("b.json.gz", better)]
    assert showcase.opening_run(entries) == "showcase/a.json.gz"
    assert showcase.opening_run([("only-baseline.json.gz", make_run([baseline_request()], k=None))]) \
        == "only-baseline.json.gz"
    assert showcase.opening_run([]) is None


def test_the_track_escapes_token_text():
    req = speculative_request()
    steps = [s.model_copy(update={"sampled_texts": ["<script>x()</script>"] * len(s.sampled_token_ids),
                                  "draft_texts": ["<img src=x>"] * len(s.draft_token_ids)}) for s in req.steps]
    evil = req.model_copy(update={"steps": steps})
    the_race = Race(Lane.from_request(baseline_request(), "baseline"), Lane.from_request(evil, "<b>ngram</b>"))
    html = race_html.race_html(the_race, the_race.at(2.0), 1.0)
    assert "<script>" not in html and "&lt;script&gt;x()&lt;/script&gt;" in html
    assert "<b>ngram</b>" not in html and "&lt;b&gt;ngram&lt;/b&gt;" in html
    assert 'class="sv-result"' in html and "finished this request 1.67x faster" in html


def test_the_track_holds_the_whole_output_for_the_browser_to_replay():
    the_race = Race(Lane.from_request(baseline_request(), "baseline"),
                    Lane.from_request(speculative_request(), "ngram k=3"))
    html = race_html.race_html(the_race, the_race.at(0.5), 1.0, "abc123")
    assert 'class="sv-replay sv-replay-abc123"' in html
    assert 'class="sv-result sv-later"' in html  # the finish line, hidden until the replay reaches it
    # at 0.5 s the speculative lane shows 4 of its 6 tokens (the worked example); the other pieces are hidden
    spec_lane = html[html.index('sv-lane sv-lane-spec'):]
    assert spec_lane.count("sv-later") == 6 - the_race.at(0.5).speculative.tokens
    script = race_html.replay_script(the_race, 0.5, 2.0, "abc123")
    data = json.loads(re.search(r"const D = (\{.*?\}), id", script).group(1))
    assert data["t0"] == 0.5 and data["speed"] == 2.0 and data["lanes"][1]["tok"] == [1, 4, 6]
    assert data["lanes"][1]["ev"] == pytest.approx([0.2, 0.45, 0.7])
    with pytest.raises(ValueError, match="letters, digits and _"):
        race_html.replay_script(the_race, 0.5, 2.0, 'x"><script>')
