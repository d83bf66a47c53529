"""Engine helpers that need no server: counters parsing, id joining, trace file reading."""

import json

from run_builders import make_step

from specviz.serving.counters import counters_delta, parse_spec_counters
from specviz.serving.local import port_is_free
from specviz.serving.recording import warmup_prompts
from specviz.serving.trace_reader import (
    TraceReader,
    _steps_within,
    client_request_id,
    placeholder_only_reason,
    steps_by_request,
)

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


def test_steps_by_request_reads_padded_slots_and_four_field_records():
    records = [
        {"step": 1, "t": 1.0, "reqs": [["cmpl-run-0-0-aaaaaaaa", [], [5], [5], 3]]},  # padded first step
        {"step": 2, "t": 2.0, "reqs": [["cmpl-run-0-0-aaaaaaaa", [5, 6, 7], [5, 8], [5, 8]]]},  # an older tracer
    ]
    padded, real = steps_by_request(records, ["run-0"], decode=str)["run-0"]
    assert (padded.num_padded_drafts, padded.num_accepted, padded.verified, padded.all_accepted) == (3, 0, True, False)
    assert (real.num_padded_drafts, real.num_accepted) == (0, 1)


def test_placeholder_only_traces_are_named_and_a_few_padded_admissions_are_not():
    admitted_padded = {"step": 1, "t": 1.0, "reqs": [["cmpl-a-0-0-x", [], [5], [5], 3], ["cmpl-b-0-0-y", [], [6], [6], 3]]}
    real_drafts = {"step": 2, "t": 2.0, "reqs": [["cmpl-a-0-0-x", [1, 2, 3], [1, 9], [1, 9], 0]]}
    only_pads = {"step": 3, "t": 3.0, "reqs": [["cmpl-a-0-0-x", [], [4], [4], 3], ["cmpl-b-0-0-y", [], [7], [7], 3]]}
    assert placeholder_only_reason([admitted_padded, real_drafts, only_pads]) is None
    assert placeholder_only_reason([admitted_padded]) is None  # no decode step yet
    why = placeholder_only_reason([admitted_padded, only_pads])
    assert "VLLM_USE_V2_MODEL_RUNNER=0" in why and "--no-async-scheduling" in why


def test_trace_reader_from_end_seeks_past_earlier_records_and_a_half_line(tmp_path):
    path = tmp_path / "t.jsonl"
    line = json.dumps({"step": 1, "t": 0, "reqs": []})
    path.write_text((line + "\n") * 5000 + line[:7])  # ~190 KB: more than one probe window
    reader = TraceReader(path, from_end=True)
    assert reader.read_new() == []
    with open(path, "a") as f:
        f.write(line[7:] + "\n" + line + "\n")
    assert len(reader.read_new()) == 2


def test_trace_reader_follows_the_tracers_rotation(tmp_path):
    path = tmp_path / "t.jsonl"
    rec = lambda i: json.dumps({"step": i, "t": 0, "reqs": []}) + "\n"  # noqa: E731
    path.write_text(rec(1))
    reader = TraceReader(path)
    assert [r["step"] for r in reader.read_new()] == [1]
    with open(path, "a") as f:
        f.write(rec(2))
    path.rename(tmp_path / "t.jsonl.1")  # what the tracer does past SPECVIZ_TRACE_MAX_MB
    path.write_text(rec(3))
    assert [r["step"] for r in reader.read_new()] == [2, 3]
    assert reader.read_new() == []


def test_warmup_prompts_are_distinct_and_in_no_prompt_set():
    from specviz.prompts import BUILTIN_PROMPT_SETS

    prompts = warmup_prompts(4)
    assert len(set(prompts)) == 4
    assert not set(prompts) & {p for _, ps in BUILTIN_PROMPT_SETS.values() for p in ps}


def test_the_servers_specviz_starts_import_this_checkout():
    from specviz.files import REPO_DIR
    from specviz.serve_command import TRACER_SCHEDULER_CLS

    module = TRACER_SCHEDULER_CLS.rpartition(".")[0]
    assert (REPO_DIR / (module.replace(".", "/") + ".py")).is_file()  # REPO_DIR goes on the server's PYTHONPATH
