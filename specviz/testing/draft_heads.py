"""Tiny drafter checkpoints for vLLM's EAGLE-style methods, built for a given target folder.

    from specviz.testing.draft_heads import build_eagle_head, build_eagle3_head
    from specviz.demo_model import ensure_demo_model
    from specviz.testing.tiny_models import build_tiny_llama
    target = build_tiny_llama(tmp / "tiny-llama-2L", num_hidden_layers=2, tokenizer_from=ensure_demo_model())
    head = build_eagle3_head(tmp / "eagle3-head", target)
    # serve `target` with --dtype float32 and
    # --speculative-config '{"method": "eagle3", "model": "<head>", "num_speculative_tokens": 3}'

Each builder reads the target's config.json and (where needed) its embedding and lm_head, and
writes a folder in the layout vLLM 0.32's loader expects (config.json + model.safetensors; no
tokenizer: vLLM gives a drafter the target's). Nothing is downloaded; a build takes seconds and
the same arguments always give the same weights.

The heads are not trained, but they are not pure noise either. The layers' weights are random
and weak (as in specviz.testing.tiny_models) and one path is laid out by hand so that the head predicts
"what the target's lm_head says after the *input token's own embedding*":

- EAGLE (`llama_eagle.py`): `fc` passes the token embedding through and ignores the target's
  hidden state; there is no final norm, so the shared lm_head sees that embedding.
- EAGLE-3 (`llama_eagle3.py`): the hidden-state path is switched off (`norm_before_residual` with
  a zero `hidden_norm`), every attention head attends to its own position (queries equal keys,
  scaled up) and its value is a fixed 64-dimensional projection of the token embedding; the
  head's own lm_head is the target's lm_head seen through the same projection.
- Medusa (`medusa.py`): identity residual blocks on the target's last hidden state and copies
  of the target's lm_head, so every Medusa head proposes the target's own next token again
  (almost always rejected: the point is to see Medusa run, not to speed anything up).
- DFlash (`qwen3_dflash.py`): random weights only; the target accepts next to nothing.

On a specviz tiny target (specviz.testing.tiny_models) the target's next token after x is decided by x
alone, so the EAGLE and EAGLE-3 heads agree with the target; `error_rate` then corrupts that
share of the vocabulary (shuffled embedding rows for EAGLE, shuffled lm_head rows for EAGLE-3), so
the target both accepts and rejects drafts. On a real target (SmolLM2) the heads propose
plausible-looking but mostly wrong tokens: fine for seeing the machinery run, useless for speed.

`LastTokenLookupProposer` is a drafter for vLLM's `custom_class` method (no checkpoint):
    --speculative-config '{"method": "custom_class", "model": "specviz.testing.draft_heads.LastTokenLookupProposer",
                           "num_speculative_tokens": 3}'
It proposes the tokens that followed the previous occurrence of the last token (n-gram lookup
with n = 1), in plain numpy. The EngineCore process must be able to import specviz (specviz's
LocalServer puts the repo on PYTHONPATH).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..config import short_model_name
from .tiny_models import LAYER_GAIN

DRAFT_LAYER_GAIN = 0.3 * LAYER_GAIN  # the random layers are weak: the hand-laid path decides
ATTENTION_SHARPNESS = 2.0  # queries = keys = this x the value projection: attention is one-hot on itself
DEFAULT_ERROR_RATE = 0.2


# ---- reading the target ------------------------------------------------------------------------


def _target_config(target: Path) -> dict:
    """The target's config.json (a decoder-only language model: Llama and the like)."""
    path = Path(target) / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise FileNotFoundError(f"cannot read {path} ({e}): pass a Hugging Face model folder as target") from e
    missing = [k for k in ("hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size") if k not in config]
    if missing:
        raise ValueError(f"{path} lacks {', '.join(missing)}: not a decoder-only language model config")
    return config


def _head_dims(config: dict) -> tuple[int, int, int]:
    """(num_attention_heads, num_key_value_heads, head_dim) of the target."""
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    return heads, kv_heads, head_dim


def _target_tensors(target: Path, names: tuple[str, ...]) -> dict:
    """Float32 copies of the named target tensors (tied lm_head -> the embedding)."""
    import torch
    from safetensors import safe_open

    target = Path(target)
    files = sorted(target.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{target} has no *.safetensors weights")
    found: dict = {}
    for f in files:
        with safe_open(str(f), framework="pt") as st:
            keys = set(st.keys())
            for name in names:
                if name in keys and name not in found:
                    found[name] = st.get_tensor(name).to(torch.float32)
    if "lm_head.weight" in names and "lm_head.weight" not in found:
        if "model.embed_tokens.weight" not in found:
            found |= _target_tensors(target, ("model.embed_tokens.weight",))
        found["lm_head.weight"] = found["model.embed_tokens.weight"]  # tie_word_embeddings
    missing = [n for n in names if n not in found]
    if missing:
        raise ValueError(f"{target} has no {', '.join(missing)}")
    return found


def _save_dtype(config: dict):
    import torch

    name = str(config.get("torch_dtype") or config.get("dtype") or "float32")
    return {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(name, torch.float32)


def _write(dest: Path, config: dict, tensors: dict, dtype) -> Path:
    from safetensors.torch import save_file

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    save_file({k: v.to(dtype).contiguous() for k, v in tensors.items()}, str(dest / "model.safetensors"),
              metadata={"format": "pt"})
    (dest / "model.safetensors").chmod(0o644)
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return dest


def _llama_like_config(config: dict, **changes) -> dict:
    """A one-layer Llama config with the target's widths, rope and special tokens."""
    keep = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "hidden_act", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_parameters",
            "rope_scaling", "vocab_size", "bos_token_id", "eos_token_id", "pad_token_id")
    out = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    out |= {k: config[k] for k in keep if config.get(k) is not None}
    heads, kv_heads, head_dim = _head_dims(config)
    out |= {"num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
            "intermediate_size": config.get("intermediate_size") or 4 * config["hidden_size"],
            "num_hidden_layers": 1, "attention_bias": False, "mlp_bias": False,
            "tie_word_embeddings": False, "torch_dtype": str(_save_dtype(config)).removeprefix("torch.")}
    return out | changes


def _random(g, *shape, fan_in: int, gain: float = DRAFT_LAYER_GAIN):
    import torch

    return torch.randn(*shape, generator=g) * (gain / fan_in**0.5)


def _shuffle_rows(matrix, rate: float, g):
    """A copy of `matrix` whose nonzero rows, a `rate` share of them chosen at random, trade places."""
    import torch

    out = matrix.clone()
    if rate <= 0:
        return out
    rows = torch.nonzero(matrix.any(dim=1)).flatten()
    rows = rows[torch.randperm(len(rows), generator=g)]
    picked = rows[: round(rate * len(rows))]
    out[picked] = matrix[picked.roll(1)]
    return out


def _meta(kind: str, target: Path, seed: int, **extra) -> dict:
    return {"specviz_drafter": {"kind": kind, "target": short_model_name(target), "seed": seed, **extra}}


# ---- EAGLE (EAGLE-1) ---------------------------------------------------------------------------


def build_eagle_head(dest: Path, target: Path, *, seed: int = 0, error_rate: float = DEFAULT_ERROR_RATE) -> Path:
    """Write an EAGLE head for `target` (vLLM's EagleLlamaForCausalLM) into `dest`; return it.

    Layout (as yuhuili/EAGLE-LLaMA3-Instruct-8B): `fc.weight` [H, 2H] and one decoder layer
    `layers.0.*` without input_layernorm; no lm_head (vLLM shares the target's). With
    `error_rate` > 0 the head ships its own `embed_tokens`: the target's, with that share of rows
    shuffled; with 0 it shares the target's embedding too.
    """
    import torch

    config = _target_config(target)
    hidden, inter = config["hidden_size"], config.get("intermediate_size") or 4 * config["hidden_size"]
    heads, kv_heads, head_dim = _head_dims(config)
    g = torch.Generator().manual_seed(seed)
    tensors = {
        # cat(token embedding, target hidden state) -> the token embedding
        "fc.weight": torch.cat([torch.eye(hidden), torch.zeros(hidden, hidden)], dim=1),
        "layers.0.self_attn.q_proj.weight": _random(g, heads * head_dim, hidden, fan_in=hidden),
        "layers.0.self_attn.k_proj.weight": _random(g, kv_heads * head_dim, hidden, fan_in=hidden),
        "layers.0.self_attn.v_proj.weight": _random(g, kv_heads * head_dim, hidden, fan_in=hidden),
        "layers.0.self_attn.o_proj.weight": _random(g, hidden, heads * head_dim, fan_in=heads * head_dim),
        "layers.0.post_attention_layernorm.weight": torch.ones(hidden),
        "layers.0.mlp.gate_proj.weight": _random(g, inter, hidden, fan_in=hidden),
        "layers.0.mlp.up_proj.weight": _random(g, inter, hidden, fan_in=hidden),
        "layers.0.mlp.down_proj.weight": _random(g, hidden, inter, fan_in=inter),
    }
    if error_rate > 0:
        embed = _target_tensors(target, ("model.embed_tokens.weight",))["model.embed_tokens.weight"]
        tensors["embed_tokens.weight"] = _shuffle_rows(embed, error_rate, g)
    out = _llama_like_config(config) | _meta("eagle", target, seed, error_rate=error_rate)
    return _write(dest, out, tensors, _save_dtype(config))


# ---- EAGLE-3 -----------------------------------------------------------------------------------


def default_aux_layer_ids(num_target_layers: int) -> list[int]:
    """Which target hidden states an EAGLE-3 head reads (0 = embeddings, i = after layer i-1).

    vLLM's Llama default (2, L // 2, L - 3) only makes sense for L >= 6; shallower targets (the
    tiny ones) get the last up-to-three states instead.
    """
    n = num_target_layers
    if n >= 6:
        return [2, n // 2, n - 3]
    return list(range(max(0, n - 2), n + 1))


def build_eagle3_head(dest: Path, target: Path, *, seed: int = 0, error_rate: float = DEFAULT_ERROR_RATE,
                      aux_layer_ids: list[int] | None = None) -> Path:
    """Write an EAGLE-3 head for `target` (vLLM's Eagle3LlamaForCausalLM) into `dest`; return it.

    Layout (as yuhuili/EAGLE3-LLaMA3.1-Instruct-8B): `midlayer.*` (q/k/v read 2H: the normed
    token embedding and the normed hidden state), `fc.weight` [H, n_aux * H], `norm.weight`,
    `lm_head.weight`; no embed_tokens (vLLM shares the target's). config.json names the target
    layers the head reads in `eagle_aux_hidden_state_layer_ids` (see default_aux_layer_ids),
    which a target with fewer than 6 layers needs.
    """
    import torch

    config = _target_config(target)
    hidden, inter = config["hidden_size"], config.get("intermediate_size") or 4 * config["hidden_size"]
    heads, kv_heads, head_dim = _head_dims(config)
    layer_ids = list(aux_layer_ids) if aux_layer_ids is not None else default_aux_layer_ids(config["num_hidden_layers"])
    g = torch.Generator().manual_seed(seed)

    # P: head_dim orthonormal directions of the hidden space; every head's value is P @ embedding.
    proj = torch.linalg.qr(torch.randn(hidden, head_dim, generator=g))[0].T  # [head_dim, hidden]
    zeros = torch.zeros(head_dim, hidden)  # the hidden-state half of the input is ignored
    qk = torch.cat([ATTENTION_SHARPNESS * proj, zeros], dim=1)
    v = torch.cat([proj, zeros], dim=1)
    o = torch.cat([proj.T] * heads, dim=1) / heads  # average the (equal) heads, back to the hidden space
    lm_head = _target_tensors(target, ("lm_head.weight",))["lm_head.weight"]
    seen = lm_head @ proj.T @ proj  # the target's lm_head rows as the head sees them
    norms = seen.norm(dim=1, keepdim=True)
    own_head = torch.where(norms > 0, seen / norms.clamp_min(1e-12) * lm_head.norm(dim=1, keepdim=True), seen)
    tensors = {
        "midlayer.input_layernorm.weight": torch.ones(hidden),
        "midlayer.hidden_norm.weight": torch.zeros(hidden),  # with norm_before_residual: no hidden-state path
        "midlayer.self_attn.q_proj.weight": qk.repeat(heads, 1),
        "midlayer.self_attn.k_proj.weight": qk.repeat(kv_heads, 1),
        "midlayer.self_attn.v_proj.weight": v.repeat(kv_heads, 1),
        "midlayer.self_attn.o_proj.weight": o,
        "midlayer.post_attention_layernorm.weight": torch.ones(hidden),
        "midlayer.mlp.gate_proj.weight": _random(g, inter, hidden, fan_in=hidden),
        "midlayer.mlp.up_proj.weight": _random(g, inter, hidden, fan_in=hidden),
        "midlayer.mlp.down_proj.weight": _random(g, hidden, inter, fan_in=inter),
        "fc.weight": _random(g, hidden, len(layer_ids) * hidden, fan_in=len(layer_ids) * hidden),
        "norm.weight": torch.ones(hidden),
        "lm_head.weight": _shuffle_rows(own_head, error_rate, g),
    }
    out = _llama_like_config(config, eagle_aux_hidden_state_layer_ids=layer_ids, norm_before_residual=True,
                             draft_vocab_size=config["vocab_size"], target_hidden_size=hidden)
    out |= _meta("eagle3", target, seed, error_rate=error_rate)
    return _write(dest, out, tensors, _save_dtype(config))


# ---- Medusa ------------------------------------------------------------------------------------


def build_medusa_head(dest: Path, target: Path, *, num_heads: int = 3, seed: int = 0) -> Path:
    """Write Medusa heads for `target` (vLLM's Medusa, config model_type "medusa") into `dest`.

    `num_heads` must equal the num_speculative_tokens it is served with. Each head is one
    residual block x + SiLU(W x) with W = 0 (so it passes the target's last hidden state on) and
    a copy of the target's lm_head: every head proposes the token the target itself will pick
    next, so for a target whose output does not repeat a token most drafts are rejected.
    """
    import torch

    config = _target_config(target)
    hidden = config["hidden_size"]
    lm_head = _target_tensors(target, ("lm_head.weight",))["lm_head.weight"]
    tensors = {}
    for h in range(num_heads):
        tensors[f"blocks.{h}.layers.0.weight"] = torch.zeros(hidden, hidden)
        tensors[f"lm_heads.{h}.weight"] = lm_head.clone()
    out = {"architectures": ["MedusaModel"], "model_type": "medusa", "hidden_size": hidden,
           "vocab_size": config["vocab_size"], "num_heads": num_heads, "num_hidden_layers": 1,
           "truncated_vocab_size": config["vocab_size"], "torch_dtype": str(_save_dtype(config)).removeprefix("torch.")}
    out |= _meta("medusa", target, seed)
    return _write(dest, out, tensors, _save_dtype(config))


# ---- DFlash --------------------------------------------------------------------------------------


def build_dflash_head(dest: Path, target: Path, *, seed: int = 0, mask_token_id: int = 0,
                      target_layer_ids: list[int] | None = None) -> Path:
    """Write a random-weight one-layer DFlash draft for `target` (vLLM's DFlashQwen3ForCausalLM).

    Layout (as z-lab's Qwen3 DFlash drafts): config architectures ["DFlashDraftModel"] with
    model_type "qwen3" and `dflash_config` {mask_token_id, target_layer_ids}; weights
    `layers.0.*` (Qwen3: q_norm/k_norm per head), `fc.weight` [H, n * H] over the target's hidden
    states, `hidden_norm.weight`, `norm.weight`; embedding and lm_head are shared with the target.
    DFlash drafts a whole block in one non-causal pass; this head is plain noise (no hand-laid
    path: one linear map cannot give every block position its own successor), so the target
    accepts next to nothing. DFlash's `target_layer_ids` count "after layer i" (vLLM adds 1).
    """
    import torch

    config = _target_config(target)
    hidden, inter = config["hidden_size"], config.get("intermediate_size") or 4 * config["hidden_size"]
    heads, kv_heads, head_dim = _head_dims(config)
    if target_layer_ids is None:
        target_layer_ids = sorted({max(0, i - 1) for i in default_aux_layer_ids(config["num_hidden_layers"])})
    g = torch.Generator().manual_seed(seed)
    p = "layers.0."
    tensors = {
        p + "input_layernorm.weight": torch.ones(hidden),
        p + "post_attention_layernorm.weight": torch.ones(hidden),
        p + "self_attn.q_proj.weight": _random(g, heads * head_dim, hidden, fan_in=hidden, gain=1.0),
        p + "self_attn.k_proj.weight": _random(g, kv_heads * head_dim, hidden, fan_in=hidden, gain=1.0),
        p + "self_attn.v_proj.weight": _random(g, kv_heads * head_dim, hidden, fan_in=hidden, gain=1.0),
        p + "self_attn.o_proj.weight": _random(g, hidden, heads * head_dim, fan_in=heads * head_dim, gain=1.0),
        p + "self_attn.q_norm.weight": torch.ones(head_dim),
        p + "self_attn.k_norm.weight": torch.ones(head_dim),
        p + "mlp.gate_proj.weight": _random(g, inter, hidden, fan_in=hidden, gain=1.0),
        p + "mlp.up_proj.weight": _random(g, inter, hidden, fan_in=hidden, gain=1.0),
        p + "mlp.down_proj.weight": _random(g, hidden, inter, fan_in=inter, gain=1.0),
        "fc.weight": _random(g, hidden, len(target_layer_ids) * hidden, fan_in=len(target_layer_ids) * hidden,
                             gain=1.0),
        "hidden_norm.weight": torch.ones(hidden),
        "norm.weight": torch.ones(hidden),
    }
    out = {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3",
        "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": 1,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
        "hidden_act": config.get("hidden_act", "silu"), "rms_norm_eps": config.get("rms_norm_eps", 1e-6),
        "vocab_size": config["vocab_size"], "max_position_embeddings": config.get("max_position_embeddings", 2048),
        "rope_theta": float(config.get("rope_theta") or (config.get("rope_parameters") or {}).get("rope_theta", 1e4)),
        "tie_word_embeddings": False, "torch_dtype": str(_save_dtype(config)).removeprefix("torch."),
        "dflash_config": {"mask_token_id": mask_token_id, "target_layer_ids": list(target_layer_ids)},
    }
    out |= _meta("dflash", target, seed)
    return _write(dest, out, tensors, _save_dtype(config))


# ---- custom_class ------------------------------------------------------------------------------


class LastTokenLookupProposer:
    """A proposer for vLLM's `custom_class` method: n-gram lookup with n = 1, in numpy.

    For each request it finds the previous occurrence of the last token and proposes the (up to
    num_speculative_tokens) tokens that followed it there; nothing if the last token is new.
    vLLM builds it with the VllmConfig and calls propose(...) after every step.
    """

    def __init__(self, vllm_config) -> None:
        spec = vllm_config.speculative_config
        self.k = spec.num_speculative_tokens
        self.max_model_len = vllm_config.model_config.max_model_len

    def propose(self, sampled_token_ids, num_tokens_no_spec, token_ids_cpu, slot_mappings=None) -> list[list[int]]:
        import numpy as np

        drafts: list[list[int]] = []
        for i, sampled in enumerate(sampled_token_ids):
            n = int(num_tokens_no_spec[i])
            if not len(sampled) or n < 2 or n >= self.max_model_len:
                drafts.append([])
                continue
            tokens = token_ids_cpu[i, :n]
            earlier = np.flatnonzero(tokens[:-1] == tokens[-1])
            if not len(earlier):
                drafts.append([])
                continue
            start = int(earlier[-1]) + 1
            drafts.append(tokens[start:min(start + self.k, n)].tolist())
        return drafts

    def load_model(self, *args, **kwargs) -> None:
        """No model to load (vLLM's CPU runner calls this on every drafter)."""
