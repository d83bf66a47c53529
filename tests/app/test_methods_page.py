"""AppTest: the Methods page walks the weather step, exports a config, keeps what was typed, shows the trials."""

import json

from page_helpers import html_of, open_page

METHODS = "app_pages/methods.py"


def test_methods_page_walks_the_weather_step_and_exports_a_config():
    from specviz.view.walkthrough import PHASES

    at = open_page(METHODS, timeout=240)  # the first run imports vLLM's config
    assert at.selectbox(key="methods_method").value == "ngram"
    assert at.slider(key="methods_k").value == 3
    assert at.text_input(key="methods_target").value == "Qwen/Qwen3-8B"
    assert at.text_input(key="methods_draft") is not None
    assert at.select_slider(key="methods_phase").value == PHASES[0]
    assert any("--speculative-config" in c.value for c in at.code)

    before = html_of(at)
    at.select_slider(key="methods_phase").set_value(PHASES[3]).run()
    assert not at.exception, at.exception
    after = html_of(at)
    assert after != before
    assert 'class="sv-chip sv-correction"' in after and 'class="sv-chip sv-correction"' not in before

    # choosing a method fills in the example pair from vLLM's docs; the export follows
    at.selectbox(key="methods_method").set_value("eagle3").run()
    assert not at.exception, at.exception
    assert at.text_input(key="methods_draft").value == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert any('"method": "eagle3"' in c.value and "vllm serve meta-llama/Llama-3.1-8B-Instruct" in c.value
               for c in at.code)
    # a method that needs a draft checkpoint, without one: SpecConfig's error, no command
    at.text_input(key="methods_draft").set_value("").run()
    assert any("needs 'model'" in e.value for e in at.error)
    assert not any("--speculative-config" in c.value for c in at.code)


def test_methods_page_shows_the_trials_that_ran_and_the_errors_of_those_that_did_not(tmp_path, monkeypatch):
    from specviz import method_trials

    path = tmp_path / "method_trials.json"
    path.write_text(json.dumps({
        "kind": "specviz.method_trials", "vllm_version": "0.32.0", "platform": "cpu", "device_name": "test cpu",
        "created_at": "2026-12-02T00:00:00+00:00", "trials": [
            {"method": "ngram", "target": "tiny", "draft": None, "ran": True, "error": None,
             "mean_acceptance_length": 2.1, "note": ""},
            {"method": "dspark", "target": "tiny", "draft": "tiny-dspark", "ran": False,
             "error": "ValueError: Model Runner V1 does not support: dspark speculative decoding\nmore",
             "mean_acceptance_length": None, "note": "server did not start"},
            {"method": "mlp_speculator", "target": "tiny", "draft": "tiny-mlp", "ran": False,
             "error": "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig | Value "
                      "error, Model architectures ['X'] are not supported for now. Supported architectures: "
                      "dict_keys(['A', 'B']) [type=value_error, input_value=ArgsKwargs((), {'model': 'm'}), "
                      "input_type=ArgsKwargs]",
             "mean_acceptance_length": None, "note": "server did not start"}]}))
    monkeypatch.setattr(method_trials, "DEFAULT_TRIALS_PATH", path)
    at = open_page(METHODS, timeout=240)  # the first run imports vLLM's config
    [trials] = [d.value for d in at.dataframe if "outcome" in d.value.columns]
    assert trials["method"].tolist() == ["ngram", "dspark", "mlp_speculator"]  # one row per method
    assert trials["outcome"].tolist() == ["ran", "failed", "failed"]
    assert trials["why it failed"].tolist()[1] == "ValueError: Model Runner V1 does not support: dspark speculative decoding"
    # a pydantic error reads as one line: its message and who refused it, no ArgsKwargs(...) dump
    assert trials["why it failed"].tolist()[2] == ("Model architectures ['X'] are not supported for now. "
                                                   "(SpeculativeConfig refused it)")
    assert trials["platform"].tolist() == ["cpu (test cpu), vLLM 0.32.0"] * 3
    assert any("on CPU (test cpu)" in c.value and "Llama-architecture targets (tiny" in c.value for c in at.caption)
    [errors] = [e for e in at.expander if e.label.startswith("The full error messages")]  # not one per failure
    assert errors.label == "The full error messages (2 distinct)"
    assert [c.value for c in at.code if "ValueError: Model Runner V1" in c.value] == [
        "ValueError: Model Runner V1 does not support: dspark speculative decoding\nmore"]


def test_methods_config_builder_keeps_what_the_user_typed_and_refuses_a_conflict():
    at = open_page(METHODS, timeout=240)  # the first run imports vLLM's config
    at.text_input(key="methods_target").set_value("my-org/MyTarget-70B").run()
    at.slider(key="methods_k").set_value(5).run()
    at.selectbox(key="methods_method").set_value("eagle3").run()
    assert not at.exception, at.exception
    assert at.text_input(key="methods_target").value == "my-org/MyTarget-70B"  # typed: kept
    assert at.slider(key="methods_k").value == 5  # kept
    assert any("vllm serve my-org/MyTarget-70B" in c.value and '"num_speculative_tokens": 5' in c.value
               for c in at.code)
    at.text_input(key="methods_extra").set_value('{"num_speculative_tokens": 7}').run()
    assert any("num_speculative_tokens is 7 there but 5 above" in e.value for e in at.error)
    assert not any("--speculative-config" in c.value for c in at.code)  # refused, not silently 7
    at.text_input(key="methods_extra").set_value('{"num_speculative_tokens": 5, "draft_tensor_parallel_size": 1}').run()
    assert not at.error and any('"draft_tensor_parallel_size": 1' in c.value for c in at.code)


def test_methods_page_shows_the_three_drafting_families_as_cards():
    at = open_page(METHODS, timeout=240)
    assert not at.exception, at.exception
    text = " ".join(m.value for m in at.markdown)
    for title in ("Native MTP", "Separate MTP drafter (Gemma 4)", "Target-conditioned draft networks"):
        assert f"**{title}" in text
    assert text.count("**Layers vs num_speculative_tokens:**") == 3
    assert "runs the last layer again on its own output" in text
    assert "the target's KV cache" in text and "eagle3-k3-chat-c1.json.gz" in text


def test_the_family_cards_say_what_ran_here_from_the_trials(tmp_path):
    from specviz import catalog, methods_view
    from specviz.method_trials import load_trials

    trial = {"draft": None, "error": None, "note": "", "ran": True}
    path = tmp_path / "method_trials.json"
    path.write_text(json.dumps({
        "kind": "specviz.method_trials", "vllm_version": "0.32.0", "platform": "cpu", "device_name": "test",
        "created_at": "2026-12-07T00:00:00+00:00", "trials": [
            trial | {"method": "mtp", "target": "tiny-mimo-2L", "mean_acceptance_length": 4.0},
            trial | {"method": "mtp", "target": "tiny-gemma4-2L", "mean_acceptance_length": 1.0},
            trial | {"method": "eagle3", "target": "tiny-llama-2L", "mean_acceptance_length": 3.4}]}))
    trials = load_trials(path)
    cards = {c["title"]: c for c in methods_view.drafting_family_cards(catalog.catalog(trials), trials)}
    assert cards["Native MTP"]["ran_here"] == "mtp: 4.00 (tiny-mimo-2L)"
    assert cards["Separate MTP drafter (Gemma 4)"]["ran_here"] == "gemma4_mtp: 1.00 (tiny-gemma4-2L)"
    assert cards["Target-conditioned draft networks (EAGLE-3, DFlash, DSpark)"]["ran_here"] == "eagle3: 3.40 (tiny-llama-2L)"
