"""Tiny targets for the two MTP families, built in seconds for tests and trials (nothing downloaded).

    from specviz.demo_model import ensure_demo_model
    from specviz.testing.mtp_models import build_tiny_gemma4_pair, build_tiny_mimo
    mimo = build_tiny_mimo(tmp / "tiny-mimo", tokenizer_from=ensure_demo_model())
    # serve `mimo` with --dtype float32 and '{"method": "mtp", "num_speculative_tokens": 3}'
    target, assistant = build_tiny_gemma4_pair(tmp / "gemma4", tokenizer_from=ensure_demo_model())
    # serve `target` with '{"method": "mtp", "model": "<assistant>", "num_speculative_tokens": 3}'

- Native MTP: `build_tiny_mimo` writes a specviz tiny Llama (specviz.testing.tiny_models: the next
  token after x is decided by x alone) in the MiMo layout (specviz.mimo) with one hand-laid MTP
  layer that passes the next token's embedding to the shared lm_head. It therefore predicts what
  the target predicts: every draft is accepted, at k = 1 and, re-running the one layer, at k > 1.
- Gemma 4's separate drafter: `build_tiny_gemma4_pair` writes a random-weight `Gemma4ForCausalLM`
  (gemma4_text; sliding and full attention layers, global_head_dim = head_dim so vLLM keeps its CPU
  attention backend, no per-layer inputs, no KV sharing, no MoE) and a random-weight
  `Gemma4AssistantForCausalLM` (gemma4_assistant, backbone_hidden_size = the target's hidden
  size) whose layers have only q_proj/q_norm/o_proj in attention: they read the target's KV
  cache. Random weights: the target accepts few drafts; the point is to see the family run.
  `use_ordered_embeddings=True` writes an assistant that vLLM cannot run on CPU (it captures a
  CUDA graph), for testing that specviz refuses it before an engine starts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..mimo import mimo_config, mimo_tensors, token_passing_mtp_layer, write_tokenizer_override
from .tiny_models import TOKENIZER_FILES, _random_llama, _vocab_size

GEMMA4_HIDDEN = 64
GEMMA4_HEAD_DIM = 32
GEMMA4_ASSISTANT_HIDDEN = 64


def build_tiny_mimo(dest: Path, *, tokenizer_from: Path, num_hidden_layers: int = 2, hidden_size: int = 128,
                    seed: int = 0) -> Path:
    """Write a tiny MiMoForCausalLM with one hand-laid MTP layer into `dest`; return it (float32)."""
    from safetensors.torch import save_file

    from .tiny_models import build_tiny_llama

    dest, tokenizer_from = Path(dest), Path(tokenizer_from)
    llama_dir = build_tiny_llama(dest, num_hidden_layers=num_hidden_layers, hidden_size=hidden_size, seed=seed,
                                 tokenizer_from=tokenizer_from)
    llama = json.loads((llama_dir / "config.json").read_text())
    tensors = mimo_tensors(_random_llama(num_hidden_layers, hidden_size, seed, tokenizer_from), llama)
    tensors |= token_passing_mtp_layer(llama)
    config = mimo_config(llama, specviz_tiny_model=llama.get("specviz_tiny_model"),
                         specviz_mtp_layer={"trained": False, "init": "hand-laid: passes the next token's embedding"})
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(dest / "model.safetensors"),
              metadata={"format": "pt"})
    (dest / "model.safetensors").chmod(0o644)
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_tokenizer_override(tokenizer_from, dest)  # a qwen2 folder would get Qwen2's tokenizer (specviz.mimo)
    return dest


def build_tiny_gemma4_pair(dest_dir: Path, *, tokenizer_from: Path, seed: int = 0,
                           use_ordered_embeddings: bool = False) -> tuple[Path, Path]:
    """Build `dest_dir/gemma4-target` (2 layers) and `dest_dir/gemma4-assistant` (1 layer); return both."""
    import torch
    from transformers import Gemma4AssistantConfig, Gemma4AssistantForCausalLM, Gemma4ForCausalLM, Gemma4TextConfig

    dest_dir, tokenizer_from = Path(dest_dir), Path(tokenizer_from)
    vocab = _vocab_size(tokenizer_from)
    source = json.loads((tokenizer_from / "config.json").read_text())
    special = {k: source[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if source.get(k) is not None}
    text = dict(
        vocab_size=vocab, hidden_size=GEMMA4_HIDDEN, intermediate_size=2 * GEMMA4_HIDDEN, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=GEMMA4_HEAD_DIM, global_head_dim=GEMMA4_HEAD_DIM,
        max_position_embeddings=2048, sliding_window=128, layer_types=["sliding_attention", "full_attention"],
        hidden_size_per_layer_input=0, vocab_size_per_layer_input=0, num_kv_shared_layers=0,
        enable_moe_block=False, use_double_wide_mlp=False, attention_k_eq_v=False, final_logit_softcapping=None,
        tie_word_embeddings=True, **special,
    )
    torch.manual_seed(seed)
    target_config = Gemma4TextConfig(**text)
    target_config.architectures = ["Gemma4ForCausalLM"]
    target = Gemma4ForCausalLM(target_config).eval()
    target_dir = _save_hf(target, dest_dir / "gemma4-target", tokenizer_from)

    assistant_text = Gemma4TextConfig(**(text | dict(hidden_size=GEMMA4_ASSISTANT_HIDDEN, num_hidden_layers=1,
                                                      layer_types=["full_attention"], num_kv_shared_layers=1)))
    assistant_config = Gemma4AssistantConfig(text_config=assistant_text, backbone_hidden_size=GEMMA4_HIDDEN,
                                             use_ordered_embeddings=use_ordered_embeddings,
                                             num_centroids=64, centroid_intermediate_top_k=4,
                                             tie_word_embeddings=True)
    assistant_config.architectures = ["Gemma4AssistantForCausalLM"]
    assistant = Gemma4AssistantForCausalLM(assistant_config).eval()
    name = "gemma4-assistant-ordered" if use_ordered_embeddings else "gemma4-assistant"
    assistant_dir = _save_hf(assistant, dest_dir / name, tokenizer_from)
    return target_dir, assistant_dir


def _save_hf(model, dest: Path, tokenizer_from: Path) -> Path:
    """save_pretrained in float32 with the tokenizer files of `tokenizer_from`."""
    import torch

    dest.mkdir(parents=True, exist_ok=True)
    model.to(torch.float32).save_pretrained(dest)
    for name in TOKENIZER_FILES:
        if (tokenizer_from / name).is_file():
            shutil.copyfile(tokenizer_from / name, dest / name)
    for p in dest.iterdir():
        p.chmod(0o644)
    return dest
