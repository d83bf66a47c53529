"""A small draft model for SmolLM2-135M-Instruct, distilled from the target's greedy answers.

Recipe (defaults):
- architecture: a Llama with SmolLM2's tokenizer and vocabulary (49152), hidden 256, 2 layers,
  4 heads of 64, tied embeddings; saved as an ordinary HF folder that vLLM's `draft_model` loads.
- initialisation: the embedding (= the tied lm_head) is the target's embedding projected on its
  top principal directions (SVD), so the draft starts knowing which tokens are alike; the layers
  are random.
- data: prompt + the target's own greedy answer (specviz.train.data). The loss is cross-entropy on
  the answer tokens, i.e. on the target's greedy choices (hard-label distillation: under greedy
  verification only the target's argmax matters). Prompt tokens are context only (PROMPT_WEIGHT).
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

from .common import copy_tokenizer, length_batches, lr_at, seed_everything, write_card, write_json
from .data import load_samples, split

PROMPT_WEIGHT = 0.0  # > 0 also trains on the prompt text (slower: the lm_head runs there too)
MAX_LEN = 512


def draft_config(target_config: dict, hidden: int, layers: int) -> dict:
    heads = max(1, hidden // 64)
    keep = ("vocab_size", "bos_token_id", "eos_token_id", "pad_token_id", "max_position_embeddings", "rms_norm_eps",
            "rope_parameters", "rope_theta", "hidden_act")
    cfg = {k: target_config[k] for k in keep if target_config.get(k) is not None}
    cfg |= {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
            "intermediate_size": 3 * hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": heads, "head_dim": 64, "tie_word_embeddings": True, "attention_bias": False,
            "mlp_bias": False, "initializer_range": 0.02, "use_cache": True}
    return cfg


def sequences(samples: list[dict]) -> list[tuple[list[int], int]]:
    """(token ids, length of the prompt) per sample, cut to MAX_LEN."""
    return [((s["prompt_ids"] + s["output_ids"])[:MAX_LEN], len(s["prompt_ids"])) for s in samples]


def make_batch(seqs, idx, pad_id: int):
    """input ids, attention mask, labels (-100 = none) and loss weights for one batch."""
    import torch

    n = max(len(seqs[i][0]) for i in idx)
    ids = torch.full((len(idx), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(idx), n), dtype=torch.long)
    labels = torch.full((len(idx), n), -100, dtype=torch.long)
    weight = torch.zeros((len(idx), n))
    for row, i in enumerate(idx):
        toks, plen = seqs[i]
        t = torch.tensor(toks)
        ids[row, :len(toks)] = t
        mask[row, :len(toks)] = 1
        labels[row, :len(toks) - 1] = t[1:]
        weight[row, :len(toks) - 1] = PROMPT_WEIGHT
        weight[row, plen - 1:len(toks) - 1] = 1.0  # positions whose next token is the target's answer
    return ids, mask, labels, weight


def simulate_acceptance(correct: list[list[bool]], ks=(1, 2, 3, 4, 5)) -> dict:
    """Greedy speculative decoding over answers, given per position whether the draft's next token
    (after an accepted prefix) equals the target's: {k: (mean acceptance length, per-position rates)}."""
    out = {}
    for k in ks:
        steps, accepted = 0, 0
        per_pos = [0] * k
        for row in correct:
            t = 0
            while t < len(row):
                a = 0
                while a < k and t + a < len(row) and row[t + a]:
                    a += 1
                for j in range(a):
                    per_pos[j] += 1
                steps += 1
                accepted += a
                t += a + 1
        out[k] = (1 + accepted / max(1, steps), [p / max(1, steps) for p in per_pos])
    return out


def evaluate(model, seqs, pad_id: int, batch_tokens: int = 8192) -> dict:
    import torch
    import torch.nn.functional as F

    model.eval()
    rng = random.Random(0)
    total, n, right, count = 0.0, 0.0, 0, 0
    correct_rows = []
    with torch.no_grad():
        for idx in length_batches([len(s[0]) for s in seqs], batch_tokens, rng):
            ids, mask, labels, weight = make_batch(seqs, idx, pad_id)
            logits = model(input_ids=ids, attention_mask=mask).logits.float()
            ans = weight == 1.0
            loss = F.cross_entropy(logits[ans], labels[ans], reduction="sum")
            total += loss.item()
            n += ans.sum().item()
            pred = logits.argmax(-1)
            ok = (pred == labels) & ans
            right += ok.sum().item()
            count += ans.sum().item()
            for row, i in enumerate(idx):
                plen, length = seqs[i][1], len(seqs[i][0])
                correct_rows.append(ok[row, plen - 1:length - 1].tolist())
    model.train()
    sim = simulate_acceptance(correct_rows)
    return {"val_loss": total / max(1, n), "val_top1": right / max(1, count),
            "sim_mean_acceptance_length": {k: round(v[0], 3) for k, v in sim.items()},
            "sim_acceptance_per_pos": {k: [round(r, 3) for r in v[1]] for k, v in sim.items()}}


def init_from_target(model, target: Path, hidden: int) -> None:
    """Embedding = the target's embedding projected on its top `hidden` principal directions."""
    import torch
    from safetensors import safe_open

    with safe_open(str(Path(target) / "model.safetensors"), framework="pt") as st:
        emb = st.get_tensor("model.embed_tokens.weight").float()
    _, _, v = torch.linalg.svd(emb - emb.mean(0), full_matrices=False)
    proj = emb @ v[:hidden].T
    proj = proj * (0.02 * hidden**0.5 / proj.norm(dim=1).mean())  # rows of norm ~ 0.02 * sqrt(hidden)
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(proj)


def train_draft(target: Path, data: Path, out: Path, *, steps: int = 3000, seed: int = 0, hidden: int = 256,
                layers: int = 2, time_budget_s: float = 1200, batch_tokens: int = 4096, lr: float = 2e-3, train_vocab: int = 12288,
                eval_every: int = 0, progress=print) -> dict:
    import torch
    import torch.nn.functional as F
    from tqdm import tqdm
    from transformers import LlamaConfig, LlamaForCausalLM

    seed_everything(seed, threads=2)
    started = time.monotonic()
    meta, samples = load_samples(data)
    train_s, val_s = split(samples, seed=seed)
    train, val = sequences(train_s), sequences(val_s)
    target_config = json.loads((Path(target) / "config.json").read_text())
    cfg = draft_config(target_config, hidden, layers)
    model = LlamaForCausalLM(LlamaConfig(**cfg))
    init_from_target(model, target, hidden)
    model.train()
    pad_id = cfg.get("pad_token_id") or 0
    n_params = sum(p.numel() for p in model.parameters())
    progress(f"draft model: hidden {hidden}, {layers} layers, {n_params / 1e6:.1f}M parameters; "
             f"{len(train)} training / {len(val)} validation answers "
             f"({sum(len(s['output_ids']) for s in train_s)} answer tokens)")
    counts = torch.zeros(cfg["vocab_size"], dtype=torch.long)
    for s in train_s:
        counts += torch.bincount(torch.tensor(s["output_ids"] or [0]), minlength=cfg["vocab_size"])
    keep = torch.sort(torch.topk(counts, min(train_vocab, cfg["vocab_size"])).indices).values
    to_sub = torch.full((cfg["vocab_size"],), -1, dtype=torch.long)
    to_sub[keep] = torch.arange(len(keep))
    progress(f"training softmax over the {len(keep)} most frequent answer tokens "
             f"({counts[keep].sum().item() / max(1, counts.sum().item()):.2%} of answer tokens)")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95))
    rng = random.Random(seed)
    lengths = [len(s[0]) for s in train]
    batches: list[list[int]] = []
    bar = tqdm(total=steps, desc="draft", unit="step")
    history = []
    step, tokens_seen, ema = 0, 0, None
    train_started = time.monotonic()
    while step < steps:
        if not batches:
            batches = length_batches(lengths, batch_tokens, rng)
        idx = batches.pop()
        ids, mask, labels, weight = make_batch(train, idx, pad_id)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr, warmup=min(100, steps // 10 + 1))
        # The lm_head (49152 x hidden) is most of the cost: run it only where the loss is, and only
        # over the `train_vocab` most frequent answer tokens (a sampled softmax; rarer labels are skipped).
        sub = to_sub[labels.clamp_min(0)]
        valid = (weight > 0) & (sub >= 0)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            hidden_states = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
            logits = F.linear(hidden_states[valid], model.lm_head.weight[keep])
        loss_tok = F.cross_entropy(logits.float(), sub[valid], reduction="none")
        loss = (loss_tok * weight[valid]).sum() / weight[valid].sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens_seen += int(mask.sum())
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        bar.set_postfix(loss=f"{ema:.3f}")
        bar.update(1)
        if step % 50 == 0:
            history.append({"step": step, "loss": round(ema, 4), "elapsed_s": round(time.monotonic() - train_started, 1)})
        if eval_every and step % eval_every == 0:
            progress(f"step {step}: {evaluate(model, val, pad_id)}")
        if time.monotonic() - train_started > time_budget_s:
            progress(f"time budget of {time_budget_s:.0f} s reached at step {step}")
            break
    bar.close()
    train_s_elapsed = time.monotonic() - train_started
    figures = evaluate(model, val, pad_id)
    figures |= {"steps": step, "train_tokens_seen": tokens_seen, "train_time_s": round(train_s_elapsed, 1),
                "final_train_loss": round(ema or 0, 4), "parameters": n_params}
    save_draft(model, target, out, cfg, figures, meta, seed=seed, history=history)
    _print_figures("draft model", figures)
    progress(f"saved to {out} (total {time.monotonic() - started:.0f} s)")
    return figures


def save_draft(model, target: Path, out: Path, cfg: dict, figures: dict, data_meta: dict, *, seed: int,
               history: list) -> None:
    import torch
    from safetensors.torch import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()
             if k != "lm_head.weight"}  # tied to model.embed_tokens.weight
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    write_json(out / "config.json", cfg | {"torch_dtype": "bfloat16", "dtype": "bfloat16"})
    copy_tokenizer(target, out)
    write_json(out / "training.json", {"kind": "draft_model", "target": Path(target).name, "seed": seed,
                                      "data": data_meta, "figures": figures, "loss_history": history})
    write_card(out, "SmolLM2-135M draft model (specviz)",
               f"A {cfg['num_hidden_layers']}-layer Llama (hidden {cfg['hidden_size']}) with SmolLM2's tokenizer and "
               "vocabulary, distilled from SmolLM2-135M-Instruct's greedy answers, for vLLM's `draft_model` method:\n\n"
               "    --speculative-config '{\"method\": \"draft_model\", \"model\": \"drafters/smollm2-135m-draft\", "
               "\"num_speculative_tokens\": 3}'\n\nvLLM uses the target's tokenizer for it (same vocabulary).",
               f"python -m specviz.train draft --seed {seed} --hidden {cfg['hidden_size']} "
               f"--layers {cfg['num_hidden_layers']} --steps {figures['steps']}", figures, data_meta)
    for p in out.iterdir():
        p.chmod(0o644)


def _print_figures(name: str, figures: dict) -> None:
    print(f"\n== {name} ==")
    for k, v in figures.items():
        print(f"  {k}: {v}")
