"""What the installed vLLM accepts in a speculative config: its method names and its field names.

    vllm_speculative_methods()  -> ("ngram", "medusa", "mlp_speculator", "draft_model", "suffix", ...)
    vllm_speculative_fields()   -> frozenset({"method", "num_speculative_tokens", "model", ...}) or None

Read from vLLM's own `SpeculativeMethod` literal and `SpeculativeConfig` dataclass, so a newer
vLLM's methods are known without code changes. Without vLLM (a laptop that only opens recorded
runs) the methods fall back to the list below and the fields to None (unknown: not checked).
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any, get_args

# Used only when vLLM cannot be imported here (for example a laptop that opens recorded runs).
_FALLBACK_METHODS = (
    "ngram", "ngram_gpu", "suffix", "draft_model", "eagle", "eagle3", "mtp",
    "dflash", "dspark", "medusa", "mlp_speculator", "custom_class",
)


def _literal_values(tp: Any) -> list[str]:
    args = get_args(tp)
    if not args:
        return [tp] if isinstance(tp, str) else []
    return [v for a in args for v in _literal_values(a)]


@cache
def vllm_speculative_methods() -> tuple[str, ...]:
    """The `method` values the installed vLLM accepts (its SpeculativeMethod literal)."""
    try:
        from vllm.config.speculative import SpeculativeMethod
    except ImportError:
        return _FALLBACK_METHODS
    return tuple(dict.fromkeys(_literal_values(SpeculativeMethod)))


@cache
def vllm_speculative_fields() -> frozenset[str] | None:
    """Field names of the installed vLLM's SpeculativeConfig, or None when vLLM is not importable."""
    try:
        from vllm.config.speculative import SpeculativeConfig
    except ImportError:
        return None
    return frozenset(f.name for f in dataclasses.fields(SpeculativeConfig))
