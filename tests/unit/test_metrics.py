import pytest
from run_builders import make_run, make_step

from specviz.metrics import (
    acceptance_length_interval,
    count_acceptance,
    output_tokens_per_s,
    request_acceptance_length,
    summarize,
    time_per_output_token_s,
    time_to_first_token_s,
)
from specviz.runfile import Request, SpecDecodeCounters


def test_acceptance_of_the_module_docstring_example():
    steps = [make_step(1, [1, 2, 3], [1, 2, 9]), make_step(2, [4, 5, 6], [4, 5, 6, 7])]
    acc = count_acceptance(steps, k=3)
    assert (acc.num_drafts, acc.num_draft_tokens, acc.num_accepted_tokens) == (2, 6, 5)
    assert acc.num_accepted_tokens_per_pos == [2, 2, 1]
    assert acc.mean_acceptance_length == 3.5
    assert acc.draft_acceptance_rate == pytest.approx(5 / 6)
    assert acc.acceptance_rate_per_pos == [1.0, 1.0, 0.5]


def test_steps_without_drafts_do_not_count_as_drafts(weather_run):
    acc = count_acceptance(weather_run.requests[0].steps, k=4)
    # step 1: 4 drafts, 2 accepted; step 2: 3 drafts, 3 accepted; prefill step ignored
    assert (acc.num_drafts, acc.num_draft_tokens, acc.num_accepted_tokens) == (2, 7, 5)
    assert acc.num_accepted_tokens_per_pos == [2, 2, 1, 0]
    assert request_acceptance_length(weather_run.requests[0]) == 3.5


def test_no_drafts_gives_no_acceptance_figures():
    acc = count_acceptance([make_step(0, [], [5])])
    assert acc.mean_acceptance_length is None and acc.draft_acceptance_rate is None
    assert acc.acceptance_rate_per_pos == []


def _req(rid, n, start, first, end):
    return Request(request_id=rid, prompt="p", output_token_ids=list(range(n)), output_text="",
                   start_time_s=start, first_token_time_s=first, end_time_s=end, finish_reason="length")


def test_latency_and_throughput_worked_numbers():
    # 4 requests of 100 tokens sent at t=0, the last finishing at t=8 -> 400 / 8 = 50 tokens/s
    reqs = [_req(f"r{i}", 100, 0.0, 0.5 + i * 0.1, 5.0 + i) for i in range(4)]
    run = make_run(reqs, k=None, concurrency=4, traced=False)
    assert output_tokens_per_s(run) == pytest.approx(50.0)
    assert time_to_first_token_s(reqs[0]) == pytest.approx(0.5)
    assert time_per_output_token_s(reqs[0]) == pytest.approx(4.5 / 99)
    s = summarize(run)
    assert s.time_to_first_token_s_p50 == pytest.approx(0.65)  # median of 0.5, 0.6, 0.7, 0.8
    assert s.time_to_first_token_s_p90 == pytest.approx(0.77)
    assert s.num_output_tokens == 400 and s.num_requests == 4
    assert s.mean_acceptance_length is None and s.counters_match is None


def test_summary_compares_trace_with_vllm_counters(weather_run):
    agreeing = SpecDecodeCounters(num_drafts=2, num_draft_tokens=7, num_accepted_tokens=5,
                                  num_accepted_tokens_per_pos=[2, 2, 1, 0])
    run = weather_run.model_copy(update={"meta": weather_run.meta.model_copy(update={"vllm_counters": agreeing})})
    assert summarize(run).counters_match is True
    off = agreeing.model_copy(update={"num_accepted_tokens": 6})
    run = weather_run.model_copy(update={"meta": weather_run.meta.model_copy(update={"vllm_counters": off})})
    assert summarize(run).counters_match is False


def test_untraced_run_takes_acceptance_from_vllm_counters():
    counters = SpecDecodeCounters(num_drafts=10, num_draft_tokens=30, num_accepted_tokens=12,
                                  num_accepted_tokens_per_pos=[6, 4, 2])
    run = make_run([_req("r", 50, 0, 0.1, 1.0)], k=3, traced=False, vllm_counters=counters)
    s = summarize(run)
    assert s.mean_acceptance_length == pytest.approx(2.2)
    assert s.acceptance_rate_per_pos == [0.6, 0.4, 0.2]


def _drafting_request(rid: str, accepted_per_step: list[int], k: int = 3) -> Request:
    steps = [make_step(i, [1] * k, [1] * a + [2]) for i, a in enumerate(accepted_per_step)]
    output = [t for s in steps for t in s.committed_token_ids]
    return Request(request_id=rid, prompt="p", output_token_ids=output, output_text="x", start_time_s=0.0,
                   finish_reason="length", steps=steps)


def test_acceptance_interval_resamples_whole_requests():
    easy, hard = _drafting_request("easy", [3, 3, 2, 3]), _drafting_request("hard", [0, 0, 1, 0])
    same = make_run([_drafting_request(f"r{i}", [1, 2]) for i in range(5)])
    assert acceptance_length_interval(same) == pytest.approx((2.5, 2.5))  # no spread between requests, none in the interval
    mixed = make_run([easy, hard, _drafting_request("mid", [1, 2, 1, 2])])
    low, high = acceptance_length_interval(mixed)
    mean = summarize(mixed).mean_acceptance_length  # 1 + 18 / 12 = 2.5
    assert 1.25 <= low < mean < high <= 3.75  # within all-hard (1 + 1/4) and all-easy (1 + 11/4)
    assert acceptance_length_interval(mixed) == (low, high)  # seeded
    assert acceptance_length_interval(mixed, level=0.5)[1] < high
    assert acceptance_length_interval(make_run([_drafting_request("none", [])])) is None
