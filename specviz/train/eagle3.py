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
autoregressively. Labels come from the target pass (specviz.train.targets): the target's greedy
choice and its top-8 after x_{p+1} (`distill_loss`), weighted 0.8^j per step; chains starting in
the prompt weigh PROMPT_WEIGHT, chains starting in the answer 1.

Initialisation: the decoder layer is random; fc starts as "take h27", the final norm as the
target's and the lm_head as the target's (tied) embedding rows of the draft vocabulary, so the
head starts by reading the target's late features through the target's own output layer. (An
earlier version started the layer as the target's last layer; that predicts x_{t+1}, one position
too early, and training first had to unlearn it: validation loss ~12 before training.)
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

from ..config import short_model_name
from .common import (
    StepSchedule,
    copy_tokenizer,
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

STEP_WEIGHT = 0.8
PROMPT_WEIGHT = 0.5


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
    hidden = prev = head.fc(fused)
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


def choose_draft_vocab(seqs: list[dict], size: int, vocab_size: int, eos: int):
    """The `size` most frequent answer tokens (ids sorted), d2t offsets and the t2d mask."""
    import torch

    counts = torch.zeros(vocab_size, dtype=torch.long)
    for s in seqs:
        counts += torch.bincount(torch.tensor(s["ids"][s["plen"]:] or [eos]), minlength=vocab_size)
    counts[eos] += 10**9  # always keep the end of turn
    top = torch.sort(torch.topk(counts, size).indices).values
    coverage = counts[top].sum().item() - 10**9
    total = counts.sum().item() - 10**9
    d2t = top - torch.arange(size)
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[top] = True
    return top, d2t, t2d, coverage / max(1, total)


def draft_index(top, vocab_size: int):
    """[vocab_size]: target id -> draft id, -1 outside the draft vocabulary. Example: top [5, 9] -> index[9] = 1."""
    import torch

    index = torch.full((vocab_size,), -1, dtype=torch.long)
    index[top] = torch.arange(len(top))
    return index


def make_batch(seqs, idx, t2d_index):
    """For chain starts p: x_{p+1} [B, T], the fused hidden state at p [B, T, 3H], the target's top-K
    after x_{p+1} in draft ids (-1 = outside the draft vocabulary) [B, T, K] with their log-probs,
    the weight of a chain starting at p [B, T], where the answer's chains start [B], padding mask."""
    import torch

    n = max(len(seqs[i]["ids"]) for i in idx) - 1
    B, K = len(idx), seqs[idx[0]]["top_ids"].shape[1]
    nxt = torch.zeros((B, n), dtype=torch.long)
    fused = torch.zeros((B, n, seqs[idx[0]]["hidden"].shape[-1]), dtype=torch.bfloat16)
    top_ids = torch.full((B, n, K), -1, dtype=torch.long)
    top_logp = torch.zeros((B, n, K), dtype=torch.float16)
    weight = torch.zeros((B, n))
    first = torch.zeros(B, dtype=torch.long)
    pad = torch.zeros((B, n), dtype=torch.bool)
    for r, i in enumerate(idx):
        s = seqs[i]
        T = len(s["ids"]) - 1
        nxt[r, :T] = torch.tensor(s["ids"][1:])
        fused[r, :T] = s["hidden"][:T]
        top_ids[r, :T - 1] = t2d_index[s["top_ids"][1:T].long()]  # after x_{p+1}: the target's guesses for x_{p+2}
        top_logp[r, :T - 1] = s["top_logp"][1:T]
        first[r] = s["plen"] - 1  # the answer's first chain starts where the target gave its first answer token
        weight[r, :T - 1] = PROMPT_WEIGHT
        weight[r, first[r]:T - 1] = 1.0
        pad[r, :T] = True
    return nxt, fused, top_ids, top_logp, weight, first, pad


def chain_weight(weight, j: int):
    """[B, T]: the weight of the chain that position p's step-j prediction belongs to (started at p - j).

    Example, j = 1, weight [0.5, 1, 1, 0] -> [0, 0.5, 1, 1]: position 1's second draft belongs to the
    chain started at 0."""
    import torch

    return torch.cat([torch.zeros_like(weight[:, :j]), weight[:, :weight.shape[1] - j]], dim=1) if j else weight


# ---- training ----------------------------------------------------------------------------------


def init_from_target(head, target: Path, target_cfg: dict, top, layer_ids: list[int]):
    """Random decoder layer; fc = "take the highest layer's state"; norm and lm_head from the target.
    Returns the target's embedding (frozen: vLLM shares it with the head)."""
    import torch
    from safetensors import safe_open

    H = target_cfg["hidden_size"]
    with safe_open(str(Path(target) / "model.safetensors"), framework="pt") as st:
        emb = st.get_tensor("model.embed_tokens.weight").float()
        final_norm = st.get_tensor("model.norm.weight").float()
    with torch.no_grad():
        for name in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"):
            torch.nn.init.normal_(getattr(head, name).weight, std=0.02)
        for name in ("o_proj", "down_proj"):  # small, so the residual starts as the fused state
            torch.nn.init.normal_(getattr(head, name).weight, std=0.02 / math.sqrt(2))
        head.fc.weight.zero_()
        head.fc.weight[:, (len(layer_ids) - 1) * H:] = torch.eye(H)
        head.norm.copy_(final_norm)
        head.lm_head.weight.copy_(emb[top])
    return emb


def evaluate(head, emb, seqs, t2d_index, steps: int, batch_tokens: int = 4096) -> dict:
    """Step-0 loss and top-1 agreement per draft step on answer chains, and the simulated acceptance
    of greedy speculative decoding over the answers."""
    import torch

    head.eval()
    rng = random.Random(0)
    right = [0] * steps
    count = [0] * steps
    loss_sum, loss_n = 0.0, 0
    chains: list[list[list[bool]]] = []
    with torch.no_grad():
        for idx in length_batches([len(s["ids"]) for s in seqs], batch_tokens, rng):
            nxt, fused, top_ids, top_logp, weight, first, pad = make_batch(seqs, idx, t2d_index)
            outs = ttt_forward(head, emb[nxt], fused.float(), pad, steps)
            answer = torch.where(weight == 1.0, weight, torch.zeros_like(weight))  # chains starting in the answer
            oks = []
            for j, logits in enumerate(outs):
                scored = (chain_weight(answer, j) > 0) & (weight > 0)  # weight > 0: a label exists at p
                ok = (logits.argmax(-1) == top_ids[..., 0]) & scored  # outside the draft vocabulary: never right
                right[j] += int(ok.sum())
                count[j] += int(scored.sum())
                if j == 0:
                    m = scored & (top_ids[..., 0] >= 0)
                    loss_sum += distill_loss(logits[m], top_ids[m], top_logp[m]).item() * int(m.sum())
                    loss_n += int(m.sum())
                oks.append(ok)
            # per chain start t: correct_j[t] = step-j prediction at position t + j is right
            for r, i in enumerate(idx):
                T = len(seqs[i]["ids"]) - 2
                rows = []
                for t in range(int(first[r]), T):
                    rows.append([bool(oks[j][r, t + j]) if t + j < T else False for j in range(steps)])
                chains.append(rows)
    head.train()
    return {"val_loss_step0": round(loss_sum / max(1, loss_n), 4),
            "val_top1_per_step": [round(r / max(1, c), 4) for r, c in zip(right, count)],
            **simulated_figures(simulate_chains(chains, range(1, steps + 1)))}


def train_eagle3(target: Path, data: Path, out: Path, *, steps: int = 3000, seed: int = 0, draft_vocab: int = 6144,
                 ttt_steps: int = 3, time_budget_s: float = 1500, batch_tokens: int = 4096, lr: float = 5e-4,
                 intermediate: int | None = None, threads: int = 2, progress=print) -> dict:
    """Train on the target pass in `data`; save to `out`. `steps` 0 = as many as fit `time_budget_s`."""
    import torch

    seed_everything(seed, threads=threads)
    started = time.monotonic()
    blob = load_pass(data)
    train, val = partition(blob)
    target_cfg = json.loads((Path(target) / "config.json").read_text())
    layer_ids = blob["meta"]["layer_ids"]
    intermediate = intermediate or target_cfg["intermediate_size"]
    eos = target_cfg["eos_token_id"]
    top, d2t, t2d, coverage = choose_draft_vocab(train, draft_vocab, target_cfg["vocab_size"], eos)
    t2d_index = draft_index(top, target_cfg["vocab_size"])
    progress(f"draft vocabulary: {draft_vocab} tokens cover {coverage:.1%} of the training answers' tokens")

    head = make_head(target_cfg, draft_vocab, intermediate)
    emb = init_from_target(head, target, target_cfg, top, layer_ids)  # the target's embedding: frozen, shared
    n_params = sum(p.numel() for p in head.parameters())
    progress(f"EAGLE-3 head: {n_params / 1e6:.1f}M parameters, reads target layers {layer_ids}; "
             f"{len(train)} training / {len(val)} validation sequences; TTT steps {ttt_steps}")
    opt = torch.optim.AdamW(head.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    schedule = StepSchedule(steps, time_budget_s, lr)

    def batch_loss(idx):
        nxt, fused, top_ids, top_logp, weight, _, pad = make_batch(train, idx, t2d_index)
        chains = [chain_weight(weight, j) for j in range(ttt_steps)]
        masks = [(w > 0) & (weight > 0) & (top_ids[..., 0] >= 0) for w in chains]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            outs = ttt_forward(head, emb[nxt], fused.float(), pad, ttt_steps, masks=masks)
        loss, wsum = 0.0, 0.0
        for j, (logits, m) in enumerate(zip(outs, masks)):
            if m.any():
                per = distill_loss(logits, top_ids[m], top_logp[m], reduce=False)
                loss = loss + STEP_WEIGHT**j * (per * chains[j][m]).sum() / chains[j][m].sum()
                wsum += STEP_WEIGHT**j
        return loss / max(wsum, 1e-9), int(pad.sum())

    done = train_loop(head, opt, schedule, [len(s["ids"]) for s in train], batch_tokens=batch_tokens, seed=seed,
                      batch_loss=batch_loss, desc="eagle3", progress=progress)
    figures = evaluate(head, emb, val, t2d_index, ttt_steps)
    figures |= done.figures() | {"parameters": n_params, "draft_vocab": draft_vocab,
                                 "draft_vocab_coverage": round(coverage, 4)}
    command = (f"python -m specviz.train eagle3 --seed {seed} --draft-vocab {draft_vocab} --ttt-steps {ttt_steps} "
               f"{schedule.command_args()} --batch-tokens {batch_tokens} --lr {lr:g} --threads {threads}"
               + schedule.command_note(done.steps))
    save_eagle3(head, target, target_cfg, Path(out), d2t, t2d, layer_ids, intermediate, figures, blob["meta"],
                seed=seed, history=done.history, command=command)
    print_figures("EAGLE-3 head", figures)
    progress(f"saved to {out} (total {time.monotonic() - started:.0f} s)")
    return figures


# checkpoint tensor (vLLM's llama_eagle3 names) -> the head's parameter
CHECKPOINT_NAMES = {
    "fc.weight": "fc.weight",
    "midlayer.input_layernorm.weight": "input_layernorm",
    "midlayer.hidden_norm.weight": "hidden_norm",
    **{f"midlayer.self_attn.{n}.weight": f"{n}.weight" for n in ("q_proj", "k_proj", "v_proj", "o_proj")},
    "midlayer.post_attention_layernorm.weight": "post_attention_layernorm",
    **{f"midlayer.mlp.{n}.weight": f"{n}.weight" for n in ("gate_proj", "up_proj", "down_proj")},
    "norm.weight": "norm",
    "lm_head.weight": "lm_head.weight",
}


def load_eagle3(folder: Path, target: Path):
    """A saved head, back in the training code: (head in fp32, the target's embedding, target id ->
    draft id index with -1 outside the draft vocabulary); what `evaluate` takes."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file

    cfg = json.loads((Path(folder) / "config.json").read_text())
    target_cfg = json.loads((Path(target) / "config.json").read_text())
    tensors = load_file(str(Path(folder) / "model.safetensors"))
    head = make_head(target_cfg, cfg["draft_vocab_size"], cfg["intermediate_size"])
    with torch.no_grad():
        for name, attr in CHECKPOINT_NAMES.items():
            head.get_parameter(attr).copy_(tensors[name].float())
    with safe_open(str(Path(target) / "model.safetensors"), framework="pt") as st:
        emb = st.get_tensor("model.embed_tokens.weight").float()
    top = tensors["d2t"] + torch.arange(len(tensors["d2t"]))  # d2t holds draft id -> target id offsets
    return head, emb, draft_index(top, target_cfg["vocab_size"])


def save_eagle3(head, target: Path, target_cfg: dict, out: Path, d2t, t2d, layer_ids, intermediate, figures,
                data_meta, *, seed: int, history: list, command: str = "") -> None:
    import torch
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    tensors = {name: head.get_parameter(attr).detach().to(torch.bfloat16).contiguous() for name, attr in CHECKPOINT_NAMES.items()}
    tensors |= {"d2t": d2t.to(torch.long).contiguous(), "t2d": t2d.contiguous()}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    keep = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act",
            "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_theta", "vocab_size",
            "bos_token_id", "eos_token_id", "pad_token_id")
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama"}
    cfg |= {k: target_cfg[k] for k in keep if target_cfg.get(k) is not None}
    cfg |= {"intermediate_size": intermediate, "num_hidden_layers": 1, "attention_bias": False, "mlp_bias": False,
            "tie_word_embeddings": False, "draft_vocab_size": len(d2t), "target_hidden_size": target_cfg["hidden_size"],
            "eagle_aux_hidden_state_layer_ids": layer_ids, "norm_before_residual": False,
            "torch_dtype": "bfloat16", "dtype": "bfloat16"}
    write_json(out / "config.json", cfg)
    copy_tokenizer(target, out)
    write_json(out / "training.json", {"kind": "eagle3", "target": short_model_name(target), "seed": seed, "command": command,
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
