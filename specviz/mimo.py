"""A Llama checkpoint rewritten in the MiMo layout, so vLLM's native MTP (`"method": "mtp"`) can serve it.

vLLM 0.32 runs native MTP only for targets whose checkpoint holds MTP layers. The smallest such
architecture is Xiaomi's MiMo (`MiMoForCausalLM`): a Qwen2 decoder plus `num_nextn_predict_layers`
MTP layers under `model.mtp_layers.{i}.`. A Llama with head size hidden/heads is a Qwen2 whose q/k/v
biases are zero, so the same weights give the same greedy output in either layout; the MiMo form
adds one MTP layer. vLLM turns the draft into `MiMoMTPModel` by itself
(vllm/config/speculative.py); no custom code, no trust_remote_code.

What vLLM computes with the layer (vllm/model_executor/models/mimo_mtp.py), at position p with
h_p the target's last hidden state *before* its final norm and t_{p+1} the next token:

    e   = token_layernorm(embed(t_{p+1}))          (embed zeroed at position 0)
    x   = input_proj(cat[hidden_layernorm(h_p), e])  ([H, 2H], hidden state first)
    out = final_layernorm(x + decoder_layer(x))       -> the target's (shared) lm_head -> t_{p+2}

For k > 1 vLLM feeds `out` back in as the hidden state and runs the same layer again.

    config = mimo_config(llama_config)                     # the config.json dict
    tensors = mimo_tensors(llama_tensors, llama_config) | random_mtp_layer(llama_config, seed=0)
"""

from __future__ import annotations

from typing import Any

from .base import SpecvizError

MTP_PREFIX = "model.mtp_layers.0."
# The std of a random layer's weights is MTP_INIT_GAIN / sqrt(fan_in): weak, like specviz's tiny models.
MTP_INIT_GAIN = 0.5
# Keys of a Llama config.json that carry over unchanged.
_KEPT = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
         "num_key_value_heads", "hidden_act", "max_position_embeddings", "rms_norm_eps", "initializer_range",
         "bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "attention_dropout", "use_cache")


class MimoFormError(SpecvizError, ValueError):
    """The Llama checkpoint cannot be written as a MiMo; the message says why."""


def rope_theta(config: dict[str, Any]) -> float:
    """The rope base of a config that keeps it at top level or in rope_parameters (transformers 5)."""
    theta = config.get("rope_theta") or (config.get("rope_parameters") or {}).get("rope_theta")
    return float(theta or 10000.0)


def mimo_config(llama: dict[str, Any], *, num_mtp_layers: int = 1, **extra: Any) -> dict[str, Any]:
    """The config.json of the MiMo form of a Llama config.json dict.

    Qwen2 in vLLM derives the head size as hidden_size / num_attention_heads, so a Llama whose
    head_dim differs cannot be rewritten (SmolLM2-135M: 576 / 9 = 64 = its head_dim).
    """
    heads, hidden = llama["num_attention_heads"], llama["hidden_size"]
    head_dim = llama.get("head_dim") or hidden // heads
    if hidden % heads or head_dim != hidden // heads:
        raise MimoFormError(f"head_dim {head_dim} is not hidden_size / num_attention_heads ({hidden} / {heads}): "
                            f"vLLM's Qwen2 (which MiMo builds on) assumes it is")
    if llama.get("attention_bias") or llama.get("mlp_bias"):
        raise MimoFormError("a Llama with attention_bias or mlp_bias has no MiMo form here (Qwen2 has q/k/v "
                            "biases only)")
    theta = rope_theta(llama)
    out = {"architectures": ["MiMoForCausalLM"], "model_type": "qwen2"}
    out |= {k: llama[k] for k in _KEPT if llama.get(k) is not None}
    out |= {
        "rope_theta": theta, "rope_parameters": {"rope_theta": theta, "rope_type": "default"},
        "tie_word_embeddings": bool(llama.get("tie_word_embeddings", False)),
        "max_window_layers": llama["num_hidden_layers"], "use_sliding_window": False, "sliding_window": None,
        "num_nextn_predict_layers": num_mtp_layers,
        "torch_dtype": llama.get("torch_dtype") or llama.get("dtype") or "float32",
    }
    return out | extra


def mimo_tensors(llama_tensors: dict, llama: dict[str, Any]) -> dict:
    """The Llama's tensors plus the zero q/k/v biases a Qwen2 layer has (same outputs)."""
    import torch

    heads, kv_heads, hidden = llama["num_attention_heads"], llama["num_key_value_heads"], llama["hidden_size"]
    head_dim = hidden // heads
    out = dict(llama_tensors)
    dtype = llama_tensors["model.embed_tokens.weight"].dtype
    for i in range(llama["num_hidden_layers"]):
        p = f"model.layers.{i}.self_attn."
        if p + "q_proj.weight" not in out:
            raise MimoFormError(f"the checkpoint has no {p}q_proj.weight: not a {llama['num_hidden_layers']}-layer "
                                f"Llama")
        out[p + "q_proj.bias"] = torch.zeros(heads * head_dim, dtype=dtype)
        out[p + "k_proj.bias"] = torch.zeros(kv_heads * head_dim, dtype=dtype)
        out[p + "v_proj.bias"] = torch.zeros(kv_heads * head_dim, dtype=dtype)
    return out


def random_mtp_layer(llama: dict[str, Any], *, seed: int = 0, gain: float = MTP_INIT_GAIN) -> dict:
    """An untrained MTP layer: unit norms, random weak linear maps (the same seed, the same weights)."""
    import torch

    hidden, inter = llama["hidden_size"], llama["intermediate_size"]
    heads, kv_heads = llama["num_attention_heads"], llama["num_key_value_heads"]
    head_dim = hidden // heads
    g = torch.Generator().manual_seed(seed)

    def linear(out_features: int, in_features: int):
        return torch.randn(out_features, in_features, generator=g) * (gain / in_features**0.5)

    return _layer(hidden, {
        "input_proj.weight": linear(hidden, 2 * hidden),
        "self_attn.q_proj.weight": linear(heads * head_dim, hidden),
        "self_attn.k_proj.weight": linear(kv_heads * head_dim, hidden),
        "self_attn.v_proj.weight": linear(kv_heads * head_dim, hidden),
        "self_attn.o_proj.weight": linear(hidden, heads * head_dim),
        "mlp.gate_proj.weight": linear(inter, hidden),
        "mlp.up_proj.weight": linear(inter, hidden),
        "mlp.down_proj.weight": linear(hidden, inter),
    }, heads * head_dim, kv_heads * head_dim)


def token_passing_mtp_layer(llama: dict[str, Any]) -> dict:
    """An MTP layer that passes the next token's embedding through unchanged.

    input_proj = [0 | I] ignores the hidden state and keeps the (normed) embedding of t_{p+1};
    o_proj and down_proj are zero, so the decoder layer adds nothing; final_layernorm only rescales.
    The shared lm_head then sees embed(t_{p+1}), which on a specviz tiny target
    (specviz.testing.tiny_models: the next token after x is decided by x's embedding) is exactly
    what the target itself predicts after t_{p+1}: every draft is accepted, at every k.
    """
    import torch

    hidden, inter = llama["hidden_size"], llama["intermediate_size"]
    heads, kv_heads = llama["num_attention_heads"], llama["num_key_value_heads"]
    head_dim = hidden // heads
    return _layer(hidden, {
        "input_proj.weight": torch.cat([torch.zeros(hidden, hidden), torch.eye(hidden)], dim=1),
        "self_attn.q_proj.weight": torch.zeros(heads * head_dim, hidden),
        "self_attn.k_proj.weight": torch.zeros(kv_heads * head_dim, hidden),
        "self_attn.v_proj.weight": torch.zeros(kv_heads * head_dim, hidden),
        "self_attn.o_proj.weight": torch.zeros(hidden, heads * head_dim),
        "mlp.gate_proj.weight": torch.zeros(inter, hidden),
        "mlp.up_proj.weight": torch.zeros(inter, hidden),
        "mlp.down_proj.weight": torch.zeros(hidden, inter),
    }, heads * head_dim, kv_heads * head_dim)


def _layer(hidden: int, linears: dict, q_size: int, kv_size: int) -> dict:
    import torch

    ones = {name: torch.ones(hidden) for name in ("token_layernorm.weight", "hidden_layernorm.weight",
                                                   "input_layernorm.weight", "post_attention_layernorm.weight",
                                                   "final_layernorm.weight")}
    biases = {"self_attn.q_proj.bias": torch.zeros(q_size), "self_attn.k_proj.bias": torch.zeros(kv_size),
              "self_attn.v_proj.bias": torch.zeros(kv_size)}
    return {MTP_PREFIX + name: t for name, t in (ones | linears | biases).items()}


# ---- the tokenizer -----------------------------------------------------------------------------

# transformers 5 gives every model_type "qwen2" folder its Qwen2Tokenizer, which replaces the
# tokenizer.json's pre-tokenizer with Qwen2's regex: SmolLM2's text would then be split differently
# ("    return" became 3 tokens instead of 2 on the showcase's code prompts) and the MiMo form would
# see other token ids than the Llama form. So a MiMo form keeps its tokenizer in a subfolder whose
# config.json says llama, and specviz serves it with `--tokenizer <that folder>`.
TOKENIZER_SUBDIR = "specviz-tokenizer"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json",
                   "vocab.json", "merges.txt")


def write_tokenizer_override(tokenizer_from, model_dir) -> None:
    """Copy the tokenizer files of `tokenizer_from` into `model_dir`/specviz-tokenizer with a llama config.json."""
    import json
    import shutil
    from pathlib import Path

    out = Path(model_dir) / TOKENIZER_SUBDIR
    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (Path(tokenizer_from) / name).is_file():
            shutil.copyfile(Path(tokenizer_from) / name, out / name)
    (out / "config.json").write_text(json.dumps({"model_type": "llama"}) + "\n")
    out.chmod(0o755)
    for p in out.iterdir():
        p.chmod(0o644)


def tokenizer_for(model) -> str:
    """The tokenizer folder to serve `model` with: its specviz-tokenizer subfolder if it has one, else itself."""
    from pathlib import Path

    override = Path(model) / TOKENIZER_SUBDIR
    return str(override) if (override / "tokenizer.json").is_file() else str(model)
