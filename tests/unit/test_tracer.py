import json
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from run_builders import FakeServer, stream_result
from vllm.v1.core.sched.scheduler import Scheduler

from specviz.__main__ import main
from specviz.runfile import SpecDecodeCounters, load_run, save_run
from specviz.serving.recording import build_run
from specviz.serving.trace_reader import TraceReader, steps_by_request
from specviz.serving.tracer import (
    TracerError,
    TraceWriter,
    TracingScheduler,
    capture_before,
    check_can_trace,
    encode_step,
    record_entries,
    split_drafts,
    trace_max_bytes,
    trace_queue_steps,
)


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


class _Request:
    """The parts of vLLM's Request the tracer reads: its output list (vLLM appends to it in place)."""

    def __init__(self, outputs: int = 0) -> None:
        self._output_token_ids = list(range(outputs))


def _vllm_update(requests, scheduler_output, runner_output, skip=(), stop_after=None):
    """What vLLM's update does to what the tracer read: outputs grow, a stopping request's sampled list is trimmed."""
    for rid in scheduler_output.num_scheduled_tokens:
        if rid in skip or rid not in requests:
            continue
        sampled = runner_output.sampled_token_ids[runner_output.req_id_to_index[rid]]
        if stop_after and rid in stop_after:
            del sampled[stop_after[rid]:]
        requests[rid]._output_token_ids.extend(sampled)


def test_the_capture_reads_lengths_only_and_the_entries_rebuild_what_vllm_trims_and_skip_what_it_skips():
    requests = {"a": _Request(3), "b": _Request(), "c": _Request(), "d": _Request(), "e": _Request(5)}
    scheduler_output = SimpleNamespace(
        num_scheduled_tokens={"a": 4, "b": 4, "c": 1, "d": 64, "e": 4, "gone": 4},
        scheduled_spec_decode_tokens={"a": [5, 6, 7], "b": [-1, -1, -1], "e": [5, 6, 7]},
        num_invalid_spec_tokens=None,
    )
    runner_output = SimpleNamespace(
        req_id_to_index={"a": 0, "b": 1, "c": 2, "d": 3, "e": 4, "gone": 5},
        sampled_token_ids=[[5, 6, 9], [4], [8], [], [5, 6, 9], [3]],
    )
    captured = capture_before(requests, scheduler_output, runner_output)
    assert captured[0] == ["a", "b", "c", "d", "e"]  # "gone": aborted during the step, as vLLM skips it
    # c: stale output vLLM drops (its output does not grow); e stops after its first token (max_tokens)
    _vllm_update(requests, scheduler_output, runner_output, skip={"c"}, stop_after={"e": 1})
    after = [*map(len, captured[1])]
    assert record_entries(captured, after, scheduler_output, runner_output) == [
        ["a", [5, 6, 7], [5, 6, 9], 3, 0],
        ["b", [], [4], 1, 3],  # padded admission: its token is recorded, the slots counted
        ["e", [5, 6, 7], [5, 6, 9], 1, 0],  # sampled as before the trim, 1 of it committed
    ]  # d: a prefill chunk that sampled nothing
    assert capture_before(requests, scheduler_output, SimpleNamespace(req_id_to_index={}, sampled_token_ids=[])) is None


def test_numpy_sampled_tokens_are_written_as_ints(tmp_path):
    requests = {"a": _Request()}
    sched = SimpleNamespace(num_scheduled_tokens={"a": 2}, scheduled_spec_decode_tokens={"a": np.array([7, -1])},
                            num_invalid_spec_tokens=None)
    runner = SimpleNamespace(req_id_to_index={"a": 0}, sampled_token_ids=[np.array([7, 8])])
    captured = capture_before(requests, sched, runner)
    requests["a"]._output_token_ids.extend([7, 8])
    line = encode_step((1, 0.5, captured, [*map(len, captured[1])], sched, runner))
    assert json.loads(line) == {"step": 1, "t": 0.5, "reqs": [["a", [7], [7, 8], 2, 1]]}


def test_the_trace_file_rotates_past_its_cap(tmp_path):
    path = tmp_path / "trace.jsonl"
    writer = TraceWriter(str(path), 100, 1000, lambda item: item)
    for i in range(10):
        writer.put(i, f'{{"step": {i}, "pad": "{"x" * 20}"}}'.encode())
    writer.close()
    assert writer.num_written == 10 and writer.num_dropped == 0
    assert path.stat().st_size <= 100 and (tmp_path / "trace.jsonl.1").stat().st_size <= 100
    assert '"step": 9' in path.read_text()


def _flooded_tracer(tmp_path, monkeypatch, gate: threading.Event, max_steps: int = 2):
    """A TracingScheduler over one request, whose disk hangs until `gate` is set, behind a queue of `max_steps`."""
    requests = {"cmpl-run-0-0-aa": _Request()}
    tracer = object.__new__(TracingScheduler)  # no engine: vLLM's update is the fake below
    tracer.requests, tracer._engine_step = requests, 0
    tracer._writer = TraceWriter(str(tmp_path / "trace.jsonl"), 1 << 30, max_steps, encode_step)
    write = tracer._writer._write
    tracer._writer._write = lambda line: (gate.wait(), write(line))
    monkeypatch.setattr(Scheduler, "update_from_output",
                        lambda self, so, mro: _vllm_update(self.requests, so, mro) or {})
    return tracer, requests


def _one_token_step(token: int):
    sched = SimpleNamespace(num_scheduled_tokens={"cmpl-run-0-0-aa": 1}, scheduled_spec_decode_tokens={},
                            num_invalid_spec_tokens=None)
    return sched, SimpleNamespace(req_id_to_index={"cmpl-run-0-0-aa": 0}, sampled_token_ids=[[token]])


def test_a_flooded_writer_drops_whole_steps_counts_them_and_never_stalls_the_scheduler(tmp_path, monkeypatch, capsys):
    gate = threading.Event()  # a disk that hangs until set
    tracer, _ = _flooded_tracer(tmp_path, monkeypatch, gate)
    call_s = []
    for token in range(40):
        start = time.perf_counter()
        tracer.update_from_output(*_one_token_step(token))
        call_s.append(time.perf_counter() - start)
    assert max(call_s) < 0.5  # never waits on the hung disk (an inline write would hang here forever)
    writer = tracer._writer
    assert writer.num_dropped >= 40 - 3  # one being written, two queued
    gate.set()
    tracer._writer.close()
    assert writer.num_written + writer.num_dropped == 40

    reader = TraceReader(tmp_path / "trace.jsonl")
    records = reader.read_new()
    assert len(records) == writer.num_written and reader.num_dropped_steps == writer.num_dropped
    lines = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    markers = [line for line in lines if "dropped_steps" in line]
    assert sum(m["dropped_steps"] for m in markers) == writer.num_dropped
    assert all(m["first_step"] <= m["last_step"] for m in markers)

    steps = steps_by_request(records, ["run-0"], decode=str)
    run = build_run(FakeServer(), [stream_result("run-0", list(range(40)))], steps, run_id="run", prompt_set="unit",
                    concurrency=1, max_tokens=40, sampling={}, raw_trace_records=records,
                    trace_dropped_steps=reader.num_dropped_steps,
                    counters=SpecDecodeCounters(num_drafts=0, num_draft_tokens=0, num_accepted_tokens=0,
                                                num_accepted_tokens_per_pos=[0, 0, 0]))
    assert run.meta.invalid_reason is None and run.meta.trace_dropped_steps == writer.num_dropped
    assert run.requests[0].num_untraced_tokens == writer.num_dropped  # one token per dropped step here
    path = save_run(run, tmp_path / "run.json")
    assert load_run(path) == run
    assert main(["check", str(path)]) == 3  # valid but incomplete
    err = capsys.readouterr().err
    assert (f"the run's traces are INCOMPLETE: the tracer's writer fell behind and dropped {writer.num_dropped} "
            f"engine steps, so {writer.num_dropped} output tokens of 1 request(s) have no step") in err


def test_a_step_lost_without_a_count_still_marks_the_run_invalid():
    records = [{"step": 2, "t": 2.0, "reqs": [["cmpl-run-0-0-aa", [], [7], 1]]}]
    run = build_run(FakeServer(), [stream_result("run-0", [6, 7])], steps_by_request(records, ["run-0"], str),
                    run_id="run", prompt_set="unit", concurrency=1, max_tokens=2, sampling={}, raw_trace_records=records)
    assert "steps commit 1 tokens that differ from its 2 output tokens" in run.meta.invalid_reason


def test_shutdown_flushes_what_the_writer_holds_within_its_bound(tmp_path, monkeypatch):
    gate = threading.Event()
    tracer, _ = _flooded_tracer(tmp_path, monkeypatch, gate, max_steps=100)
    for token in range(20):
        tracer.update_from_output(*_one_token_step(token))
    threading.Timer(0.2, gate.set).start()  # the disk comes back while shutdown waits
    start = time.monotonic()
    tracer._writer.close(timeout_s=5)
    assert time.monotonic() - start < 5
    assert [r["step"] for r in TraceReader(tmp_path / "trace.jsonl").read_new()] == list(range(1, 21))
    hung = threading.Event()
    (tmp_path / "hung").mkdir()
    tracer, _ = _flooded_tracer(tmp_path / "hung", monkeypatch, hung, max_steps=100)
    tracer.update_from_output(*_one_token_step(1))
    start = time.monotonic()
    tracer._writer.close(timeout_s=0.3)  # a disk that never comes back does not hold the exit
    assert time.monotonic() - start < 2
    hung.set()


def test_queue_size_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("SPECVIZ_TRACE_QUEUE_STEPS", "8")
    assert trace_queue_steps() == 8
    monkeypatch.setenv("SPECVIZ_TRACE_QUEUE_STEPS", "0")
    with pytest.raises(TracerError, match="SPECVIZ_TRACE_QUEUE_STEPS"):
        trace_queue_steps()


def test_trace_cap_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("SPECVIZ_TRACE_MAX_MB", "2")
    assert trace_max_bytes() == 2 * 1024 * 1024
    monkeypatch.setenv("SPECVIZ_TRACE_MAX_MB", "lots")
    with pytest.raises(TracerError, match="SPECVIZ_TRACE_MAX_MB"):
        trace_max_bytes()


def test_the_reader_reads_todays_and_earlier_lines_and_counts_the_dropped_steps(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in [
        {"step": 1, "t": 1.0, "reqs": [["cmpl-run-0-0-aa", [], [5], [5]]]},  # four fields, committed ids
        {"step": 2, "t": 2.0, "reqs": [["cmpl-run-0-0-aa", [5, 6], [5, 9], [5, 9], 0]]},  # committed ids
        {"dropped_steps": 2, "first_step": 3, "last_step": 4},
        {"step": 5, "t": 5.0, "reqs": [["cmpl-run-0-0-aa", [1, 2], [1, 2, 3], 2, 0]]},  # today: how many committed
    ]) + "\n")
    reader = TraceReader(path)
    records = reader.read_new()
    assert [r["step"] for r in records] == [1, 2, 5] and reader.num_dropped_steps == 2
    steps = steps_by_request(records, ["run-0"], decode=str)["run-0"]
    assert [s.committed_token_ids for s in steps] == [[5], [5, 9], [1, 2]]
    assert steps[2].sampled_token_ids == [1, 2, 3] and steps[2].num_accepted == 2


def test_the_recorder_waits_for_the_writers_last_steps_and_not_for_dropped_ones(tmp_path):
    from specviz.serving.recording import read_until_traced

    path = tmp_path / "trace.jsonl"
    line = lambda step, n: json.dumps({"step": step, "t": 0.0, "reqs": [["cmpl-run-0-0-aa", [], [7] * n, n]]})  # noqa: E731
    path.write_text(line(1, 1) + "\n")
    reader = TraceReader(path)
    late = threading.Timer(0.3, lambda: path.open("a").write(line(2, 1) + "\n"))  # the writer, a moment behind
    late.start()
    assert [r["step"] for r in read_until_traced([reader], [stream_result("run-0", [7, 7])])] == [1, 2]
    path.open("a").write(json.dumps({"dropped_steps": 1, "first_step": 3, "last_step": 3}) + "\n")
    start = time.monotonic()
    assert read_until_traced([reader], [stream_result("run-0", [7, 7, 7, 7])]) == []  # step 3 never comes
    assert time.monotonic() - start < 5 and reader.num_dropped_steps == 1
