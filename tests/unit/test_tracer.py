from types import SimpleNamespace

import numpy as np
import pytest

from specviz.serving.tracer import TracerError, TracingScheduler, check_can_trace, split_drafts, trace_max_bytes


def _config(async_scheduling: bool, spec: object | None, v2: bool = False):
    return SimpleNamespace(scheduler_config=SimpleNamespace(async_scheduling=async_scheduling),
                           speculative_config=spec, use_v2_model_runner=v2)


def test_tracer_refuses_async_scheduling_with_drafts():
    with pytest.raises(TracerError, match="--no-async-scheduling"):
        check_can_trace(_config(True, object()))


def test_tracer_refuses_the_v2_model_runner_with_drafts_and_names_the_switch():
    with pytest.raises(TracerError, match="VLLM_USE_V2_MODEL_RUNNER=0"):
        check_can_trace(_config(False, object(), v2=True))


def test_tracer_accepts_sync_scheduling_on_v1_and_any_baseline():
    check_can_trace(_config(False, object()))
    check_can_trace(_config(True, None, v2=True))  # no drafts to hide: a baseline traces fine
    check_can_trace(SimpleNamespace(scheduler_config=SimpleNamespace(async_scheduling=False),
                                    speculative_config=object()))  # a vLLM without the V2 runner


def test_split_drafts_counts_only_the_placeholders_vllm_counts():
    assert split_drafts([11, 12, 13]) == ([11, 12, 13], 0)
    assert split_drafts([-1, -1, -1]) == ([], 3)  # pad_spec_decode: counted as drafted and rejected
    assert split_drafts([11, 12, -1, -1], num_invalid=2) == ([11, 12], 0)  # grammar-invalid: vLLM skips them
    assert split_drafts(np.array([7, -1])) == ([7], 1)


def _scheduler(requests: dict) -> TracingScheduler:
    tracer = object.__new__(TracingScheduler)  # no engine: only the bookkeeping under test
    tracer.requests = requests
    return tracer


def _request(outputs: int = 0, stale: int = 0, drop_stale: bool = False):
    return SimpleNamespace(num_output_tokens=outputs, is_finished=lambda: False,
                           num_stale_output_tokens=stale, drop_stale_output=drop_stale)


def test_steps_before_update_reads_arrays_padding_and_skips_what_vllm_drops():
    tracer = _scheduler({"a": _request(3), "b": _request(), "c": _request(stale=2, drop_stale=True),
                         "d": _request()})
    scheduler_output = SimpleNamespace(
        num_scheduled_tokens={"a": 4, "b": 4, "c": 1, "d": 64},
        scheduled_spec_decode_tokens={"a": [5, 6, 7], "b": [-1, -1, -1]},
        num_invalid_spec_tokens=None,
    )
    runner_output = SimpleNamespace(
        req_id_to_index={"a": 0, "b": 1, "c": 2, "d": 3},
        sampled_token_ids=[np.array([5, 6, 9]), np.array([4]), np.array([8]), np.array([], dtype=int)],
    )
    pending = tracer._steps_before_update(scheduler_output, runner_output)
    assert [(p[0], p[2], p[3], p[4], p[5]) for p in pending] == [
        ("a", 3, [5, 6, 7], [5, 6, 9], 0),
        ("b", 0, [], [4], 3),  # padded admission: its token is recorded, the slots counted
    ]  # c: stale output vLLM drops; d: a prefill chunk that sampled nothing
    assert all(type(t) is int for p in pending for t in p[4])
    assert tracer._steps_before_update(scheduler_output, SimpleNamespace(req_id_to_index={}, sampled_token_ids=[])) == []


def test_the_trace_file_rotates_past_its_cap(tmp_path, monkeypatch):
    path = tmp_path / "trace.jsonl"
    tracer = _scheduler({})
    tracer._trace_path, tracer._max_bytes, tracer._written = str(path), 100, 0
    tracer._trace_file = open(path, "a", encoding="utf-8")
    for i in range(10):
        tracer._write(f'{{"step": {i}, "pad": "{"x" * 20}"}}')
    tracer._trace_file.close()
    assert path.stat().st_size <= 100 and (tmp_path / "trace.jsonl.1").stat().st_size <= 100
    assert '"step": 9' in path.read_text()


def test_trace_cap_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("SPECVIZ_TRACE_MAX_MB", "2")
    assert trace_max_bytes() == 2 * 1024 * 1024
    monkeypatch.setenv("SPECVIZ_TRACE_MAX_MB", "lots")
    with pytest.raises(TracerError, match="SPECVIZ_TRACE_MAX_MB"):
        trace_max_bytes()
