"""The target's pass over the training data: what both drafters learn from.

One forward pass of the target (transformers, bfloat16 as vLLM serves it) over every prompt + answer
of the on-policy data keeps, at every position p of a sequence of T tokens:

- `hidden` [T, 3H] bf16: the hidden states after the EAGLE-3 layers (2, 15, 27 of SmolLM2's 30),
  concatenated; what vLLM hands an EAGLE-3 head.
- `top_ids` [T, K] int32 and `top_logp` [T, K] fp16: the target's K most likely next tokens after
  x_0..x_p and their log-probabilities. `top_ids[p, 0]` is the target's greedy choice, i.e. the
  label of a drafter predicting x_{p+1}; the K-best are the soft labels of distillation.

Labels at prompt positions come for free this way (the target's greedy choice after each prompt
prefix), which about doubles what one generated answer teaches. On answer positions the greedy
choice is the answer's next token, up to near-ties that round differently here and in vLLM;
`greedy_agreement` in the meta says how often (a check that the pass is right).

The pass is split in validation sequences (done first, so a time budget never starves them) and
training sequences, and saved as flat tensors with per-sequence offsets:
`{"meta", "seqs": [{"ids", "plen", "val", "start"}], "hidden", "top_ids", "top_logp"}`.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from .common import length_batches
from .data import DataError, load_samples, split

MAX_LEN = 512
TOP_K = 8


def aux_layer_ids(num_layers: int) -> list[int]:
    """vLLM's Llama default for EAGLE-3: a low, a middle and a high layer (2, L // 2, L - 3)."""
    return [2, num_layers // 2, num_layers - 3]


def target_pass(target: Path, data: Path, out: Path, *, time_budget_s: float = 900, batch_tokens: int = 4096,
                val_fraction: float = 0.05, seed: int = 0, append: bool = False, progress=print) -> dict:
    """Run the target over the on-policy data in `data`; save hidden states and top-K to `out`.

    With `append`, `out` is an earlier pass over part of `data`: only the samples it lacks are run,
    all as training sequences (the validation split stays the earlier one, so figures compare across
    runs), minus those whose prompt is a validation prompt (e.g. a sampled second answer to it).
    Example: a pass over 4622 greedy answers + `data --append --temperature 0.8` on 2318 chat prompts
    -> 2318 new sequences less the ~115 with a validation prompt.
    """
    import json

    import torch
    from tqdm import tqdm
    from transformers import LlamaForCausalLM

    meta, samples = load_samples(data)
    old = None
    if append:
        old = load_pass(out)
        have = {tuple(s["ids"]) for s in old["seqs"]}
        val_prompts = {tuple(s["ids"][:s["plen"]]) for s in old["seqs"] if s["val"]}
        train_s = [s for s in samples if tuple((s["prompt_ids"] + s["output_ids"])[:MAX_LEN]) not in have
                   and tuple(s["prompt_ids"][:MAX_LEN]) not in val_prompts]
        val_s = []
        if not train_s:
            raise DataError(f"{data} has no sample that {out} lacks; add some with `python -m specviz.train data --append`")
    else:
        train_s, val_s = split(samples, val_fraction=val_fraction, seed=seed)
    cfg = json.loads((Path(target) / "config.json").read_text())
    layer_ids = aux_layer_ids(cfg["num_hidden_layers"])
    if old is not None and old["meta"]["layer_ids"] != layer_ids:
        raise DataError(f"{out} was made with layers {old['meta']['layer_ids']}, this target uses {layer_ids}; "
                        "make a new pass without --append")
    model = LlamaForCausalLM.from_pretrained(str(target), dtype=torch.bfloat16)
    model.eval()
    captured: dict[int, torch.Tensor] = {}
    hooks = [model.model.layers[i - 1].register_forward_hook(
        lambda mod, inp, out, i=i: captured.__setitem__(i, out[0] if isinstance(out, tuple) else out))
        for i in layer_ids]
    seqs: list[dict] = []
    hidden, top_ids, top_logp = [], [], []
    started = time.monotonic()
    agree = answer_positions = 0
    offset = int(old["hidden"].shape[0]) if old is not None else 0
    bar = tqdm(total=len(train_s) + len(val_s), desc="target pass", unit="seq")
    rng = random.Random(seed)
    with torch.no_grad():
        for part, part_samples in ((True, val_s), (False, train_s)):  # validation first
            all_toks = [(s["prompt_ids"] + s["output_ids"])[:MAX_LEN] for s in part_samples]
            for batch in length_batches([len(t) for t in all_toks], batch_tokens, rng):
                rows = [part_samples[b] for b in batch]
                toks = [all_toks[b] for b in batch]
                n = max(len(t) for t in toks)
                ids = torch.zeros((len(toks), n), dtype=torch.long)
                mask = torch.zeros((len(toks), n), dtype=torch.long)
                for r, t in enumerate(toks):
                    ids[r, :len(t)] = torch.tensor(t)
                    mask[r, :len(t)] = 1
                logits = model(input_ids=ids, attention_mask=mask).logits
                fused = torch.cat([captured[i] for i in layer_ids], dim=-1).to(torch.bfloat16)
                for r, (s, t) in enumerate(zip(rows, toks)):
                    T = len(t)
                    logp = torch.log_softmax(logits[r, :T].float(), dim=-1)
                    lp, ti = logp.topk(TOP_K, dim=-1)
                    plen = min(len(s["prompt_ids"]), T)
                    answer = torch.tensor(t[plen:])
                    agree += int((ti[plen - 1:T - 1, 0] == answer).sum()) if plen < T else 0
                    answer_positions += max(0, T - plen)
                    seqs.append({"ids": t, "plen": plen, "val": part, "start": offset})
                    offset += T
                    hidden.append(fused[r, :T].clone())
                    top_ids.append(ti.to(torch.int32))
                    top_logp.append(lp.to(torch.float16))
                bar.update(len(rows))
                if not part and time.monotonic() - started > time_budget_s:
                    progress(f"time budget of {time_budget_s:.0f} s reached after {len(seqs)} sequences")
                    break
    bar.close()
    for h in hooks:
        h.remove()
    if not any(not s["val"] for s in seqs):
        raise DataError(f"the target pass covered no training sequence in {time_budget_s:.0f} s; raise --time-budget-s")
    elapsed = time.monotonic() - started
    n_tokens = sum(len(s["ids"]) for s in seqs)
    part_meta = {"data": meta, "layer_ids": layer_ids, "top_k": TOP_K, "sequences": len(seqs),
                 "val_sequences": sum(s["val"] for s in seqs), "tokens": n_tokens,
                 "train_answer_tokens": sum(len(s["ids"]) - s["plen"] for s in seqs if not s["val"]),
                 "pass_s": round(elapsed, 1), "tokens_per_s": round(n_tokens / elapsed, 1),
                 "greedy_agreement": round(agree / max(1, answer_positions), 4)}
    blob = {"meta": part_meta, "seqs": seqs, "hidden": torch.cat(hidden), "top_ids": torch.cat(top_ids),
            "top_logp": torch.cat(top_logp)}
    if old is not None:
        blob = _joined(old, blob)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    torch.save(blob, out)
    return blob["meta"]


def _joined(old: dict, new: dict) -> dict:
    """One pass from an earlier pass and an appended one (whose offsets already start after it).

    Example: 4622 sequences / 861k tokens + 2203 / 410k -> 6825 / 1.27M; meta {"parts": [m1, m2], ...}."""
    import torch

    # greedy_agreement checks the pass against vLLM only on greedy answers (the first part's); a
    # sampled answer departs from the target's greedy choice by design
    parts = [{k: v for k, v in m.items() if k != "data"} for m in (*old["meta"].get("parts", [old["meta"]]), new["meta"])]
    seqs = old["seqs"] + new["seqs"]
    meta = {"data": new["meta"]["data"], "parts": parts, "layer_ids": new["meta"]["layer_ids"],
            "top_k": TOP_K, "sequences": len(seqs), "val_sequences": sum(s["val"] for s in seqs),
            "tokens": sum(p["tokens"] for p in parts),
            "train_answer_tokens": sum(p["train_answer_tokens"] for p in parts),
            "pass_s": round(sum(p["pass_s"] for p in parts), 1), "greedy_agreement": parts[0]["greedy_agreement"]}
    return {"meta": meta, "seqs": seqs, **{k: torch.cat([old[k], new[k]]) for k in ("hidden", "top_ids", "top_logp")}}


def load_pass(path: Path) -> dict:
    import torch

    if not Path(path).is_file():
        raise DataError(f"no target pass at {path}; make it with `python -m specviz.train targets` "
                        "(after `python -m specviz.train data`)")
    blob = torch.load(path, weights_only=False)
    if not isinstance(blob, dict) or not {"meta", "seqs", "hidden", "top_ids", "top_logp"} <= set(blob):
        raise DataError(f"{path} is not a target pass written by `python -m specviz.train targets`")
    return blob


def sequence(blob: dict, i: int) -> dict:
    """Sequence i of a pass with its own slices: ids, plen, hidden [T, 3H], top_ids / top_logp [T, K]."""
    s = blob["seqs"][i]
    a, b = s["start"], s["start"] + len(s["ids"])
    return {"ids": s["ids"], "plen": s["plen"], "hidden": blob["hidden"][a:b], "top_ids": blob["top_ids"][a:b],
            "top_logp": blob["top_logp"][a:b]}


def partition(blob: dict) -> tuple[list[dict], list[dict]]:
    """(training sequences, validation sequences) of a pass."""
    train, val = [], []
    for i, s in enumerate(blob["seqs"]):
        (val if s["val"] else train).append(sequence(blob, i))
    return train, val


def distill_loss(logits, top_ids, top_logp, hard_weight: float = 0.5, reduce: bool = True):
    """Cross-entropy against the target's greedy choice and against its top-K distribution.

    logits [N, V] over the drafter's vocabulary; top_ids [N, K] the target's K best tokens as drafter
    ids (-1 where the drafter's vocabulary lacks one; column 0 must be valid); top_logp [N, K].
    Worked example, K = 2: the target says 0.6 "cat", 0.3 "dog"; the soft label is renormalised over
    the K kept tokens: 2/3 cat, 1/3 dog; loss = 0.5 * -log q(cat) + 0.5 * (2/3 * -log q(cat) + 1/3 * -log q(dog)).
    """
    import torch

    logq = torch.log_softmax(logits.float(), dim=-1)
    ok = top_ids >= 0
    p = top_logp.float().exp() * ok
    p = p / p.sum(-1, keepdim=True)
    picked = logq.gather(1, top_ids.clamp_min(0).long())
    soft = -(p * picked).sum(-1)
    hard = -picked[:, 0]
    loss = hard_weight * hard + (1 - hard_weight) * soft
    return loss.mean() if reduce else loss
