"""Unit: a run file holds at most SPECVIZ_MAX_RUN_STEPS step records (issue 43: one request of 200,000 steps, inside
the size cap, took 5.7 s and 722 MB to check and 45 s to draw); refused before parsing, with the way to raise it."""

from __future__ import annotations

import json

import pytest
from run_builders import make_run, make_step

from specviz.files import DEFAULT_MAX_RUN_STEPS, MAX_RUN_STEPS_ENV
from specviz.runfile import Request, RunFileError, list_run_files, load_run, run_bytes


def long_run(n_steps: int):
    steps = [make_step(i, [], [7]) for i in range(1, n_steps + 1)]
    req = Request(request_id="long", prompt="p", output_token_ids=[7] * n_steps, output_text="x", start_time_s=0.0,
                  finish_reason="length", steps=steps)
    return make_run([req], k=None)


def test_a_run_over_the_step_cap_is_refused_with_how_to_raise_it(monkeypatch):
    monkeypatch.setenv(MAX_RUN_STEPS_ENV, "50")
    data = run_bytes(long_run(60))
    with pytest.raises(RunFileError, match=r"<uploaded>: holds 60 step records .* at most 50 per run "
                                           r"\(SPECVIZ_MAX_RUN_STEPS\).*SPECVIZ_MAX_RUN_STEPS=120"):
        load_run(data)
    # Spaced so that the count before parsing misses every key: the exact count after parsing still refuses it.
    spaced = json.dumps(json.loads(run_bytes(long_run(60), gz=False)), separators=(",", " : ")).encode()
    with pytest.raises(RunFileError, match="holds 60 step records"):
        load_run(spaced)
    monkeypatch.setenv(MAX_RUN_STEPS_ENV, "60")
    assert len(load_run(data).requests[0].steps) == 60


def test_a_bad_step_cap_is_refused_and_the_default_holds_every_sample_run(monkeypatch):
    assert DEFAULT_MAX_RUN_STEPS == 100_000
    for path in list_run_files():
        load_run(path)
    monkeypatch.setenv(MAX_RUN_STEPS_ENV, "many")
    with pytest.raises(RunFileError, match="SPECVIZ_MAX_RUN_STEPS='many' is not a positive whole number"):
        load_run(run_bytes(long_run(2)))


def test_vllms_per_step_arrays_too_long_to_place_are_shown_as_counts_at_once():
    import time

    from test_untraced_steps import untraced_request

    from specviz.untraced_steps import PLACEMENT_BUDGET, place_steps

    n = 2000  # each chunk merges a verify step and a step without drafts: 2,000 x 2,000 placements took 21 s
    accepted = [i % 4 for i in range(n)]
    chunks, token = [], 0
    for a in accepted:
        chunks.append(list(range(token, token + a + 2)))
        token += a + 2
    started = time.perf_counter()
    placed = place_steps(untraced_request(chunks, accepted, [3] * n), 3, "ngram")
    assert time.perf_counter() - started < 1.0
    assert placed.placement == "unaligned" and placed.steps == []
    assert f"more than specviz's {PLACEMENT_BUDGET:,} places per request" in placed.why
