"""Which hardware served a run, and known ROCm pitfalls that a run's acceptance looks like.

    detect_platform("rocm", torch_hip="6.4.1", torch_cuda=None)   -> "rocm"
    detect_platform(None, torch_hip=None, torch_cuda="12.8")      -> "cuda"   (vLLM's detection failed)
    attention_backends_from_log("... Using TRITON_ATTN backend out of potential backends: ...") -> ["TRITON_ATTN"]
    pitfall_hints(run)  -> [Hint(...)] for an EAGLE-3 or DFlash run on ROCm whose acceptance collapsed
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .runfile import Run


def detect_platform(vllm_platform: str | None, *, torch_hip: str | None, torch_cuda: str | None) -> str:
    """vLLM's platform name when it has one; else what torch was built for (torch.version.hip / .cuda)."""
    if vllm_platform and vllm_platform not in ("unspecified", "unknown"):
        return vllm_platform
    if torch_hip:
        return "rocm"
    if torch_cuda:
        return "cuda"
    return "cpu" if vllm_platform is not None else "unknown"


_BACKEND_LINE = re.compile(r"Using (?:AttentionBackendEnum\.)?([A-Z][A-Z0-9_]+) (?:attention )?backend")


def attention_backends_from_log(log_text: str) -> list[str]:
    """Attention backends vLLM says it chose, in order of first mention (target first, then a drafter's)."""
    return list(dict.fromkeys(_BACKEND_LINE.findall(log_text)))


_DTYPE_IN_CONFIG = re.compile(r"\bdtype=torch\.(\w+)")


def model_dtype_from_log(log_text: str) -> str | None:
    """The target's dtype as vLLM's engine config line states it ("..., dtype=torch.float32, ...") -> 'float32'."""
    found = _DTYPE_IN_CONFIG.search(log_text)
    return found.group(1) if found else None


@dataclass(frozen=True)
class Hint:
    title: str
    text: str
    link: str


DFLASH_ROCM_ATTN = Hint(
    title="DFlash on ROCm: acceptance collapses when requests are batched with the default ROCM_ATTN draft backend",
    text=("Reported in vLLM: DFlash2 keeps normal acceptance with one request in flight but collapses when "
          "batched; switching only the draft's attention backend to TRITON_ATTN restored it. Try "
          '"attention_backend": "TRITON_ATTN" in the speculative config.'),
    link="https://github.com/vllm-project/vllm/issues/53323",
)
EAGLE3_ROCM_LAYER0 = Hint(
    title="EAGLE-3 on ROCm: first-position acceptance collapse in the draft's first layer",
    text=("Reported in vLLM: on ROCm the EAGLE-3 draft's layer-0 input path can collapse acceptance when the "
          "drafter picks ROCM_ATTN; forcing the draft to ROCM_AITER_UNIFIED_ATTN is a workaround while the fix "
          "is under review."),
    link="https://github.com/vllm-project/vllm/pull/47854",
)


def pitfall_hints(run: Run) -> list[Hint]:
    """Known ROCm drafter pitfalls whose signature the run's acceptance shows.

    DFlash: batched (concurrency > 1) and mean acceptance length below 1.5.
    EAGLE-3: acceptance at draft position 1 below 30% (a working head accepts well over half there).
    """
    from .metrics import run_acceptance

    m = run.meta
    if m.platform != "rocm" or m.method not in ("dflash", "eagle3"):
        return []
    acc = run_acceptance(run)
    if not acc.num_drafts and m.vllm_counters:  # untraced: vLLM's own counters
        from .metrics import counters_acceptance

        acc = counters_acceptance(m.vllm_counters)
    if not acc.num_drafts:
        return []
    if m.method == "dflash" and m.concurrency > 1 and (acc.mean_acceptance_length or 1) < 1.5:
        return [DFLASH_ROCM_ATTN]
    if m.method == "eagle3" and acc.acceptance_rate_per_pos and acc.acceptance_rate_per_pos[0] < 0.3:
        return [EAGLE3_ROCM_LAYER0]
    return []
