"""Tiny random-weight Llama models for tests: built in about a second, nothing downloaded.

    from specviz.demo_model import ensure_demo_model
    from specviz.testing.tiny_models import build_tiny_pair
    target, draft = build_tiny_pair(tmp_path, tokenizer_from=ensure_demo_model())
    # serve `target` with --dtype float32, plain or with
    # --speculative-config '{"method": "draft_model", "model": "<draft>", "num_speculative_tokens": 3}'

The models borrow a real tokenizer (the demo model's: SmolLM2, vocabulary 49152), so prompts are
ordinary text, but the weights are random. Random Llamas usually have near-tied logits, and then
greedy output depends on rounding: it may differ between a plain and a speculative server, or
between batch sizes. These models are built to be decisive instead:

- every ordinary token x has a fixed successor, and the lm_head row of that successor is x's own
  embedding direction, so after x the successor's logit (about 20) is far ahead of all others;
- the layers are weak enough that the residual stream stays close to the current token's
  embedding, so they never overturn that choice;
- the successors form short cycles (4 to 12 tokens), so greedy output repeats with a short period
  (ngram speculation then has something to find); common word pieces, "," "." and newline cycle
  among themselves, so output text looks like "of and the in,\\n of and the in,\\n ...";
- special tokens (<|im_end|> etc.) have zero lm_head rows: they are never generated, so requests
  always run to max_tokens. As inputs they act like a newline.

After a chat prompt (which ends in a newline) every request therefore gets the same repeating
output. The first time that output reaches a newline, ngram speculation proposes what followed a
newline in the prompt, and the target rejects it; later repeats are accepted.

`build_tiny_pair` makes the draft a truncated copy of the target (same embeddings, lm_head and
first layer), which alone would agree with the target on every token; it then shuffles the lm_head
rows of 20% of the vocabulary in the draft, so about one draft token in five is (confidently)
wrong, and the target both accepts and rejects drafts.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

HEAD_DIM = 64
LAYER_GAIN = 1.0  # std of layer weights = LAYER_GAIN / sqrt(fan_in); from ~1.2 on logits start to tie
LOGIT_SCALE = 30.0  # norm of an lm_head row times sqrt(hidden_size)
CYCLE_LENGTHS = (4, 12)  # greedy output repeats with a period in this range
NUM_COMMON = 1000  # the lowest-id word pieces, "," and "." cycle among themselves
DRAFT_ERROR_RATE = 0.2  # share of next tokens that build_tiny_pair's draft gets wrong on purpose
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                   "special_tokens_map.json", "vocab.json", "merges.txt")


def build_tiny_llama(dest: Path, *, num_hidden_layers: int, hidden_size: int = 128, seed: int = 0,
                     tokenizer_from: Path) -> Path:
    """Write a random LlamaForCausalLM (float32 safetensors, config, tokenizer) into `dest`; return it.

    `hidden_size` must be a multiple of 64 (heads of 64, one KV head). The tokenizer files and
    vocabulary come from `tokenizer_from`, a Hugging Face model folder such as the demo model.
    The same arguments always give the same weights.
    """
    tensors = _random_llama(num_hidden_layers, hidden_size, seed, Path(tokenizer_from))
    return _save(Path(dest), tensors, num_hidden_layers, hidden_size, seed, Path(tokenizer_from))


def build_tiny_pair(dest_dir: Path, tokenizer_from: Path, *, seed: int = 0,
                    draft_error_rate: float = DRAFT_ERROR_RATE) -> tuple[Path, Path]:
    """Build `dest_dir/target` (2 layers) and `dest_dir/draft` (1 layer); return (target, draft).

    The draft is the target cut after layer 0 (same embeddings, first layer, final norm and
    lm_head; same tokenizer and vocabulary, as vLLM's `draft_model` method needs), except that the
    lm_head rows of a random `draft_error_rate` share of the vocabulary are shuffled: when the
    target's next token is one of those, the draft confidently proposes another one.
    `draft_error_rate=0` gives the plain truncated copy, which always agrees with the target.
    """
    import torch

    dest_dir, tokenizer_from, hidden = Path(dest_dir), Path(tokenizer_from), 128
    tensors = _random_llama(2, hidden, seed, tokenizer_from)
    target = _save(dest_dir / "target", tensors, 2, hidden, seed, tokenizer_from)

    draft_tensors = {k: v for k, v in tensors.items() if not k.startswith("model.layers.1.")}
    lm_head = tensors["lm_head.weight"]
    rows = torch.nonzero(lm_head.any(dim=1)).flatten()  # the tokens the target can generate
    rows = rows[torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed + 1))]
    picked = rows[: round(draft_error_rate * len(rows))]
    draft_tensors["lm_head.weight"] = lm_head.clone()
    draft_tensors["lm_head.weight"][picked] = lm_head[picked.roll(1)]
    draft = _save(dest_dir / "draft", draft_tensors, 1, hidden, seed, tokenizer_from)
    return target, draft


def _random_llama(num_layers: int, hidden: int, seed: int, tokenizer_from: Path) -> dict:
    """The state dict of a decisive random Llama (see the module docstring)."""
    import torch

    if num_layers < 1 or hidden < HEAD_DIM or hidden % HEAD_DIM:
        raise ValueError(f"need num_hidden_layers >= 1 and hidden_size a multiple of {HEAD_DIM}, "
                         f"got {num_layers} and {hidden}")
    vocab = _vocab_size(tokenizer_from)
    special, groups = _token_groups(tokenizer_from, vocab)
    g = torch.Generator().manual_seed(seed)
    heads, inter = hidden // HEAD_DIM, 2 * hidden

    def linear(out_features, in_features):
        return torch.randn(out_features, in_features, generator=g) * (LAYER_GAIN / in_features**0.5)

    embed = torch.randn(vocab, hidden, generator=g)
    embed[special] = embed[groups[0][0]].clone()  # special tokens read like the first common token (newline)
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
    tensors["model.norm.weight"] = torch.ones(hidden)

    # Chain each group's tokens into random cycles; the lm_head row of x's successor is x's
    # embedding direction, so after x the successor wins by far. Special tokens keep zero rows.
    lm_head = torch.zeros(vocab, hidden)
    unit = embed / embed.norm(dim=1, keepdim=True) * (LOGIT_SCALE / hidden**0.5)
    for group in groups:
        order = torch.tensor(group)[torch.randperm(len(group), generator=g)]
        start = 0
        while start < len(order):
            length = int(torch.randint(CYCLE_LENGTHS[0], CYCLE_LENGTHS[1] + 1, (1,), generator=g))
            cycle = order[start:start + length]
            lm_head[cycle.roll(-1)] = unit[cycle]
            start += length
    tensors["lm_head.weight"] = lm_head
    return tensors


def _token_groups(model_dir: Path, vocab: int) -> tuple[list[int], list[list[int]]]:
    """(special token ids, [common ids starting with newline, all other ordinary ids])."""
    try:
        tokenizer = json.loads((model_dir / "tokenizer.json").read_text())
    except (OSError, ValueError) as e:
        raise FileNotFoundError(f"cannot read {model_dir / 'tokenizer.json'} ({e}); pass the demo model "
                                f"folder (specviz.demo_model.ensure_demo_model()) as tokenizer_from") from e
    special = sorted({t["id"] for t in tokenizer.get("added_tokens", []) if t.get("special") and t["id"] < vocab})
    pieces = tokenizer.get("model", {}).get("vocab", {})  # byte-level BPE: "Ġ" is a space, "Ċ" a newline
    word = re.compile(r"Ġ?[A-Za-z]+|[.,]")
    common = sorted(i for piece, i in pieces.items() if word.fullmatch(piece) and i < vocab)[:NUM_COMMON]
    newline = pieces.get("Ċ")
    common = ([newline] if newline is not None else []) + common
    if len(common) < CYCLE_LENGTHS[1]:  # not a byte-level BPE vocabulary: one group of everything
        common = []
    taken = set(special) | set(common)
    rest = [i for i in range(vocab) if i not in taken]
    return special, [group for group in (common, rest) if group]


def _vocab_size(model_dir: Path) -> int:
    """The vocabulary size recorded in `model_dir`/config.json."""
    path = model_dir / "config.json"
    try:
        return int(json.loads(path.read_text())["vocab_size"])
    except (OSError, ValueError, KeyError) as e:
        raise FileNotFoundError(f"cannot read vocab_size from {path} ({e}); pass the demo model folder "
                                f"(specviz.demo_model.ensure_demo_model()) as tokenizer_from") from e


def _save(dest: Path, tensors: dict, num_layers: int, hidden: int, seed: int, tokenizer_from: Path) -> Path:
    """Write weights, config.json, generation_config.json and the tokenizer files into `dest`."""
    from safetensors.torch import save_file

    source = json.loads((tokenizer_from / "config.json").read_text())
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
    copied = [name for name in TOKENIZER_FILES if (tokenizer_from / name).is_file()]
    if "tokenizer.json" not in copied:
        raise FileNotFoundError(f"{tokenizer_from} has no tokenizer.json; pass the demo model folder "
                                f"(specviz.demo_model.ensure_demo_model()) as tokenizer_from")
    for name in copied:
        shutil.copyfile(tokenizer_from / name, dest / name)
    return dest
