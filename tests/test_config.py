import pytest

from specviz.config import ConfigError, SpecConfig
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
    assert set(BUILTIN_PROMPT_SETS) == {"chat", "summarize", "code", "repetitive"}
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
