"""Unit: padded draft slots, failed requests and invalid runs are kept, counted and shown (no engine).
(The app showing them: tests/app/test_app_recorded_view.py.)"""

from __future__ import annotations

import json

from run_builders import FakeServer, make_run, make_step, stream_result

from specviz import roles
from specviz.__main__ import main
from specviz.config import SpecConfig, describe_spec
from specviz.metrics import count_acceptance, count_as_vllm, summarize
from specviz.runfile import Request, SpecDecodeCounters, Step, load_run, save_run
from specviz.serving.attached import spec_from_counters
from specviz.serving.recording import build_run
from specviz.view import render


def _padded_request() -> Request:
    """The repro's shape at k=4: a padded admission, then one real step accepting 2 of 4."""
    steps = [
        Step(engine_step=1, time_s=1.0, draft_token_ids=[], sampled_token_ids=[6], committed_token_ids=[6],
             num_accepted=0, num_padded_drafts=4),
        make_step(2, [1, 2, 3, 4], [1, 2, 5]),
    ]
    return Request(request_id="r0", prompt="p", output_token_ids=[6, 1, 2, 5], output_text="x", start_time_s=0.0,
                   finish_reason="length", steps=steps)


def test_padded_slots_are_counted_as_vllm_counts_them_and_left_out_of_specvizs_figures():
    req = _padded_request()
    assert count_acceptance(req.steps, 4).mean_acceptance_length == 3.0
    as_vllm = count_as_vllm(req.steps, 4)
    assert (as_vllm.num_drafts, as_vllm.num_draft_tokens, as_vllm.num_accepted_tokens) == (2, 8, 2)
    assert as_vllm.mean_acceptance_length == 2.0
    counters = SpecDecodeCounters(num_drafts=2, num_draft_tokens=8, num_accepted_tokens=2,
                                  num_accepted_tokens_per_pos=[1, 1, 0, 0])
    s = summarize(make_run([req], k=4, vllm_counters=counters))
    assert s.counters_match is True and s.mean_acceptance_length == 3.0
    assert (s.num_padded_steps, s.num_padded_draft_tokens) == (1, 4)


def test_a_padded_step_renders_its_token_then_dotted_pad_chips():
    step = _padded_request().steps[0]
    assert roles.step_roles(step) == [("6", "plain")] + [("pad", "padded")] * 4
    assert "4 placeholder slots" in render.step_summary(step)
    assert 'class="sv-chip sv-padded"' in render.step_html(step)
    both = Step(engine_step=3, time_s=3.0, draft_token_ids=[1, 2], sampled_token_ids=[1, 2, 9],
                committed_token_ids=[1, 2, 9], num_accepted=2, num_padded_drafts=1)
    assert [r for _, r in roles.step_roles(both)] == ["accepted", "accepted", "correction", "padded"]


def test_a_recording_that_breaks_an_invariant_is_kept_marked_invalid_and_check_fails(tmp_path, capsys):
    # The landed bug's shape: the tracer lost the first step, so the steps commit 1 token of 2.
    results = [stream_result("run-0", [6, 7])]
    records = [{"step": 2, "t": 2.0, "reqs": [["cmpl-run-0-0-aa", [], [7], [7]]]}]
    steps = {"run-0": [make_step(2, [], [7])]}
    run = build_run(FakeServer(), results, steps, run_id="run", prompt_set="unit", concurrency=1, max_tokens=2,
                    sampling={}, raw_trace_records=records)
    assert "steps commit 1 tokens that differ from its 2 output tokens" in run.meta.invalid_reason
    assert run.raw_trace_records == records and run.requests[0].steps  # kept as recorded
    path = save_run(run, tmp_path / "invalid.json.gz")
    assert load_run(path) == run
    assert main(["check", str(path)]) == 1
    assert "INVALID run" in capsys.readouterr().err


def test_a_run_records_the_servers_typed_spec_and_a_step_beyond_its_schedule_marks_it_invalid():
    scheduled = SpecConfig.from_recorded({"method": "ngram", "num_speculative_tokens": 3,
                                          "num_speculative_tokens_per_batch_size": [[1, 1, 3], [2, 8, 1]]})
    server = FakeServer()
    server.spec = scheduled
    results = [stream_result("run-0", [6, 1, 2, 3, 9]), stream_result("run-1", [7, 1, 9])]
    fits = {"run-0": [make_step(1, [], [6]), make_step(2, [1, 2, 3], [1, 2, 3, 9])],  # proposed at batch 1 (step 1)
            "run-1": [make_step(2, [], [7]), make_step(3, [1], [1, 9])]}                 # proposed at batch 2 (step 2)
    run = build_run(server, results, fits, run_id="run", prompt_set="unit", concurrency=2, max_tokens=5, sampling={})
    assert run.meta.invalid_reason is None and run.meta.spec == scheduled and run.meta.num_speculative_tokens == 3
    beyond = fits | {"run-1": [make_step(2, [], [7]), make_step(3, [1, 2], [1, 9])]}  # 2 drafts where batch 2 allows 1
    run = build_run(server, [results[0], stream_result("run-1", [7, 1, 9])], beyond, run_id="run", prompt_set="unit",
                    concurrency=2, max_tokens=5, sampling={})
    assert "request run-1 step 3 verified 2 drafts" in run.meta.invalid_reason


def test_an_attached_servers_k_comes_from_its_counters_when_nobody_gave_its_config():
    counters = SpecDecodeCounters(num_drafts=12, num_draft_tokens=36, num_accepted_tokens=22,
                                  num_accepted_tokens_per_pos=[12, 7, 3])
    spec = spec_from_counters(counters)
    assert spec.to_vllm() == {"num_speculative_tokens": 3} and describe_spec(spec).startswith("speculative decoding")
    assert spec_from_counters(None) is None


def test_a_failed_request_is_kept_with_its_error_and_check_reports_it(tmp_path, capsys):
    results = [stream_result("run-0", [6]), stream_result("run-1", [], error="HTTP 400: prompt too long")]
    run = build_run(FakeServer(), results, {"run-0": [make_step(1, [], [6])], "run-1": []}, run_id="run",
                    prompt_set="unit", concurrency=1, max_tokens=1, sampling={})
    assert run.meta.complete and run.meta.invalid_reason is None
    assert run.requests[1].error == "HTTP 400: prompt too long"
    path = save_run(run, tmp_path / "failed.json")
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["num_failed_requests"] == 1
    assert "request run-1 failed: HTTP 400: prompt too long" in out.err


def test_schema_1_files_still_open(weather_run, tmp_path):
    doc = json.loads(weather_run.model_dump_json()) | {"schema_version": 1}
    for req in doc["requests"]:
        req.pop("error")
        for step in req["steps"]:
            step.pop("num_padded_drafts")
    doc["meta"].pop("invalid_reason")
    doc.pop("raw_trace_records")
    (tmp_path / "v1.json").write_text(json.dumps(doc))
    assert load_run(tmp_path / "v1.json").requests == weather_run.requests
