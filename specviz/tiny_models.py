"""Tiny random-weight Llama models for tests: built in about a second, nothing downloaded.

    from specviz.demo_model import ensure_demo_model
    from specviz.tiny_models import build_tiny_pair
    target, draft = build_tiny_pair(tmp_path, tokenizer_from=ensure_demo_model())
    # serve `target` with --dtype float32 and
    # --speculative-config '{"method": "draft_model", "model": "<draft>", "num_speculative_tokens": 3}'

The models borrow the demo model's tokenizer (SmolLM2, vocabulary 49152), so prompts and outputs
are ordinary text, but the weights are random and the output is gibberish.

Random Llamas usually have near-tied logits, and then greedy output depends on rounding (it may
differ between a plain and a speculative server). These are built to be decisive instead: every
token gets a favourite successor (a random permutation), the lm_head row of that successor is the
token's own embedding direction, and the layers are weak enough that the residual stream stays
close to the current token's embedding. So greedy decoding mostly walks token -> successor, with
the layers now and then changing the choice, and the winning logit is far ahead of the rest.

`build_tiny_pair` makes the draft a truncated copy of the target (same embeddings, lm_head and
first layer), which alone would agree with the target on every token; it then swaps the lm_head
rows of 20% of the vocabulary in the draft, so about one draft token in five is (confidently)
wrong and speculative decoding shows both accepted and rejected drafts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

HEAD_DIM = 64
LAYER_GAIN = 1.0  # std of layer weights = LAYER_GAIN / sqrt(fan_in); above ~1.2 logits start to tie
DRAFT_ERROR_RATE = 0.2  # share of next tokens that build_tiny_pair's draft gets wrong on purpose
LOGIT_SCALE = 30.0  # the favourite successor's logit is about this; the others are around 0 +- 3
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                   "special_tokens_map.json", "vocab.json", "merges.txt")


def build_tiny_llama(dest: Path, *, num_hidden_layers: int, hidden_size: int = 128, seed: int = 0,
                     tokenizer_from: Path) -> Path:
    """Write a random LlamaForCausalLM (float32 safetensors + config) into `dest` and return it.

    `hidden_size` must be a multiple of 64 (heads of 64, one KV head). The tokenizer files and
    vocabulary size come from `tokenizer_from` (a Hugging Face model folder, e.g. the demo model).
    The same arguments always give the same weights.
    """
    tensors = _random_llama(num_hidden_layers, hidden_size, seed, _vocab(tokenizer_from))
    return _save(Path(dest), tensors, num_hidden_layers, hidden_size, seed, tokenizer_from)


def build_tiny_pair(dest_dir: Path, tokenizer_from: Path, *, seed: int = 0,
                    draft_error_rate: float = DRAFT_ERROR_RATE) -> tuple[Path, Path]:
    """Build `dest_dir/target` (2 layers) and `dest_dir/draft` (1 layer); return (target, draft).

    The draft is the target cut after layer 0 (same embeddings, first layer, final norm and
    lm_head; same tokenizer and vocabulary, as vLLM's `draft_model` method needs). Left at that,
    it would agree with the target on every token, so the lm_head rows of a random
    `draft_error_rate` share of the vocabulary are shuffled in the draft: when the target's next
    token is one of those, the draft confidently proposes another, and the target rejects it.
    With 0.2 the draft guesses about 80% of the tokens; 0 gives the plain truncated copy.
    """
    import torch

    dest_dir, hidden = Path(dest_dir), 128
    tensors = _random_llama(2, hidden, seed, _vocab(tokenizer_from))
    target = _save(dest_dir / "target", tensors, 2, hidden, seed, tokenizer_from)
    draft_tensors = {k: v for k, v in tensors.items() if not k.startswith("model.layers.1.")}
    lm_head = tensors["lm_head.weight"]
    picked = torch.randperm(len(lm_head), generator=torch.Generator().manual_seed(seed + 1))
    picked = picked[: round(draft_error_rate * len(lm_head))]
    draft_tensors["lm_head.weight"] = lm_head.clone()
    draft_tensors["lm_head.weight"][picked] = lm_head[picked.roll(1)]
    draft = _save(dest_dir / "draft", draft_tensors, 1, hidden, seed, tokenizer_from)
    return target, draft


def _random_llama(num_layers: int, hidden: int, seed: int, vocab: int) -> dict:
    """The state dict of a decisive random Llama (see the module docstring), in a fixed order."""
    import torch

    if num_layers < 1 or hidden < HEAD_DIM or hidden % HEAD_DIM:
        raise ValueError(f"need num_hidden_layers >= 1 and hidden_size a multiple of {HEAD_DIM}, "
                         f"got {num_layers} and {hidden}")
    g = torch.Generator().manual_seed(seed)
    heads, inter = hidden // HEAD_DIM, 2 * hidden

    def linear(out_features, in_features):
        return torch.randn(out_features, in_features, generator=g) * (LAYER_GAIN / in_features**0.5)

    embed = torch.randn(vocab, hidden, generator=g)
    tensors = {"model.embed_tokens.weight": embed}
    for i in range(num_layers):
        p = f"model.layers.{i}."
        tensors |= {
            p + "input_layernorm.weight": torch.ones(hidden),
            p + "self_attn.q_proj.weight": linear(heads * HEAD_DIM, hidden),
            p + "self_attn.k_proj.weight": linear(HEAD_DIM, hidden),
            p + "self_attn.v_proj.weight": linear(HEAD_DIM, hidden),
            p + "self_attn.o_proj.weight": linear(hidden, heads * HEAD_DIM),
            p + "post_attention_layernorm.weight": torch.ones(hidden),
            p + "mlp.gate_proj.weight": linear(inter, hidden),
            p + "mlp.up_proj.weight": linear(inter, hidden),
            p + "mlp.down_proj.weight": linear(hidden, inter),
        }
    # lm_head row successor[x] = direction of embed[x]: after token x, successor[x] wins by far.
    successor = torch.randperm(vocab, generator=g)
    lm_head = torch.empty_like(embed)
    lm_head[successor] = embed / embed.norm(dim=1, keepdim=True) * (LOGIT_SCALE / hidden**0.5)
    tensors["model.norm.weight"] = torch.ones(hidden)
    tensors["lm_head.weight"] = lm_head
    return tensors


def _save(dest: Path, tensors: dict, num_layers: int, hidden: int, seed: int, tokenizer_from: Path) -> Path:
    """Write weights, config.json, generation_config.json and the tokenizer files into `dest`."""
    from safetensors.torch import save_file

    source = json.loads((Path(tokenizer_from) / "config.json").read_text())
    special = {k: source[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if source.get(k) is not None}
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": tensors["model.embed_tokens.weight"].shape[0],
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": num_layers,
        "num_attention_heads": hidden // HEAD_DIM,
        "num_key_value_heads": 1,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "initializer_range": 0.02,
        "torch_dtype": "float32",
        "use_cache": True,
        **special,
        "specviz_tiny_model": {"seed": seed, "layer_gain": LAYER_GAIN, "logit_scale": LOGIT_SCALE},
    }
    dest.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(dest / "model.safetensors"),
              metadata={"format": "pt"})
    (dest / "model.safetensors").chmod(0o644)  # safetensors creates it private
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (dest / "generation_config.json").write_text(json.dumps(special, indent=2) + "\n")
    copied = [name for name in TOKENIZER_FILES if (Path(tokenizer_from) / name).is_file()]
    if "tokenizer.json" not in copied:
        raise FileNotFoundError(f"{tokenizer_from} has no tokenizer.json; pass the demo model folder "
                                f"(specviz.demo_model.ensure_demo_model()) as tokenizer_from")
    for name in copied:
        shutil.copyfile(Path(tokenizer_from) / name, dest / name)
    return dest


def _vocab(model_dir: Path) -> int:
    """The vocabulary size recorded in `model_dir`/config.json."""
    path = Path(model_dir) / "config.json"
    try:
        return int(json.loads(path.read_text())["vocab_size"])
    except (OSError, ValueError, KeyError) as e:
        raise FileNotFoundError(f"cannot read vocab_size from {path} ({e}); pass the demo model folder "
                                f"(specviz.demo_model.ensure_demo_model()) as tokenizer_from") from e
