"""A small draft model for SmolLM2-135M-Instruct, distilled from the target.

Recipe (the defaults):
- architecture: the target cut down to two decoder layers (its width: hidden 576, 9 heads of 64,
  3 KV heads, MLP 1536), tied embeddings, and its own 7168-token vocabulary: the tokens the target
  uses most, as strings of SmolLM2's tokenizer, plus an `<|unk|>` for the rest. vLLM's
  `draft_model` runs it with `use_heterogeneous_vocab: true`, mapping token ids between the two
  vocabularies by their strings (`vllm/v1/spec_decode/vocab_mapping.py`) and keeping drafts inside
  the shared ones. SmolLM2's own 49152 x 576 embedding alone would be 57 MB in bf16; 7168 x 576 is 8 MB.
- initialisation (`from_target_layers=(0, 1)`): the target's layers 0 and 1, its final norm and its
  embedding rows of the kept tokens. Cut down so far it predicts almost nothing (top-1 3%), but it
  learns far faster than random layers. Without `from_target_layers` the layers start random at
  `hidden` x `layers` and the embedding is the target's projected on its top principal directions.
- data: the target pass (specviz.train.targets): at every position of prompt + the target's own
  greedy answer, the target's greedy choice and its 8 most likely tokens. The loss mixes
  cross-entropy against the greedy choice and against that top-8 distribution (`distill_loss`);
  answer positions weigh 1, prompt positions PROMPT_WEIGHT.
- figures: validation loss, top-1 agreement with the target on held-out answers, and the mean
  acceptance length greedy speculative decoding would reach at k = 1..5, simulated exactly on the
  held-out answers (for a causal draft model, the drafts after accepted ones are its
  teacher-forced predictions, so the simulation needs no generation).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from ..config import short_model_name
from .common import (
    StepSchedule,
    length_batches,
    print_figures,
    seed_everything,
    simulate_chains,
    simulated_figures,
    train_loop,
    write_card,
    write_json,
)
from .targets import distill_loss, load_pass, partition

PROMPT_WEIGHT = 0.5  # prompt positions teach language (and the prompt's words) but are never drafted


UNK = "<|unk|>"


def draft_config(target_config: dict, hidden: int, layers: int, vocab_size: int, special: dict[str, int]) -> dict:
    heads = max(1, hidden // 64)
    keep = ("max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_theta", "hidden_act")
    cfg = {k: target_config[k] for k in keep if target_config.get(k) is not None}
    cfg |= {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
            "intermediate_size": 8 * hidden // 3 // 64 * 64, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": heads, "head_dim": 64, "tie_word_embeddings": True, "attention_bias": False,
            "mlp_bias": False, "initializer_range": 0.02, "use_cache": True, "vocab_size": vocab_size} | special
    return cfg


def target_shaped_config(target_config: dict, layers: int, vocab_size: int, special: dict[str, int]) -> dict:
    """`draft_config` with the target's own layer shapes, so that target layers can be copied in."""
    shapes = ("intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim")
    return draft_config(target_config, target_config["hidden_size"], layers, vocab_size, special) | {
        k: target_config[k] for k in shapes}


def choose_vocab(seqs: list[dict], size: int, target_vocab: int, always: list[int]):
    """The `size - 1` target tokens seen most in the training sequences (answers count 4x: they are
    what gets drafted), plus `always`; sorted target ids, and the map target id -> draft id (the
    rest -> the last id, `<|unk|>`)."""
    import torch

    counts = torch.zeros(target_vocab, dtype=torch.long)
    for s in seqs:
        ids = torch.tensor(s["ids"])
        counts += torch.bincount(ids, minlength=target_vocab)
        counts += 3 * torch.bincount(ids[s["plen"]:], minlength=target_vocab)
    counts[always] = counts.max() + 1
    keep = torch.sort(torch.topk(counts, size - 1).indices).values
    to_draft = torch.full((target_vocab,), size - 1, dtype=torch.long)
    to_draft[keep] = torch.arange(size - 1)
    return keep, to_draft


def save_tokenizer(target: Path, keep, out: Path) -> None:
    """A tokenizer whose vocabulary is the kept SmolLM2 token strings plus `<|unk|>`, in draft-id order.

    vLLM only reads its vocabulary (to map ids by string) and its unk token; text is always
    tokenized by the target's tokenizer. A WordLevel model over SmolLM2's byte-level pre-tokenizer
    turns those strings back into ids, so `encode(" a")` gives the draft id of "Ġa" as vLLM expects.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    target_tok = AutoTokenizer.from_pretrained(str(target))
    strings = target_tok.convert_ids_to_tokens([int(t) for t in keep]) + [UNK]
    vocab = {tok: i for i, tok in enumerate(strings)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.decoder = decoders.ByteLevel()
    special = [t for t in target_tok.all_special_tokens if t in vocab] + [UNK]
    tk.add_special_tokens(special)
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token=UNK, bos_token=target_tok.bos_token,
                                   eos_token=target_tok.eos_token, pad_token=target_tok.pad_token)
    if getattr(target_tok, "chat_template", None):
        fast.chat_template = target_tok.chat_template
    fast.save_pretrained(str(out))


def make_batch(seqs, idx, to_draft, pad_id: int):
    """Draft-id inputs [B, T], attention mask, positions to score and their weights, and the
    target's top-K at those positions in draft ids (-1 = outside the draft vocabulary)."""
    import torch

    n = max(len(seqs[i]["ids"]) for i in idx)
    K = seqs[idx[0]]["top_ids"].shape[1]
    ids = torch.full((len(idx), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(idx), n), dtype=torch.long)
    weight = torch.zeros((len(idx), n))
    top_ids = torch.full((len(idx), n, K), -1, dtype=torch.long)
    top_logp = torch.zeros((len(idx), n, K), dtype=torch.float16)
    unk = int(to_draft.max())
    for row, i in enumerate(idx):
        s = seqs[i]
        T = len(s["ids"])
        ids[row, :T] = to_draft[torch.tensor(s["ids"])]
        mask[row, :T] = 1
        weight[row, :T - 1] = PROMPT_WEIGHT
        weight[row, s["plen"] - 1:T - 1] = 1.0  # positions whose next token is the target's answer
        d = to_draft[s["top_ids"].long()]
        top_ids[row, :T] = torch.where(d == unk, torch.full_like(d, -1), d)
        top_logp[row, :T] = s["top_logp"]
    weight[top_ids[..., 0] < 0] = 0.0  # the target's choice is outside the draft vocabulary: not learnable
    return ids, mask, weight, top_ids, top_logp


def simulate_acceptance(correct: list[list[bool]], ks=(1, 2, 3, 4, 5)) -> dict:
    """Greedy speculative decoding over answers, given per position whether the draft's next token
    (after an accepted prefix) equals the target's: {k: (mean acceptance length, per-position rates)}.
    A causal draft's j-th draft after position t is its teacher-forced prediction at t + j."""
    longest = max(ks)
    return simulate_chains([[[t + j < len(row) and row[t + j] for j in range(longest)] for t in range(len(row))]
                            for row in correct], ks)


def evaluate(model, seqs, to_draft, pad_id: int, batch_tokens: int = 8192) -> dict:
    """Loss and top-1 agreement with the target's greedy choice on answer positions, and the
    simulated acceptance of greedy speculative decoding over the answers."""
    import torch

    model.eval()
    rng = random.Random(0)
    total, n_loss, n, right = 0.0, 0, 0, 0
    correct_rows = []
    with torch.no_grad():
        for idx in length_batches([len(s["ids"]) for s in seqs], batch_tokens, rng):
            ids, mask, weight, top_ids, top_logp = make_batch(seqs, idx, to_draft, pad_id)
            logits = model(input_ids=ids, attention_mask=mask).logits.float()
            answer = torch.zeros_like(weight, dtype=torch.bool)
            for row, i in enumerate(idx):
                answer[row, seqs[i]["plen"] - 1:len(seqs[i]["ids"]) - 1] = True
            learnable = answer & (weight > 0)
            total += distill_loss(logits[learnable], top_ids[learnable], top_logp[learnable]).item() * int(learnable.sum())
            n_loss += int(learnable.sum())
            n += int(answer.sum())
            ok = (logits.argmax(-1) == top_ids[..., 0]) & answer  # a token outside the vocabulary is never right
            right += int(ok.sum())
            for row, i in enumerate(idx):
                correct_rows.append(ok[row, seqs[i]["plen"] - 1:len(seqs[i]["ids"]) - 1].tolist())
    model.train()
    return {"val_loss": round(total / max(1, n_loss), 4), "val_top1": round(right / max(1, n), 4),
            **simulated_figures(simulate_acceptance(correct_rows))}


def init_from_target(model, target: Path, keep, hidden: int) -> None:
    """Embedding = the target's embedding of the kept tokens on its top `hidden` principal directions."""
    import torch
    from safetensors import safe_open

    with safe_open(str(Path(target) / "model.safetensors"), framework="pt") as st:
        emb = st.get_tensor("model.embed_tokens.weight").float()[keep]
    _, _, v = torch.linalg.svd(emb - emb.mean(0), full_matrices=False)
    proj = emb @ v[:hidden].T
    proj = proj * (0.02 * hidden**0.5 / proj.norm(dim=1).mean())  # rows of norm ~ 0.02 * sqrt(hidden)
    with torch.no_grad():
        model.model.embed_tokens.weight[: len(keep)] = proj
        model.model.embed_tokens.weight[len(keep):] = proj.mean(0)  # <|unk|>


def copy_target_layers(model, target: Path, keep, layer_ids: tuple[int, ...]) -> None:
    """Start as the target cut down: its decoder layers `layer_ids` (e.g. (0, 29): the first and the
    last), its final norm, and its embedding rows of the kept tokens (<|unk|> = their mean)."""
    import torch
    from safetensors import safe_open

    with safe_open(str(Path(target) / "model.safetensors"), framework="pt") as st:
        emb = st.get_tensor("model.embed_tokens.weight")[keep]
        state = {"model.embed_tokens.weight": torch.cat([emb, emb.mean(0, keepdim=True)]),
                 "model.norm.weight": st.get_tensor("model.norm.weight")}
        for new, old in enumerate(layer_ids):
            prefix = f"model.layers.{old}."
            state |= {f"model.layers.{new}.{name[len(prefix):]}": st.get_tensor(name)
                      for name in st.keys() if name.startswith(prefix)}  # noqa: SIM118 (safe_open is not iterable)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:  # lm_head is tied to the embedding
        raise ValueError(f"target layers do not fit the draft: missing {missing}, unexpected {unexpected}")


def train_draft(target: Path, data: Path, out: Path, *, steps: int = 3000, seed: int = 0, hidden: int = 384,
                layers: int = 4, vocab: int = 7168, time_budget_s: float = 1200, batch_tokens: int = 4096,
                lr: float = 2e-3, eval_every: int = 0, threads: int = 2, from_target_layers: tuple[int, ...] = (0, 1),
                progress=print) -> dict:
    """Train on the target pass in `data`; save to `out`. `steps` 0 = as many as fit `time_budget_s`.
    `from_target_layers` starts from those layers of the target at its width (`hidden` and `layers`
    are then ignored); `()` starts from random layers of `hidden` x `layers` and a projected embedding."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    seed_everything(seed, threads=threads)
    started = time.monotonic()
    blob = load_pass(data)
    train, val = partition(blob)
    target_config = json.loads((Path(target) / "config.json").read_text())
    always = sorted({t for k in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id")
                     if isinstance(t := target_config.get(k), int)})
    keep, to_draft = choose_vocab(train, vocab, target_config["vocab_size"], always)
    special = {k: int(to_draft[target_config[k]]) for k in ("bos_token_id", "eos_token_id", "pad_token_id")
               if isinstance(target_config.get(k), int)}
    if from_target_layers:
        cfg = target_shaped_config(target_config, len(from_target_layers), vocab, special)
        hidden, layers = cfg["hidden_size"], cfg["num_hidden_layers"]
        model = LlamaForCausalLM(LlamaConfig(**cfg))
        copy_target_layers(model, target, keep, from_target_layers)
    else:
        cfg = draft_config(target_config, hidden, layers, vocab, special)
        model = LlamaForCausalLM(LlamaConfig(**cfg))
        init_from_target(model, target, keep, hidden)
    model.train()
    pad_id = special.get("pad_token_id", 0)
    answer_tokens = torch.cat([torch.tensor(s["ids"][s["plen"]:]) for s in train])
    coverage = float((to_draft[answer_tokens] < vocab - 1).float().mean())
    n_params = sum(p.numel() for p in model.parameters())
    progress(f"draft model: hidden {hidden}, {layers} layers, {vocab}-token vocabulary covering {coverage:.1%} of "
             f"answer tokens, {n_params / 1e6:.1f}M parameters; {len(train)} training / {len(val)} validation "
             f"sequences ({len(answer_tokens)} answer tokens)")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95))
    schedule = StepSchedule(steps, time_budget_s, lr)

    def batch_loss(idx):
        ids, mask, weight, top_ids, top_logp = make_batch(train, idx, to_draft, pad_id)
        scored = weight > 0
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=ids, attention_mask=mask).logits[scored]
        w = weight[scored]
        loss = (distill_loss(logits, top_ids[scored], top_logp[scored], reduce=False) * w).sum() / w.sum()
        return loss, int(mask.sum())

    def after_step(step):
        if eval_every and step % eval_every == 0:
            progress(f"step {step}: {evaluate(model, val, to_draft, pad_id)}")

    done = train_loop(model, opt, schedule, [len(s["ids"]) for s in train], batch_tokens=batch_tokens, seed=seed,
                      batch_loss=batch_loss, desc="draft", progress=progress, after_step=after_step)
    figures = evaluate(model, val, to_draft, pad_id)
    figures |= done.figures() | {"parameters": n_params, "vocab": vocab, "vocab_coverage_of_answers": round(coverage, 4)}
    shape = (f"--from-target-layers {','.join(map(str, from_target_layers))}" if from_target_layers
             else f"--hidden {hidden} --layers {layers}")
    command = (f"python -m specviz.train draft --seed {seed} {shape} --vocab {vocab} "
               f"{schedule.command_args()} --batch-tokens {batch_tokens} --lr {lr:g} --threads {threads}"
               + schedule.command_note(done.steps))
    save_draft(model, target, keep, out, cfg, figures, blob["meta"], seed=seed, history=done.history, command=command,
               from_target_layers=from_target_layers)
    print_figures("draft model", figures)
    progress(f"saved to {out} (total {time.monotonic() - started:.0f} s)")
    return figures


def save_draft(model, target: Path, keep, out: Path, cfg: dict, figures: dict, data_meta: dict, *, seed: int,
               history: list, command: str, from_target_layers: tuple[int, ...] = ()) -> None:
    import torch
    from safetensors.torch import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()
             if k != "lm_head.weight"}  # tied to model.embed_tokens.weight
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    write_json(out / "config.json", cfg | {"torch_dtype": "bfloat16", "dtype": "bfloat16"})
    save_tokenizer(target, keep, out)
    (out / "generation_config.json").unlink(missing_ok=True)  # a target's copy would hold target token ids
    write_json(out / "training.json", {"kind": "draft_model", "target": short_model_name(target), "seed": seed,
                                      "command": command, "data": data_meta, "figures": figures,
                                      "loss_history": history})
    write_card(out, "SmolLM2-135M draft model (specviz)",
               f"A {cfg['num_hidden_layers']}-layer Llama (hidden {cfg['hidden_size']}) with its own "
               f"{cfg['vocab_size']}-token vocabulary (SmolLM2's most used token strings plus {UNK}), "
               + (f"started from SmolLM2-135M-Instruct's decoder layers {', '.join(map(str, from_target_layers))} and "
                  if from_target_layers else "")
               + "distilled from SmolLM2-135M-Instruct, for vLLM's `draft_model` method with heterogeneous vocabularies:\n\n"
               "    --speculative-config '{\"method\": \"draft_model\", \"model\": \"drafters/smollm2-135m-draft\", "
               "\"use_heterogeneous_vocab\": true, \"num_speculative_tokens\": 3}'\n\nvLLM maps token ids between "
               "the two vocabularies by their strings; drafts stay inside the shared ones.",
               command, figures, data_meta)
    for p in out.iterdir():
        p.chmod(0o644)


def load_draft(folder: Path, target: Path):
    """A saved draft model, back in the training code: (model in fp32, target id -> draft id map
    with <|unk|> for the rest, pad id); what `evaluate` takes. Ids map by token string, as in vLLM."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    draft_vocab = json.loads((Path(folder) / "tokenizer.json").read_text())["model"]["vocab"]
    target_vocab = AutoTokenizer.from_pretrained(str(target)).get_vocab()
    vocab_size = json.loads((Path(target) / "config.json").read_text())["vocab_size"]
    to_draft = torch.full((vocab_size,), draft_vocab[UNK], dtype=torch.long)
    for token, i in draft_vocab.items():
        if token in target_vocab:
            to_draft[target_vocab[token]] = i
    return model, to_draft, model.config.pad_token_id or 0

