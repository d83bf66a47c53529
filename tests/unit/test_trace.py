import gzip
import json

import pytest
from pydantic import ValidationError
from run_builders import SCHEDULE, make_run, make_scheduled_run, make_step

from specviz.config import SpecConfig
from specviz.runfile import (
    SAMPLE_RUNS_DIR,
    Request,
    RunFileError,
    Step,
    draft_batches,
    list_run_files,
    load_run,
    most_drafts_from,
    run_json_schema,
    save_run,
)


def test_step_roles_of_the_worked_example(weather_run):
    step = weather_run.requests[0].steps[1]
    assert step.num_accepted == 2
    assert step.draft_token_ids[: step.num_accepted] == [1, 2]  # accepted prefix
    assert step.sampled_token_ids[step.num_accepted] == 5  # correction in place of draft 3
    assert step.draft_token_ids[step.num_accepted + 1:] == [4]  # discarded tail
    assert not step.all_accepted
    assert weather_run.requests[0].steps[2].all_accepted


@pytest.mark.parametrize("drafts,sampled,num_accepted,match", [
    ([1, 2], [1, 2, 3, 4], 3, "num_accepted=3 > number of drafts 2"),
    ([1, 2, 3], [1, 9, 9], 2, "accepted prefix"),
    ([1, 2, 3], [1, 2], 2, "plus one token"),
    ([-1, -1], [5], 0, "placeholder"),
])
def test_step_invariants_refuse_inconsistent_steps(drafts, sampled, num_accepted, match):
    with pytest.raises(ValidationError, match=match):
        Step(engine_step=0, time_s=0.0, draft_token_ids=drafts, sampled_token_ids=sampled,
            committed_token_ids=sampled, num_accepted=num_accepted)


def test_committed_must_be_a_prefix_of_sampled():
    with pytest.raises(ValidationError, match="prefix"):
        make_step(0, [1, 2], [1, 2, 3], committed=[1, 3])


def test_request_output_must_equal_committed_tokens():
    with pytest.raises(ValidationError, match="differ from its 3 output tokens"):
        Request(request_id="r", prompt="p", output_token_ids=[6, 1, 2], output_text="", start_time_s=0,
                finish_reason="length", steps=[make_step(0, [], [6]), make_step(1, [1, 2], [1, 3])])


def test_request_stopped_inside_a_step_commits_a_prefix():
    # max_tokens hit after the first accepted draft: vLLM counts 2 accepted, the output keeps 1 + 1.
    step = make_step(1, [1, 2, 3], [1, 2, 5], committed=[1])
    req = Request(request_id="r", prompt="p", output_token_ids=[6, 1], output_text="", start_time_s=0,
                  finish_reason="length", steps=[make_step(0, [], [6]), step])
    assert req.steps[1].num_accepted == 2


def test_run_refuses_more_drafts_than_k_and_drafts_in_a_baseline(weather_run):
    with pytest.raises(ValidationError, match="more than num_speculative_tokens=2"):
        make_run(list(weather_run.requests), k=2)
    with pytest.raises(ValidationError, match="baseline"):
        make_run(list(weather_run.requests), k=None)


def test_models_are_frozen_and_forbid_extra_fields(weather_run):
    with pytest.raises(ValidationError):
        weather_run.meta.concurrency = 3
    doc = json.loads(weather_run.model_dump_json())
    doc["meta"]["surprise"] = 1
    with pytest.raises(ValidationError, match="surprise"):
        type(weather_run).model_validate(doc)


@pytest.mark.parametrize("name", ["run.json", "run.json.gz"])
def test_save_and_load_round_trip(tmp_path, weather_run, name):
    path = save_run(weather_run, tmp_path / name)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
    assert load_run(path) == weather_run
    assert load_run(path.read_bytes()) == weather_run
    assert not list(tmp_path.glob("*.part"))


def test_truncated_corrupt_and_foreign_files_are_refused_with_the_reason(tmp_path, weather_run):
    good = save_run(weather_run, tmp_path / "run.json").read_bytes()
    gz = gzip.compress(good)
    cases = {
        "truncated.json": (good[: len(good) // 2], "not JSON, or truncated"),
        "truncated.json.gz": (gz[: len(gz) // 2], "corrupt or truncated gzip"),
        "foreign.json": (b'{"hello": "world"}', "not a specviz run file"),
        "list.json": (b"[1, 2]", "not a specviz run file"),
        "binary.bin": (bytes(range(256)), "not JSON"),
        "future.json": (good.replace(b'"schema_version":4', b'"schema_version":99'), "schema_version 99"),
        "invalid.json": (good.replace(b'"num_accepted":2', b'"num_accepted":7'), "invalid run file at requests.0.steps.1"),
    }
    for name, (data, reason) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(RunFileError, match=reason):
            load_run(tmp_path / name)
    with pytest.raises(RunFileError, match="cannot read"):
        load_run(tmp_path / "missing.json")


def test_json_schema_describes_the_run_file(weather_run):
    schema = run_json_schema()
    assert schema["properties"]["schema_version"]["const"] == 4
    assert set(schema["$defs"]) >= {"RunMeta", "Request", "Step", "SpecDecodeCounters", "SpecConfig", "BatchSizeRange"}
    assert {"speculative_config", "method", "num_speculative_tokens"}.isdisjoint(schema["$defs"]["RunMeta"]["properties"])
    assert schema["$defs"]["Step"]["additionalProperties"] is False


def test_list_run_files_leaves_out_other_json(tmp_path, weather_run):
    save_run(weather_run, tmp_path / "a.json.gz")
    save_run(weather_run, tmp_path / "b.json")
    (tmp_path / "run.schema.json").write_text('{"title": "Run"}')
    (tmp_path / "method_trials.json").write_text('{"kind": "specviz.method_trials"}')
    save_run(weather_run, tmp_path / "drafters" / "c.json.gz")
    save_run(weather_run, tmp_path / "sweeps" / "s" / "runs" / "cell.json.gz")  # a sweep's, not listed
    assert [str(p.relative_to(tmp_path)) for p in list_run_files(tmp_path)] == [
        "a.json.gz", "b.json", "drafters/c.json.gz"]


# ---- schema 4: the drafting is one typed spec -----------------------------------------------------

def _raw(path):
    """The file's JSON as written, before any reading of specviz's."""
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


@pytest.mark.parametrize("name", ["ngram-k3-edit-c1.json.gz", "baseline-edit-c1.json.gz"])
def test_a_schema_3_file_reads_with_its_method_k_and_config_and_is_written_as_schema_4(tmp_path, name):
    path = SAMPLE_RUNS_DIR / "showcase-bf16-xeon" / name  # recorded in schema 3
    old = _raw(path)
    assert old["schema_version"] == 3
    meta = load_run(path).meta
    assert meta.speculative_config == old["meta"]["speculative_config"]
    assert meta.method == old["meta"]["method"]
    assert meta.num_speculative_tokens == (old["meta"]["num_speculative_tokens"] or 0)  # the baseline: 0, not None
    saved = _raw(save_run(load_run(path), tmp_path / name))
    assert saved["schema_version"] == 4 and "speculative_config" not in saved["meta"]
    assert saved["meta"]["spec"] == (None if meta.spec is None else {
        "method": "ngram", "num_speculative_tokens": 3, "model": None,
        "params": {"prompt_lookup_min": 2, "prompt_lookup_max": 4}, "schedule": None})
    assert load_run(tmp_path / name) == load_run(path)


def test_an_old_file_of_a_server_that_did_not_say_its_method_keeps_it_unsaid(weather_run):
    doc = json.loads(weather_run.model_dump_json()) | {"schema_version": 3}
    doc["meta"].pop("spec")
    doc["meta"] |= {"speculative_config": {"num_speculative_tokens": 4}, "method": None, "num_speculative_tokens": 4}
    meta = load_run(json.dumps(doc).encode()).meta
    assert (meta.method, meta.num_speculative_tokens, meta.speculative_config) == (None, 4, {"num_speculative_tokens": 4})




def test_a_scheduled_run_validates_with_k_following_the_batch_and_round_trips(tmp_path):
    run = make_scheduled_run()
    assert [s.num_drafts for s in run.requests[0].steps] == [0, 4, 4, 1, 1, 4]
    assert draft_batches(run.requests) == {"r0": [None, 1, 1, 2, 2, 1], "r1": [None, 2]}
    assert run.meta.scheduled and run.meta.num_speculative_tokens == 4
    assert run.meta.speculative_config["num_speculative_tokens_per_batch_size"] == [[1, 1, 4], [2, 64, 1]]
    path = save_run(run, tmp_path / "scheduled.json")
    assert _raw(path)["meta"]["spec"]["schedule"] == [{"first": 1, "last": 1, "k": 4},
                                                           {"first": 2, "last": 64, "k": 1}]
    assert load_run(path) == run


def test_a_groups_servers_number_their_own_engine_steps_and_are_not_counted_as_one_batch():
    run = make_scheduled_run()
    elsewhere = run.requests[1].model_copy(update={"steps": [s.model_copy(update={"time_s": s.time_s + 0.5})
                                                             for s in run.requests[1].steps]})
    assert draft_batches([run.requests[0], elsewhere]) == {"r0": [None, 1, 1, 1, 1, 1], "r1": [None, 1]}


def test_a_step_drafting_more_than_the_schedule_allows_at_its_batch_is_refused():
    with pytest.raises(ValidationError, match=r"request r1 step 4 verified 4 drafts, proposed in engine step 3 with 2 "
                                              r"of the run's requests in the batch, where the schedule \(ngram k by "
                                              r"batch size \(1: k=4 · 2-64: k=1\)\) drafts at most 1"):
        make_scheduled_run(r1_drafts_at_step_4=4)


def test_most_drafts_from_a_batch_takes_the_largest_k_at_that_batch_or_above():
    assert [most_drafts_from(SCHEDULE, b) for b in (1, 2, 3, 100)] == [4, 1, 1, 1]
    rising = SpecConfig.from_recorded({"method": "ngram", "num_speculative_tokens": 4,
                                       "num_speculative_tokens_per_batch_size": [[1, 1, 1], [2, 8, 4], [9, 64, 0]]})
    assert [most_drafts_from(rising, b) for b in (1, 2, 9)] == [4, 4, 0]  # batch 1 seen may be 2 in vLLM
    assert most_drafts_from(SCHEDULE.with_k(3), 7) == 3  # no schedule: k


def test_untraced_tokens_need_dropped_steps_in_a_complete_run_and_old_files_read_without_them(tmp_path, weather_run):
    from run_builders import make_run

    req = Request(request_id="r", prompt="p", output_token_ids=[6, 1, 2], output_text="", start_time_s=0,
                  finish_reason="length", steps=[make_step(0, [], [6])], num_untraced_tokens=2)
    assert make_run([req], trace_dropped_steps=1).meta.trace_dropped_steps == 1
    assert make_run([req], complete=False, incomplete_reason="the server died").requests[0].num_untraced_tokens == 2
    with pytest.raises(ValidationError, match="2 untraced tokens in a complete run whose tracer dropped no step"):
        make_run([req])
    with pytest.raises(ValidationError, match="the steps commit 1 tokens and 1 are untraced, not its 3 output"):
        Request.model_validate(req.model_dump() | {"num_untraced_tokens": 1})
    doc = json.loads(weather_run.model_dump_json())
    doc["meta"].pop("trace_dropped_steps")
    for r in doc["requests"]:
        r.pop("num_untraced_tokens")
    (tmp_path / "old.json").write_text(json.dumps(doc))
    assert load_run(tmp_path / "old.json") == weather_run
