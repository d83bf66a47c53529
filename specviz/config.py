"""SpecConfig: one speculative decoding configuration, validated before any engine starts.

    SpecConfig.parse('{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}')
    -> SpecConfig(method='ngram', num_speculative_tokens=3, model=None, params={'prompt_lookup_max': 4})

`to_vllm()` gives the dict for vLLM's `speculative_config` / `--speculative-config`.
Methods and field names come from the installed vLLM when it can be imported, so a newer
vLLM's methods are accepted without code changes.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, Field

# Methods whose drafter is a separate checkpoint named by "model".
METHODS_WITH_DRAFT_MODEL = {"draft_model", "eagle", "eagle3", "medusa", "mlp_speculator", "dflash", "dspark"}

# Used only when vLLM cannot be imported here (for example a laptop that opens recorded runs).
_FALLBACK_METHODS = (
    "ngram", "ngram_gpu", "suffix", "draft_model", "eagle", "eagle3", "mtp",
    "dflash", "dspark", "medusa", "mlp_speculator", "custom_class",
)


class ConfigError(ValueError):
    """A speculative config that vLLM would refuse; the message names the field to change."""


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


class SpecConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    method: str
    num_speculative_tokens: int = Field(description="k: drafts proposed per step")
    model: str | None = Field(default=None, description="draft checkpoint, for methods that have one")
    params: dict[str, Any] = Field(default_factory=dict, description="the method's own vLLM fields")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SpecConfig:
        """Validate a vLLM-style speculative_config dict; raise ConfigError naming the bad field."""
        if not isinstance(d, dict):
            raise ConfigError("speculative config must be a JSON object such as "
                              '{"method": "ngram", "num_speculative_tokens": 3}')
        d = dict(d)
        method = d.pop("method", None)
        known = vllm_speculative_methods()
        if method is None:
            raise ConfigError(f"speculative config: 'method' is missing; one of: {', '.join(known)}")
        if method not in known:
            raise ConfigError(f"speculative config: unknown method {method!r}; this vLLM knows: {', '.join(known)}")
        k = d.pop("num_speculative_tokens", None)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"speculative config: 'num_speculative_tokens' must be an integer >= 1, got {k!r}")
        model = d.pop("model", None)
        if method in METHODS_WITH_DRAFT_MODEL and not model:
            raise ConfigError(f"speculative config: method {method!r} needs 'model' (the draft checkpoint)")
        fields = vllm_speculative_fields()
        if fields is not None:
            unknown = sorted(set(d) - fields)
            if unknown:
                raise ConfigError(f"speculative config: unknown field(s) {', '.join(map(repr, unknown))} for this vLLM")
        if method == "ngram":
            lo = d.get("prompt_lookup_min", 1)
            hi = d.get("prompt_lookup_max", lo)
            for name, v in (("prompt_lookup_min", lo), ("prompt_lookup_max", hi)):
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise ConfigError(f"speculative config: {name!r} must be an integer >= 1, got {v!r}")
            if lo > hi:
                raise ConfigError(f"speculative config: 'prompt_lookup_min' ({lo}) > 'prompt_lookup_max' ({hi})")
        return cls(method=method, num_speculative_tokens=k, model=model, params=d)

    @classmethod
    def parse(cls, text: str) -> SpecConfig | None:
        """Parse the command line's --spec: JSON, or 'none' for the baseline."""
        if text.strip().lower() in ("none", "null", ""):
            return None
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"speculative config is not valid JSON ({e.msg} at column {e.colno}): {text!r}") from e
        return cls.from_dict(d)

    def to_vllm(self) -> dict[str, Any]:
        d: dict[str, Any] = {"method": self.method, "num_speculative_tokens": self.num_speculative_tokens}
        if self.model:
            d["model"] = self.model
        return d | self.params

    def check_local_paths(self) -> None:
        """For a local engine: the draft model must be a folder that exists."""
        if self.model and not Path(self.model).is_dir():
            raise ConfigError(f"speculative config: draft 'model' {self.model!r} is not a folder on this machine")
