"""Engine helpers that need no server: counters parsing, id joining, trace file reading."""

import json

from conftest import make_step
from specviz.engine import (TraceReader, _steps_within, client_request_id, counters_delta, parse_spec_counters,
                            port_is_free, steps_by_request)

# The shape of vLLM 0.32's /metrics for spec decoding (one engine, k=3).
METRICS = """
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 8.0
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 24.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 19.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 7.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 6.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 6.0
# HELP vllm:num_requests_running Number of requests.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0.0
"""


def test_parse_spec_counters_from_metrics_text():
    c = parse_spec_counters(METRICS)
    assert (c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens) == (8, 24, 19)
    assert c.num_accepted_tokens_per_pos == [7, 6, 6]
    assert parse_spec_counters("# nothing\n") is None


def test_counters_delta():
    before = parse_spec_counters(METRICS)
    after = before.model_copy(update={"num_drafts": 10, "num_accepted_tokens_per_pos": [9, 6, 7]})
    d = counters_delta(before, after)
    assert d.num_drafts == 2 and d.num_draft_tokens == 0 and d.num_accepted_tokens_per_pos == [2, 0, 1]


def test_client_request_id_strips_vllm_prefix_and_suffixes():
    assert client_request_id("cmpl-5b12bd52fab1-7-0-1f2e3d4c") == "5b12bd52fab1-7"
    assert client_request_id("cmpl-warmup-x-0-abcdef12") == "warmup-x"


def test_steps_by_request_joins_and_ignores_other_clients():
    records = [
        {"step": 1, "t": 1.0, "reqs": [["cmpl-run-0-0-aaaaaaaa", [], [5], [5]],
                                       ["cmpl-other-0-0-bbbbbbbb", [], [9], [9]]]},
        {"step": 2, "t": 2.0, "reqs": [["cmpl-run-0-0-aaaaaaaa", [1, 2], [1, 7], [1, 7]]]},
    ]
    steps = steps_by_request(records, ["run-0"], decode=lambda t: f"<{t}>")
    assert [s.engine_step for s in steps["run-0"]] == [1, 2]
    assert steps["run-0"][1].num_accepted == 1 and steps["run-0"][1].draft_texts == ["<1>", "<2>"]


def test_steps_within_keeps_steps_that_reached_the_client():
    steps = [make_step(0, [], [5]), make_step(1, [1, 2], [1, 2, 3]), make_step(2, [], [4])]
    assert len(_steps_within(steps, 4)) == 2
    assert len(_steps_within(steps, 3)) == 1


def test_trace_reader_waits_for_whole_lines(tmp_path):
    path = tmp_path / "t.jsonl"
    reader = TraceReader(path)
    assert reader.read_new() == []
    line = json.dumps({"step": 1, "t": 0, "reqs": []})
    path.write_text(line + "\n" + line[:10])
    assert len(reader.read_new()) == 1
    with open(path, "a") as f:
        f.write(line[10:] + "\n")
    assert len(reader.read_new()) == 1 and reader.read_new() == []


def test_port_is_free_sees_a_bound_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert not port_is_free(s.getsockname()[1])
