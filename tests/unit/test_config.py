import json

import pytest

from specviz.config import BatchSizeRange, ConfigError, SpecConfig, check_server_args
from specviz.prompts import BUILTIN_PROMPT_SETS, PromptSetError, load_prompts


def test_parse_and_export_round_trip():
    spec = SpecConfig.parse('{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}')
    assert spec.method == "ngram" and spec.num_speculative_tokens == 3
    assert spec.to_vllm() == {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    assert SpecConfig.parse("none") is None


@pytest.mark.parametrize("text,field", [
    ('{"method": "nope", "num_speculative_tokens": 3}', "unknown method 'nope'"),
    ('{"num_speculative_tokens": 3}', "'method' is missing"),
    ('{"method": "ngram", "num_speculative_tokens": 0}', "'num_speculative_tokens' must be an integer >= 1"),
    ('{"method": "ngram"}', "'num_speculative_tokens'"),
    ('{"method": "ngram", "num_speculative_tokens": true}', "'num_speculative_tokens'"),
    ('{"method": "draft_model", "num_speculative_tokens": 3}', "needs 'model'"),
    ('{"method": "eagle3", "num_speculative_tokens": 3}', "needs 'model'"),
    ('{"method": "ngram", "num_speculative_tokens": 3, "bogus": 1}', "unknown field(s) 'bogus'"),
    ('{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, "prompt_lookup_max": 2}',
     "'prompt_lookup_min' (5) > 'prompt_lookup_max' (2)"),
    ('{"method": "ngram", num_speculative_tokens: 3}', "not valid JSON"),
    ('[1, 2]', "must be a JSON object"),
])
def test_bad_configs_are_refused_naming_the_field(text, field):
    with pytest.raises(ConfigError) as e:
        SpecConfig.parse(text)
    assert field in str(e.value)


def test_draft_model_must_exist_locally(tmp_path):
    spec = SpecConfig.parse(f'{{"method": "draft_model", "num_speculative_tokens": 2, "model": "{tmp_path}/missing"}}')
    with pytest.raises(ConfigError, match="not a folder"):
        spec.check_local_paths()


def test_builtin_prompt_sets_and_files(tmp_path):
    assert set(BUILTIN_PROMPT_SETS) == {"chat", "summarize", "code", "repetitive", "showcase-edit", "showcase-chat"}
    name, prompts = load_prompts("builtin:code")
    assert name == "code" and all("def total_price" in p for p in prompts)
    (tmp_path / "mine.txt").write_text("first\n\nsecond\n")
    assert load_prompts(str(tmp_path / "mine.txt")) == ("mine", ["first", "second"])
    (tmp_path / "mine.json").write_text('["a", "b"]')
    assert load_prompts(str(tmp_path / "mine.json")) == ("mine", ["a", "b"])
    (tmp_path / "bad.json").write_text('{"a": 1}')
    for spec, reason in [("builtin:nope", "unknown built-in"), (str(tmp_path / "x.txt"), "does not exist"),
                         (str(tmp_path / "bad.json"), "list of strings")]:
        with pytest.raises(PromptSetError, match=reason):
            load_prompts(spec)


@pytest.mark.parametrize("text,field", [
    ('{"method": "suffix", "num_speculative_tokens": 8, "suffix_decoding_min_token_prob": 1.5}',
     "'suffix_decoding_min_token_prob' must be a number >= 0 and <= 1, got 1.5"),
    ('{"method": "eagle", "num_speculative_tokens": 2, "model": "m", "draft_tensor_parallel_size": 0}',
     "'draft_tensor_parallel_size' must be an integer >= 1, got 0"),
    ('{"method": "draft_model", "num_speculative_tokens": 2, "model": "m", "draft_sample_method": "best"}',
     "'draft_sample_method' must be one of greedy, probabilistic, got 'best'"),
    ('{"method": "draft_model", "num_speculative_tokens": 2, "model": "m", "parallel_drafting": "yes"}',
     "'parallel_drafting' must be true or false, got 'yes'"),
    ('{"method": "ngram_gpu", "num_speculative_tokens": 3, "prompt_lookup_min": 0}',
     "'prompt_lookup_min' must be an integer >= 1, got 0"),
    ('{"method": "gemma4_mtp", "num_speculative_tokens": 1}', "needs 'model' (the Gemma 4 assistant checkpoint)"),
])
def test_method_parameters_are_checked_from_the_catalog(text, field):
    with pytest.raises(ConfigError) as e:
        SpecConfig.parse(text)
    assert field in str(e.value)


def test_models_that_ship_inside_the_target_need_no_model():
    # vLLM loads MTP layers (and DeepSeek-V4's DSpark stages) from the target checkpoint when 'model' is unset.
    assert SpecConfig.parse('{"method": "mtp", "num_speculative_tokens": 1}').model is None
    assert SpecConfig.parse('{"method": "dspark", "num_speculative_tokens": 5}').model is None


def test_to_python_is_a_python_literal_of_the_vllm_dict():
    spec = SpecConfig.parse('{"method": "draft_model", "num_speculative_tokens": 12, "model": "amd/PARD-Qwen3-0.6B", '
                            '"parallel_drafting": true, "max_model_len": null}')
    assert spec.to_python() == (
        'speculative_config={\n'
        '    "method": "draft_model",\n'
        '    "num_speculative_tokens": 12,\n'
        '    "model": "amd/PARD-Qwen3-0.6B",\n'
        '    "parallel_drafting": True,\n'
        '    "max_model_len": None,\n'
        '}')


def test_serve_command_text_example():
    from specviz.serve_command import serve_command_text

    spec = SpecConfig.parse('{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}')
    assert serve_command_text("Qwen/Qwen3-8B", spec) == (
        "vllm serve Qwen/Qwen3-8B \\\n"
        "    --speculative-config "
        "'{\"method\": \"ngram\", \"num_speculative_tokens\": 3, \"prompt_lookup_max\": 4}' \\\n"
        "    --scheduler-cls specviz.serving.tracer.TracingScheduler \\\n"
        "    --no-async-scheduling")


def test_a_custom_class_is_not_a_local_folder():
    spec = SpecConfig.parse('{"method": "custom_class", "num_speculative_tokens": 2, "model": "my_module.MyProposer"}')
    spec.check_local_paths()  # a Python class path, not a checkpoint folder: nothing to check


SYNTHETIC = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3,
             "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.0}


def test_synthetic_acceptance_is_refused_on_cpu_with_the_engines_error_and_what_to_change():
    spec = SpecConfig.from_dict(SYNTHETIC)
    with pytest.raises(ConfigError) as e:
        spec.check_local_engine("cpu")
    message = str(e.value)
    assert "'rejection_sample_method' = 'synthetic' is known to fail on cpu" in message
    assert '"AssertionError: Synthetic acceptance not supported with CPU sampling"' in message
    assert "vllm/utils/cpu_triton_utils.py" in message and "Change: leave 'rejection_sample_method' out" in message
    spec.check_local_engine("cuda")  # a GPU samples synthetic acceptance in Triton
    spec.check_local_engine("rocm")
    SpecConfig.from_dict(SYNTHETIC | {"rejection_sample_method": "standard",
                                      "synthetic_acceptance_length": None}).check_local_engine("cpu")


def test_the_platform_is_detected_only_for_a_setting_known_to_fail_somewhere(monkeypatch):
    import specviz.serving.server as server

    asked = []
    monkeypatch.setattr(server, "local_device", lambda: asked.append(1) or ("cpu", "test CPU"))
    SpecConfig.from_dict({"method": "ngram", "num_speculative_tokens": 3}).check_local_engine()
    assert asked == []  # nothing known to fail: vLLM is not imported to ask
    with pytest.raises(ConfigError, match="known to fail on cpu"):
        SpecConfig.from_dict(SYNTHETIC).check_local_engine()
    assert asked == [1]


# ---- the per-batch-size schedule (vLLM's num_speculative_tokens_per_batch_size) -------------------

def _scheduled(schedule, k=4):
    return SpecConfig.from_dict({"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4,
                                 "num_speculative_tokens_per_batch_size": schedule})


def test_schedule_is_typed_sorted_and_round_trips_to_vllm():
    spec = _scheduled([[2, 64, 1], [1, 1, 4]])
    assert [(e.first, e.last, e.k) for e in spec.schedule] == [(1, 1, 4), (2, 64, 1)]
    assert spec.to_vllm()["num_speculative_tokens_per_batch_size"] == [[1, 1, 4], [2, 64, 1]]
    assert "num_speculative_tokens_per_batch_size" not in spec.params
    assert SpecConfig.from_dict(spec.to_vllm()) == spec
    assert spec.describe() == "ngram k by batch size (1: k=4 · 2-64: k=1)"
    assert "num_speculative_tokens_per_batch_size" in spec.to_python()


def test_k_at_follows_vllms_lookup_gaps_and_tail_carry_the_previous_k():
    spec = _scheduled([[1, 1, 4], [2, 8, 2], [16, 64, 0]])
    assert [spec.k_at(b) for b in (1, 2, 8, 12, 16, 64, 100)] == [4, 2, 2, 2, 0, 0, 0]
    assert SpecConfig.parse('{"method": "ngram", "num_speculative_tokens": 3}').k_at(50) == 3


@pytest.mark.parametrize("schedule, words", [
    ([], "non-empty list"),
    ("1-4:2", "non-empty list"),
    ([[1, 4]], "three integers"),
    ([[1, 4, 1.5]], "three integers"),
    ([[0, 4, 1]], ">= 1"),
    ([[1, 4, 1], [4, 8, 2]], "overlap"),
    ([[2, 8, 1]], "must start at batch size 1"),
    ([[1, 8, -1]], "k must be >= 0"),
    ([[1, 8, 5]], "silently cap"),
    ([[8, 1, 2]], "above last"),
])
def test_schedule_refused_as_vllm_would_refuse_it(schedule, words):
    with pytest.raises(ConfigError, match=words):
        _scheduled(schedule)


def test_with_schedule_and_with_k():
    spec = SpecConfig.parse('{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}')
    two = spec.with_schedule([BatchSizeRange(first=1, last=2, k=3), BatchSizeRange(first=3, last=3, k=0)])
    assert two.num_speculative_tokens == 3 and two.k_at(8) == 0 and two.params == {"prompt_lookup_max": 4}
    assert spec.with_schedule([BatchSizeRange(first=1, last=4, k=2)]) == spec.with_k(2)
    assert spec.with_schedule([BatchSizeRange(first=1, last=4, k=0)]) is None
    assert two.with_k(2).schedule is None and two.with_k(0) is None


def test_schedule_refused_with_data_parallelism():
    spec = _scheduled([[1, 1, 4], [2, 64, 1]])
    check_server_args(spec, ["--tensor-parallel-size", "2"])
    check_server_args(spec, ["--data-parallel-size", "1"])
    for args in (["--data-parallel-size", "2"], ["--data-parallel-size=4"], ["-dp", "2"]):
        with pytest.raises(ConfigError, match="data parallelism"):
            check_server_args(spec, args)
    check_server_args(spec.with_k(2), ["--data-parallel-size", "2"])


# ---- GPU-only drafters: refused on CPU before an engine starts ------------------------------------


def test_dspark_is_refused_on_cpu_with_both_of_vllms_reasons():
    spec = SpecConfig.from_dict({"method": "dspark", "num_speculative_tokens": 7})
    with pytest.raises(ConfigError) as e:
        spec.check_local_engine("cpu")
    message = str(e.value)
    assert "'method' = 'dspark' is known to fail on cpu" in message
    assert "Model Runner V1 does not support: dspark speculative decoding" in message
    assert "Model Runner V2 requires Triton." in message and "GPU only" in message
    assert "before the engine starts" in message and "Change: use 'dflash'" in message
    spec.check_local_engine("cuda")
    spec.check_local_engine("rocm")


def test_a_gemma4_assistant_with_ordered_embeddings_is_refused_on_cpu_from_its_config_json(tmp_path):
    assistant = tmp_path / "assistant"
    assistant.mkdir()
    config = {"architectures": ["Gemma4AssistantForCausalLM"], "model_type": "gemma4_assistant",
              "backbone_hidden_size": 64, "use_ordered_embeddings": True}
    (assistant / "config.json").write_text(json.dumps(config))
    spec = SpecConfig.from_dict({"method": "mtp", "model": str(assistant), "num_speculative_tokens": 1})
    with pytest.raises(ConfigError) as e:
        spec.check_local_engine("cpu")
    message = str(e.value)
    assert "the draft's config.json: 'use_ordered_embeddings' = True is known to fail on cpu" in message
    assert '"RuntimeError: Tried to instantiate dummy base class CUDAGraph"' in message
    assert "vllm/v1/spec_decode/gemma4.py" in message and "GPU only" in message
    spec.check_local_engine("cuda")
    (assistant / "config.json").write_text(json.dumps(config | {"use_ordered_embeddings": False}))
    spec.check_local_engine("cpu")  # the tiny assistants specviz builds run on CPU


def test_the_record_command_refuses_dspark_before_any_engine_starts(monkeypatch, capsys):
    import specviz.serving.local as local
    import specviz.serving.server as server
    from specviz.__main__ import main

    monkeypatch.setattr(server, "local_device", lambda: ("cpu", "test CPU"))
    monkeypatch.setattr(local.LocalServer, "start", lambda *a, **k: pytest.fail("an engine was started"))
    code = main(["record", "--model", "/nonexistent", "--spec", '{"method": "dspark", "num_speculative_tokens": 7}',
                 "--prompts", "builtin:chat", "--out", "/tmp/never.json.gz"])
    assert code != 0
    assert "Model Runner V1 does not support: dspark speculative decoding" in capsys.readouterr().err
