"""The MiMo form of a Llama (specviz.mimo): the config vLLM's native MTP needs, and what the layers compute."""

import json

import pytest

from specviz.mimo import MimoFormError, mimo_config, tokenizer_for, write_tokenizer_override

SMOLLM2 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576, "num_attention_heads": 9,
           "num_key_value_heads": 3, "head_dim": 64, "num_hidden_layers": 30, "intermediate_size": 1536,
           "vocab_size": 49152, "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": True,
           "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}, "pretraining_tp": 1}


def test_the_mimo_config_is_the_one_vllm_turns_into_mimo_mtp():
    c = mimo_config(SMOLLM2)
    assert c["architectures"] == ["MiMoForCausalLM"] and c["model_type"] == "qwen2"
    assert c["rope_theta"] == 100000.0 and c["rope_parameters"] == {"rope_theta": 100000.0, "rope_type": "default"}
    assert c["tie_word_embeddings"] is True and c["max_window_layers"] == 30
    assert c["num_nextn_predict_layers"] == 1 and c["use_sliding_window"] is False
    assert not {"attention_bias", "mlp_bias", "head_dim", "pretraining_tp"} & set(c)


def test_a_llama_whose_head_size_is_not_hidden_over_heads_has_no_mimo_form():
    with pytest.raises(MimoFormError, match="head_dim 128 is not hidden_size / num_attention_heads"):
        mimo_config(SMOLLM2 | {"head_dim": 128})


def test_the_tiny_mtp_layer_passes_the_next_tokens_embedding_to_the_shared_head():
    import torch

    from specviz.mimo import MTP_PREFIX, token_passing_mtp_layer

    config = SMOLLM2 | {"hidden_size": 128, "num_attention_heads": 2, "num_key_value_heads": 1,
                        "intermediate_size": 256}
    w = {k.removeprefix(MTP_PREFIX): v for k, v in token_passing_mtp_layer(config).items()}
    hidden, embedding = torch.randn(128), torch.randn(128)
    x = w["input_proj.weight"] @ torch.cat([hidden, embedding])  # vLLM: cat[hidden state, embedding]
    assert torch.equal(x, embedding)
    assert not w["self_attn.o_proj.weight"].any() and not w["mlp.down_proj.weight"].any()  # the block adds nothing


def test_a_mimo_form_is_served_with_its_own_llama_tokenizer(tmp_path):
    source = tmp_path / "llama"
    source.mkdir()
    (source / "tokenizer.json").write_text("{}")
    model = tmp_path / "mimo"
    assert tokenizer_for(model) == str(model)
    write_tokenizer_override(source, model)
    assert tokenizer_for(model) == str(model / "specviz-tokenizer")
    assert json.loads((model / "specviz-tokenizer" / "config.json").read_text()) == {"model_type": "llama"}


def test_the_playground_serves_native_mtp_on_the_demo_models_mimo_form(monkeypatch, tmp_path):
    from specviz.demo_model import demo_mimo_model_dir
    from specviz.playground import target_for_method

    monkeypatch.setenv("SPECVIZ_DEMO_MODEL_DIR", str(tmp_path / "SmolLM2-135M-Instruct"))
    demo = str(tmp_path / "SmolLM2-135M-Instruct")
    assert target_for_method("mtp", demo) == str(demo_mimo_model_dir()) == demo + "-MiMo"
    assert target_for_method("ngram", demo) == demo
    assert target_for_method("mtp", "/models/other") == "/models/other"


def test_the_mimo_form_of_a_llama_computes_the_llamas_logits(tmp_path):
    """The layout alone, in transformers (the MiMo form loads as its Qwen2 decoder; the MTP layer is unused
    here): equal logits mean equal greedy output. vLLM serving both forms of the demo model is the live check
    of native MTP (tests/live/test_live_mtp.py), against the MiMo form itself."""
    import torch
    from transformers import AutoModelForCausalLM

    from specviz.demo_model import _write_mimo_form, ensure_demo_model
    from specviz.testing.tiny_models import build_tiny_llama

    llama = build_tiny_llama(tmp_path / "llama", num_hidden_layers=2, tokenizer_from=ensure_demo_model())
    mimo = tmp_path / "mimo"
    mimo.mkdir()
    _write_mimo_form(llama, mimo)
    tokens = torch.randint(0, 49152, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = [AutoModelForCausalLM.from_pretrained(str(d), dtype=torch.float32)(tokens).logits
                  for d in (llama, mimo)]
    assert logits[0].shape == logits[1].shape == (2, 24, 49152)
    torch.testing.assert_close(logits[1], logits[0], rtol=1e-5, atol=1e-5)
