"""An EAGLE-3 head for SmolLM2-135M-Instruct, in the checkpoint layout vLLM's `eagle3` method loads.

What the head computes (mirrors vllm/model_executor/models/llama_eagle3.py, norm_before_residual
false, no norm_before_fc):

    g_t   = fc([h2_t ; h15_t ; h27_t])                  target hidden states after layers 2, 15, 27
    x     = [input_layernorm(E[x_{t+1}]) ; hidden_norm(g_t)]   E = the target's embedding (shared)
    r     = g_t + o_proj(attention(q/k/v_proj(x)))      one Llama decoder layer whose q/k/v read 2H
    a_t   = r + mlp(post_attention_layernorm(r))        "prenorm" hidden state, fed to the next step
    draft = d2t-mapped argmax(lm_head(norm(a_t)))       a reduced draft vocabulary (d2t / t2d)

and for the 2nd, 3rd, ... draft the head's own a_t replaces g_t (no fc), with the drafted token.

Training-time test (TTT, as in the EAGLE-3 paper): every batch is unrolled for `ttt_steps` steps;
step j feeds each position the head's own output of step j-1 at the position before, and its
attention sees what vLLM's KV cache holds at that point: step-0 keys up to the chain's start
and the chain's own keys of steps 1..j. So the head is trained on the inputs it gets when it drafts
autoregressively. Loss: cross-entropy against the target's greedy next-next token, weighted 0.8^j
per step, on answer positions only.

Initialisation ("layer-skip"): the decoder layer starts as the target's last layer (its hidden
half of q/k/v, o_proj, MLP, norms), fc starts as "take h27", lm_head as the target's (tied)
embedding rows of the draft vocabulary. At step 0 the head thus starts as "target with layers
27-28 skipped", which predicts x_{t+1}, one position too early (validation loss ~12 before training);
training then teaches it to use the token embedding and to draft ahead. A random layer may do as well.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

from .common import copy_tokenizer, length_batches, lr_at, seed_everything, write_card, write_json
from .data import load_samples, split
from .draft import MAX_LEN

STEP_WEIGHT = 0.8


def aux_layer_ids(num_layers: int) -> list[int]:
    """vLLM's Llama default: a low, a middle and a high layer (2, L // 2, L - 3)."""
    return [2, num_layers // 2, num_layers - 3]


# ---- target features ---------------------------------------------------------------------------


def extract_features(target: Path, samples: list[dict], layer_ids: list[int], *, time_budget_s: float = 300,
                     batch_tokens: int = 4096, progress=print) -> list[dict]:
    """Run the target (transformers, bfloat16 as vLLM serves it) over prompt + answer and keep the
    hidden states after the `layer_ids` layers (bf16, [T, 3H]). Stops at the time budget."""
    import torch
    from tqdm import tqdm
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(str(target), dtype=torch.bfloat16)
    model.eval()
    top = max(layer_ids)
    model.model.layers = model.model.layers[:top]  # nothing above the highest layer read is needed
    captured: dict[int, torch.Tensor] = {}
    hooks = [model.model.layers[i - 1].register_forward_hook(
        lambda mod, inp, out, i=i: captured.__setitem__(i, out[0] if isinstance(out, tuple) else out))
        for i in layer_ids]
    seqs = [(s["prompt_ids"] + s["output_ids"])[:MAX_LEN] for s in samples]
    rng = random.Random(0)
    out: list[dict] = []
    started = time.monotonic()
    bar = tqdm(total=len(seqs), desc="target hidden states", unit="seq")
    with torch.no_grad():
        for idx in length_batches([len(s) for s in seqs], batch_tokens, rng):
            n = max(len(seqs[i]) for i in idx)
            ids = torch.zeros((len(idx), n), dtype=torch.long)
            mask = torch.zeros((len(idx), n), dtype=torch.long)
            for r, i in enumerate(idx):
                ids[r, :len(seqs[i])] = torch.tensor(seqs[i])
                mask[r, :len(seqs[i])] = 1
            model.model(input_ids=ids, attention_mask=mask)
            fused = torch.cat([captured[i] for i in layer_ids], dim=-1).to(torch.bfloat16)
            for r, i in enumerate(idx):
                out.append({"ids": seqs[i], "plen": len(samples[i]["prompt_ids"]), "hidden": fused[r, :len(seqs[i])].clone()})
            bar.update(len(idx))
            if time.monotonic() - started > time_budget_s:
                progress(f"feature time budget reached after {len(out)} sequences")
                break
    bar.close()
    for h in hooks:
        h.remove()
    return out


# ---- the head ----------------------------------------------------------------------------------


def _rms(x, w, eps):
    import torch

    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)) * w


def _rope(x, cos, sin):
    import torch

    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def make_head(target_cfg: dict, draft_vocab: int, intermediate: int):
    import torch
    from torch import nn

    H = target_cfg["hidden_size"]
    nh, nkv = target_cfg["num_attention_heads"], target_cfg["num_key_value_heads"]
    hd = target_cfg.get("head_dim") or H // nh

    class Eagle3Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.H, self.nh, self.nkv, self.hd = H, nh, nkv, hd
            self.eps = target_cfg.get("rms_norm_eps", 1e-5)
            self.theta = (target_cfg.get("rope_parameters") or {}).get("rope_theta") or target_cfg.get("rope_theta", 10000.0)
            self.fc = nn.Linear(3 * H, H, bias=False)
            self.input_layernorm = nn.Parameter(torch.ones(H))
            self.hidden_norm = nn.Parameter(torch.ones(H))
            self.q_proj = nn.Linear(2 * H, nh * hd, bias=False)
            self.k_proj = nn.Linear(2 * H, nkv * hd, bias=False)
            self.v_proj = nn.Linear(2 * H, nkv * hd, bias=False)
            self.o_proj = nn.Linear(nh * hd, H, bias=False)
            self.post_attention_layernorm = nn.Parameter(torch.ones(H))
            self.gate_proj = nn.Linear(H, intermediate, bias=False)
            self.up_proj = nn.Linear(H, intermediate, bias=False)
            self.down_proj = nn.Linear(intermediate, H, bias=False)
            self.norm = nn.Parameter(torch.ones(H))
            self.lm_head = nn.Linear(H, draft_vocab, bias=False)

        def rope(self, T: int):
            inv = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2).float() / self.hd))
            f = torch.outer(torch.arange(T).float(), inv)
            emb = torch.cat([f, f], dim=-1)
            return emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]

        def qkv(self, emb, hidden, cos, sin):
            """emb, hidden [B, T, H] -> q [B, T, nh, hd], k/v [B, T, nkv, hd], residual."""
            B, T, _ = emb.shape
            x = torch.cat([_rms(emb, self.input_layernorm, self.eps), _rms(hidden, self.hidden_norm, self.eps)], -1)
            q = _rope(self.q_proj(x).view(B, T, self.nh, self.hd), cos, sin)
            k = _rope(self.k_proj(x).view(B, T, self.nkv, self.hd), cos, sin)
            v = self.v_proj(x).view(B, T, self.nkv, self.hd)
            return q, k, v, hidden.float()

        def finish(self, attn, residual):
            """-> (prenorm hidden state fed to the next step, normed state the lm_head reads)."""
            r = self.o_proj(attn) + residual
            x = _rms(r, self.post_attention_layernorm, self.eps)
            pre = r + self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))
            return pre, _rms(pre, self.norm, self.eps)

    return Eagle3Head()


def ttt_forward(head, emb, fused, pad_mask, steps: int, masks=None):
    """Unrolled drafting: logits per step, step j at position p drafting x_{p+2} for the chain that
    started at p - j: [B, T, V], or [n, V] at the positions of masks[j] (the lm_head is costly)."""
    import torch

    B, T, _ = emb.shape
    nh, nkv, hd = head.nh, head.nkv, head.hd
    rep = nh // nkv
    cos, sin = head.rope(T)
    scale = hd ** -0.5
    pos = torch.arange(T)
    hidden = head.fc(fused)
    keys, values, outs = [], [], []
    for j in range(steps):
        if j > 0:  # the previous step's output at the position before (zeros where there is none)
            hidden = torch.cat([torch.zeros_like(prev[:, :1]), prev[:, :-1]], dim=1)
        q, k, v, residual = head.qkv(emb, hidden, cos, sin)
        keys.append(k.repeat_interleave(rep, dim=2))
        values.append(v.repeat_interleave(rep, dim=2))
        qh = q.transpose(1, 2)  # [B, nh, T, hd]
        k0, v0 = keys[0].transpose(1, 2), values[0].transpose(1, 2)
        s0 = (qh @ k0.transpose(-1, -2)) * scale  # [B, nh, T, T]
        allowed = (pos[None, :] <= pos[:, None] - j)[None, None] & pad_mask[:, None, None, :]
        s0 = s0.masked_fill(~allowed, float("-inf"))
        diag_s, diag_v = [], []
        for i in range(1, j + 1):  # the chain's own step-i key at position p - j + i
            shift = j - i
            ki, vi = keys[i], values[i]
            if shift:
                ki = torch.cat([torch.zeros_like(ki[:, :shift]), ki[:, :-shift]], dim=1)
                vi = torch.cat([torch.zeros_like(vi[:, :shift]), vi[:, :-shift]], dim=1)
            diag_s.append((q * ki).sum(-1).transpose(1, 2)[..., None] * scale)  # [B, nh, T, 1]
            diag_v.append(vi.transpose(1, 2))  # [B, nh, T, hd]
        scores = torch.cat([s0] + diag_s, dim=-1)
        # rows with nothing allowed (p < j) would be all -inf: give them a dummy zero (masked from the loss)
        scores = torch.where(torch.isinf(scores).all(-1, keepdim=True), torch.zeros_like(scores), scores)
        p = torch.softmax(scores.float(), dim=-1)
        attn = p[..., :T] @ v0
        for i, dv in enumerate(diag_v):
            attn = attn + p[..., T + i:T + i + 1] * dv
        attn = attn.transpose(1, 2).reshape(B, T, nh * hd)
        prev, normed = head.finish(attn, residual)
        outs.append(head.lm_head(normed if masks is None else normed[masks[j]]))
    return outs


# ---- data --------------------------------------------------------------------------------------


def choose_draft_vocab(samples: list[dict], size: int, vocab_size: int, eos: int):
    """The `size` most frequent answer tokens (ids sorted), d2t offsets and the t2d mask."""
    import torch

    counts = torch.zeros(vocab_size, dtype=torch.long)
    for s in samples:
        counts += torch.bincount(torch.tensor(s["output_ids"] or [eos]), minlength=vocab_size)
    counts[eos] += 10**9  # always keep the end of turn
    top = torch.sort(torch.topk(counts, size).indices).values
    coverage = counts[top].sum().item() - 10**9
    total = counts.sum().item() - 10**9
    d2t = top - torch.arange(size)
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[top] = True
    return top, d2t, t2d, coverage / max(1, total)


def make_batch(feats, idx, t2d_index, steps: int):
    """token ids shifted (x_{p+1}), fused hidden [B, T, 3H], labels in draft ids (x_{p+2}, -100 =
    none), valid chain starts and padding mask."""
    import torch

    n = max(len(feats[i]["ids"]) for i in idx) - 1
    B = len(idx)
    nxt = torch.zeros((B, n), dtype=torch.long)
    fused = torch.zeros((B, n, feats[idx[0]]["hidden"].shape[-1]), dtype=torch.bfloat16)
    labels = torch.full((B, n), -100, dtype=torch.long)
    first = torch.zeros(B, dtype=torch.long)
    pad = torch.zeros((B, n), dtype=torch.bool)
    for r, i in enumerate(idx):
        ids = torch.tensor(feats[i]["ids"])
        T = len(ids) - 1
        nxt[r, :T] = ids[1:]
        fused[r, :T] = feats[i]["hidden"][:T]
        lab = t2d_index[ids[2:]]  # -1 where the token is not in the draft vocabulary
        labels[r, :T - 1] = torch.where(lab >= 0, lab, torch.full_like(lab, -100))
        labels[r, :T - 1][lab < 0] = -2  # counted as wrong, not trainable
        first[r] = feats[i]["plen"] - 1  # the first chain starts where the target gave its first answer token
        pad[r, :T] = True
    return nxt, fused, labels, first, pad


def step_mask(labels, first, j: int):
    """Positions whose step-j prediction is scored: chain start p - j >= first, label exists."""
    import torch

    T = labels.shape[1]
    pos = torch.arange(T)[None, :]
    return (pos - j >= first[:, None]) & (labels != -100)


# ---- training ----------------------------------------------------------------------------------


def init_from_target(head, target: Path, target_cfg: dict, top, layer_ids: list[int]) -> None:
    import torch
    from safetensors import safe_open

    L = target_cfg["num_hidden_layers"] - 1
    H = target_cfg["hidden_size"]
    with safe_open(str(Path(target) / "model.safetensors"), framework="pt") as st:
        get = lambda n: st.get_tensor(n).float()  # noqa: E731
        emb = get("model.embed_tokens.weight")
        p = f"model.layers.{L}."
        with torch.no_grad():
            for name in ("q_proj", "k_proj", "v_proj"):
                w = get(p + f"self_attn.{name}.weight")
                mod = getattr(head, name)
                mod.weight.zero_()
                mod.weight[:, H:] = w
                torch.nn.init.normal_(mod.weight[:, :H], std=0.02 / math.sqrt(2))
            head.o_proj.weight.copy_(get(p + "self_attn.o_proj.weight"))
            gate, up, down = (get(p + f"mlp.{n}.weight") for n in ("gate_proj", "up_proj", "down_proj"))
            inter = head.gate_proj.weight.shape[0]  # a narrower MLP keeps the target's strongest channels
            keep = torch.sort(torch.topk(up.norm(dim=1) * gate.norm(dim=1) * down.norm(dim=0), inter).indices).values
            head.gate_proj.weight.copy_(gate[keep])
            head.up_proj.weight.copy_(up[keep])
            head.down_proj.weight.copy_(down[:, keep])
            head.hidden_norm.copy_(get(p + "input_layernorm.weight"))
            head.post_attention_layernorm.copy_(get(p + "post_attention_layernorm.weight"))
            head.norm.copy_(get("model.norm.weight"))
            head.fc.weight.zero_()
            head.fc.weight[:, (len(layer_ids) - 1) * H:] = torch.eye(H)
            head.lm_head.weight.copy_(emb[top])
    return emb


def evaluate(head, emb, feats, t2d_index, steps: int, batch_tokens: int = 4096) -> dict:
    import torch
    import torch.nn.functional as F

    head.eval()
    rng = random.Random(0)
    right = [0] * steps
    count = [0] * steps
    loss_sum, loss_n = 0.0, 0
    chains: list[list[list[bool]]] = []
    with torch.no_grad():
        for idx in length_batches([len(f["ids"]) for f in feats], batch_tokens, rng):
            nxt, fused, labels, first, pad = make_batch(feats, idx, t2d_index, steps)
            outs = ttt_forward(head, emb[nxt], fused.float(), pad, steps)
            oks = []
            for j, logits in enumerate(outs):
                m = step_mask(labels, first, j)
                pred = logits.argmax(-1)
                ok = (pred == labels) & m
                right[j] += ok.sum().item()
                count[j] += m.sum().item()
                trainable = m & (labels >= 0)
                if j == 0:
                    loss_sum += F.cross_entropy(logits[trainable].float(), labels[trainable], reduction="sum").item()
                    loss_n += trainable.sum().item()
                oks.append(ok)
            # per chain start t: correct_j[t] = step-j prediction at position t + j is right
            for r, i in enumerate(idx):
                T = len(feats[i]["ids"]) - 2
                start = int(first[r])
                rows = []
                for t in range(start, T):
                    rows.append([bool(oks[j][r, t + j]) if t + j < T else False for j in range(steps)])
                chains.append(rows)
    head.train()
    sim = {}
    for k in range(1, steps + 1):
        steps_n, acc, per = 0, 0, [0] * k
        for rows in chains:
            t = 0
            while t < len(rows):
                a = 0
                while a < k and rows[t][a]:
                    a += 1
                for j in range(a):
                    per[j] += 1
                steps_n += 1
                acc += a
                t += a + 1
        sim[k] = (1 + acc / max(1, steps_n), [x / max(1, steps_n) for x in per])
    return {"val_loss_step0": round(loss_sum / max(1, loss_n), 4),
            "val_top1_per_step": [round(r / max(1, c), 4) for r, c in zip(right, count)],
            "sim_mean_acceptance_length": {k: round(v[0], 3) for k, v in sim.items()},
            "sim_acceptance_per_pos": {k: [round(x, 3) for x in v[1]] for k, v in sim.items()}}


def train_eagle3(target: Path, data: Path, out: Path, *, steps: int = 3000, seed: int = 0, draft_vocab: int = 4096,
                 ttt_steps: int = 3, time_budget_s: float = 1500, batch_tokens: int = 4096, lr: float = 5e-4,
                 feature_budget_s: float = 300, intermediate: int | None = None, progress=print) -> dict:
    import torch
    import torch.nn.functional as F
    from tqdm import tqdm

    seed_everything(seed, threads=2)
    started = time.monotonic()
    meta, samples = load_samples(data)
    train_s, val_s = split(samples, seed=seed)
    target_cfg = json.loads((Path(target) / "config.json").read_text())
    layer_ids = aux_layer_ids(target_cfg["num_hidden_layers"])
    intermediate = intermediate or target_cfg["intermediate_size"]
    eos = target_cfg["eos_token_id"]
    top, d2t, t2d, coverage = choose_draft_vocab(train_s, draft_vocab, target_cfg["vocab_size"], eos)
    t2d_index = torch.full((target_cfg["vocab_size"],), -1, dtype=torch.long)
    t2d_index[top] = torch.arange(len(top))
    progress(f"draft vocabulary: {draft_vocab} tokens cover {coverage:.1%} of the training answers' tokens")

    val_feats = extract_features(target, val_s, layer_ids, time_budget_s=60, progress=progress)
    train_feats = extract_features(target, train_s, layer_ids, time_budget_s=feature_budget_s, progress=progress)
    progress(f"target hidden states: {sum(len(f['ids']) for f in train_feats)} training tokens in "
             f"{time.monotonic() - started:.0f} s")
    features_s = time.monotonic() - started

    head = make_head(target_cfg, draft_vocab, intermediate)
    emb = init_from_target(head, target, target_cfg, top, layer_ids)  # the target's embedding: frozen, shared
    n_params = sum(p.numel() for p in head.parameters())
    progress(f"EAGLE-3 head: {n_params / 1e6:.1f}M parameters, reads target layers {layer_ids}; "
             f"{len(train_feats)} training / {len(val_feats)} validation sequences; TTT steps {ttt_steps}")
    before = evaluate(head, emb, val_feats, t2d_index, ttt_steps)
    progress(f"before training (layer-skip init): {before}")
    opt = torch.optim.AdamW(head.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    rng = random.Random(seed)
    lengths = [len(f["ids"]) for f in train_feats]
    batches: list[list[int]] = []
    bar = tqdm(total=steps, desc="eagle3", unit="step")
    history, step, ema, tokens_seen = [], 0, None, 0
    train_started = time.monotonic()
    auto = steps <= 0  # fit the schedule to the time budget, measured over the first 8 steps
    if auto:
        steps = 10**6
    while step < steps:
        if auto and step == 8:
            steps = max(16, int(time_budget_s / ((time.monotonic() - train_started) / 8)))
            bar.total = steps
            progress(f"{steps} steps fit the time budget")
        if not batches:
            batches = length_batches(lengths, batch_tokens, rng)
        idx = batches.pop()
        nxt, fused, labels, first, pad = make_batch(train_feats, idx, t2d_index, ttt_steps)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr, warmup=8 if auto else min(100, steps // 10 + 1))
        masks = [step_mask(labels, first, j) & (labels >= 0) for j in range(ttt_steps)]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            outs = ttt_forward(head, emb[nxt], fused.float(), pad, ttt_steps, masks=masks)
        loss, wsum = 0.0, 0.0
        for j, logits in enumerate(outs):
            m = masks[j]
            if m.any():
                loss = loss + STEP_WEIGHT**j * F.cross_entropy(logits.float(), labels[m])
                wsum += STEP_WEIGHT**j
        loss = loss / max(wsum, 1e-9)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        step += 1
        tokens_seen += int(pad.sum())
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        bar.set_postfix(loss=f"{ema:.3f}")
        bar.update(1)
        if step % 50 == 0:
            history.append({"step": step, "loss": round(ema, 4), "elapsed_s": round(time.monotonic() - train_started, 1)})
        if time.monotonic() - train_started > time_budget_s:
            progress(f"time budget of {time_budget_s:.0f} s reached at step {step}")
            break
    bar.close()
    train_elapsed = time.monotonic() - train_started
    figures = evaluate(head, emb, val_feats, t2d_index, ttt_steps)
    figures |= {"steps": step, "train_tokens_seen": tokens_seen, "train_time_s": round(train_elapsed, 1),
                "feature_time_s": round(features_s, 1), "final_train_loss": round(ema or 0, 4), "parameters": n_params,
                "draft_vocab": draft_vocab, "draft_vocab_coverage": round(coverage, 4),
                "before_training": before}
    command = (f"python -m specviz.train eagle3 --seed {seed} --draft-vocab {draft_vocab} --ttt-steps {ttt_steps} "
               f"--steps {0 if auto else steps} --time-budget-s {time_budget_s:g} --feature-budget-s {feature_budget_s:g} "
               f"--batch-tokens {batch_tokens} --lr {lr:g}" + (f"   # {step} steps fitted the budget" if auto else ""))
    save_eagle3(head, target, target_cfg, Path(out), d2t, t2d, layer_ids, intermediate, figures, meta, seed=seed,
                history=history, command=command)
    print("\n== EAGLE-3 head ==")
    for k, v in figures.items():
        print(f"  {k}: {v}")
    progress(f"saved to {out} (total {time.monotonic() - started:.0f} s)")
    return figures


def save_eagle3(head, target: Path, target_cfg: dict, out: Path, d2t, t2d, layer_ids, intermediate, figures,
                data_meta, *, seed: int, history: list, command: str = "") -> None:
    import torch
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    bf = lambda t: t.detach().to(torch.bfloat16).contiguous()  # noqa: E731
    tensors = {
        "fc.weight": bf(head.fc.weight),
        "midlayer.input_layernorm.weight": bf(head.input_layernorm),
        "midlayer.hidden_norm.weight": bf(head.hidden_norm),
        "midlayer.self_attn.q_proj.weight": bf(head.q_proj.weight),
        "midlayer.self_attn.k_proj.weight": bf(head.k_proj.weight),
        "midlayer.self_attn.v_proj.weight": bf(head.v_proj.weight),
        "midlayer.self_attn.o_proj.weight": bf(head.o_proj.weight),
        "midlayer.post_attention_layernorm.weight": bf(head.post_attention_layernorm),
        "midlayer.mlp.gate_proj.weight": bf(head.gate_proj.weight),
        "midlayer.mlp.up_proj.weight": bf(head.up_proj.weight),
        "midlayer.mlp.down_proj.weight": bf(head.down_proj.weight),
        "norm.weight": bf(head.norm),
        "lm_head.weight": bf(head.lm_head.weight),
        "d2t": d2t.to(torch.long).contiguous(),
        "t2d": t2d.contiguous(),
    }
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    keep = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act",
            "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_theta", "vocab_size",
            "bos_token_id", "eos_token_id", "pad_token_id")
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama"}
    cfg |= {k: target_cfg[k] for k in keep if target_cfg.get(k) is not None}
    cfg |= {"intermediate_size": intermediate, "num_hidden_layers": 1, "attention_bias": False, "mlp_bias": False,
            "tie_word_embeddings": False, "draft_vocab_size": int(len(d2t)), "target_hidden_size": target_cfg["hidden_size"],
            "eagle_aux_hidden_state_layer_ids": layer_ids, "norm_before_residual": False,
            "torch_dtype": "bfloat16", "dtype": "bfloat16"}
    write_json(out / "config.json", cfg)
    copy_tokenizer(target, out)
    write_json(out / "training.json", {"kind": "eagle3", "target": Path(target).name, "seed": seed, "command": command,
                                      "data": data_meta,
                                      "figures": figures, "loss_history": history})
    write_card(out, "EAGLE-3 head for SmolLM2-135M-Instruct (specviz)",
               f"One decoder layer at the target's width (576) reading the target's hidden states after layers "
               f"{layer_ids}, with a {len(d2t)}-token draft vocabulary (d2t / t2d), for vLLM's `eagle3` method:\n\n"
               "    --speculative-config '{\"method\": \"eagle3\", \"model\": \"drafters/smollm2-135m-eagle3\", "
               "\"num_speculative_tokens\": 3}'\n\nNo embed_tokens: vLLM shares the target's embedding (and tokenizer).",
               command, figures, data_meta)
    for p in out.iterdir():
        p.chmod(0o644)
