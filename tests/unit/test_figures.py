"""specviz.figures: each figure named once, and the first screen's headline and the race's finish agree.

For every speculative showcase run (sample_runs/showcase/) the headline (the run, "both prompts") and
the race's finish line of each of its requests ("this request", and the run's figures again) are
rendered; every figure they share, by name and scope, must have the same value and the same text, and
each must be written in the rendered HTML under its name.
"""

from __future__ import annotations

import re
from html import unescape

import pytest

from specviz import figures
from specviz.figures import Figure
from specviz.headline import headline, headline_html
from specviz.race import find_baseline, is_speculative, race_for, raceable_requests, spec_label
from specviz.runfile import SAMPLE_RUNS_DIR, load_run
from specviz.view.race_html import result_html

SHOWCASE = SAMPLE_RUNS_DIR / "showcase"
ENTRIES = [(p.name, load_run(p)) for p in sorted(SHOWCASE.glob("*.json.gz"))]
SPECULATIVE = [name for name, run in ENTRIES if is_speculative(run)]


def test_the_worked_examples():
    assert round(figures.tokens_per_target_pass(640, 290), 3) == 2.207
    assert figures.tokens_per_target_pass(5, 0) is None
    assert round(figures.mean_acceptance_length(352, 183), 3) == 2.923
    assert figures.mean_acceptance_length(0, 0) is None
    assert round(figures.speedup(27.8, 14.4), 2) == 1.93 and figures.speedup(None, 14.4) is None
    assert [figures.run_scope(n) for n in (1, 2, 8)] == ["this prompt", "both prompts", "all 8 prompts"]
    assert Figure(figures.SPEEDUP, "both prompts", 0.8).text == "1.25x slower"
    assert Figure(figures.TOKENS_PER_TARGET_PASS, "this request", 2.388).text == "2.39 tokens per target pass"


def _text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", html))


@pytest.mark.parametrize("name", SPECULATIVE)
def test_the_headline_and_every_race_finish_agree_on_every_shared_figure(name):
    run = dict(ENTRIES)[name]
    pair = find_baseline(run, [e for e in ENTRIES if e[0] != name])
    assert pair is not None, f"{name} has no baseline in the showcase"
    h = headline(run, pair.baseline)
    head_html = _text(headline_html(h))
    head = {(f.name, f.scope): f for f in h.figures}
    assert {f.name for f in h.figures} == set(figures.NAMES) and {f.scope for f in h.figures} == {"both prompts"}
    for f in h.figures:
        assert f.text in head_html and f.scope in head_html, (f, head_html)
    requests = raceable_requests(pair)
    assert requests
    for req in requests:
        race = race_for(pair, req, spec_label(run))
        finish_html = _text(result_html(race))
        finish = {(f.name, f.scope): f for f in (*race.request_figures, *race.run_figures)}
        shared = head.keys() & finish.keys()
        assert shared == head.keys()  # the finish repeats every figure of the headline, with its scope
        for key in shared:
            assert head[key].value == finish[key].value and head[key].text == finish[key].text, key
        for f in finish.values():
            assert f.text in finish_html, (f, finish_html)
        assert f"this request {next(f for f in race.request_figures if f.name == figures.SPEEDUP).text}" \
            in finish_html
        # the request's figure is the lane's own count: what the lane's last stat shows
        end = race.at(race.duration_s).speculative
        per_pass = next(f for f in race.request_figures if f.name == figures.TOKENS_PER_TARGET_PASS)
        assert per_pass.value == end.tokens_per_pass
        assert "Identical output" in finish_html, finish_html  # the showcase races end on identical output


def test_the_example_step_is_chosen_by_a_rule_that_prefers_words_over_whitespace():
    from run_builders import make_step

    from specviz.runfile import Request
    from specviz.showcase import example_step

    def texted(i, drafts, sampled, draft_texts, sampled_texts):
        return make_step(i, drafts, sampled).model_copy(update={"draft_texts": draft_texts,
                                                                "sampled_texts": sampled_texts})

    steps = [
        make_step(0, [], [1]),  # the prefill: no drafts
        # more accepted, but whitespace and a struck-through '=' that reads as a bar
        texted(1, [2, 3, 4, 5], [2, 3, 9], ["\n    ", "    ", " =", " x"], ["\n    ", "    ", " total"]),
        # the worked example's shape: two accepted words, a correction, a discarded word
        texted(2, [6, 7, 8, 10], [6, 7, 11], [" sunny", " and", " warm", " outside"], [" sunny", " and", " clear"]),
        texted(3, [12, 13, 14], [12, 13, 14, 15], [" a", " b", " c"], [" a", " b", " c", " d"]),  # all accepted
    ]
    req = Request(request_id="r", prompt="p", output_token_ids=[t for s in steps for t in s.committed_token_ids],
                  output_text="", start_time_s=0.0, finish_reason="length", steps=steps)
    assert example_step(req) == 2

    # Code: punctuation reads once struck through ('):', ' {'), whitespace and line-like pieces do not
    code = [
        make_step(0, [], [1]),
        texted(1, [2, 3, 4], [2, 9], [" b", "\n", "\n"], [" b", "\n\n"]),  # more a blank row than a step
        texted(2, [5, 6, 7], [5, 8], ["name", ")", " {"], ["name", "):"]),  # JavaScript's brace, Python's colon
        texted(3, [10, 11, 12], [10, 13], [" x", " =", " ="], [" x", " +"]),  # struck-through '=' reads as a bar
    ]
    req = req.model_copy(update={"steps": code, "output_token_ids": [t for s in code for t in s.committed_token_ids]})
    assert example_step(req) == 2


def test_two_recordings_of_a_prompt_set_whose_prompts_changed_are_named_apart():
    from specviz.runfile import SAMPLE_RUNS_DIR, load_run
    from specviz.showcase import prompts_label

    now = prompts_label(load_run(SAMPLE_RUNS_DIR / "showcase" / "ngram-k3-edit-c1.json.gz"))
    before = prompts_label(load_run(SAMPLE_RUNS_DIR / "showcase-bf16-epyc" / "ngram-k3-edit-c1.json.gz"))
    assert now == "showcase-edit: “Fix the typo in this…” and 1 more"
    assert before == "showcase-edit: “Add type hints to every…” and 1 more"
