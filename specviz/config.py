"""SpecConfig: one speculative decoding configuration, validated before any engine starts.

    SpecConfig.parse('{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}')
    -> SpecConfig(method='ngram', num_speculative_tokens=3, model=None, params={'prompt_lookup_max': 4})

`to_vllm()` gives the dict for vLLM's `speculative_config` / `--speculative-config`, `to_python()`
the same as a Python snippet; serve_command.py builds the `vllm serve` command line around it.

Methods and field names come from the installed vLLM when it can be imported
(`specviz.vllm_methods`), so a newer vLLM's methods are accepted without code changes. What each
method requires (a draft `model`, a fixed `num_speculative_tokens`, parameter ranges) comes from
`specviz.catalog`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from . import vllm_methods
from .base import Frozen, SpecvizError
from .catalog import Param, method_info, platform_limits


class ConfigError(SpecvizError, ValueError):
    """A speculative config that vLLM would refuse; the message names the field to change."""


DEFAULT_LOGPROBS = 5  # the target's top candidates `record` keeps per output token: enough to see a three-way tie
SCHEDULE_FIELD = "num_speculative_tokens_per_batch_size"  # vLLM's name for the per-batch-size schedule
UNREPORTED_METHOD = "unknown"  # the method of a server that drafts but did not say how (an attached one, no --spec)


class BatchSizeRange(Frozen):
    """One entry of a per-batch-size schedule: batch sizes first..last (inclusive) draft k tokens (0: none)."""

    first: int = Field(ge=1, description="smallest batch size (requests scheduled in the step) of the range")
    last: int = Field(ge=1, description="largest batch size of the range, inclusive")
    k: int = Field(ge=0, description="num_speculative_tokens at these batch sizes; 0 drafts nothing")

    def text(self) -> str:
        """'1: k=4', '2-64: k=1', '65+: k=0' (the last range of a schedule covers every larger batch)."""
        return f"{self.first if self.first == self.last else f'{self.first}-{self.last}'}: k={self.k}"


class SpecConfig(Frozen):
    """One speculative decoding configuration; None stands for no drafting wherever a SpecConfig is expected.

    With a `schedule` (vLLM's num_speculative_tokens_per_batch_size) the number of drafts per step
    follows the batch size: `k_at(batch)`; num_speculative_tokens is then the largest k vLLM allows.
    """

    method: str
    num_speculative_tokens: int = Field(description="k: drafts proposed per step (with a schedule: the most)")
    model: str | None = Field(default=None, description="draft checkpoint, for methods that have one")
    params: dict[str, Any] = Field(default_factory=dict, description="the method's own vLLM fields")
    schedule: list[BatchSizeRange] | None = Field(
        default=None, description="k per batch-size range, sorted; None: k = num_speculative_tokens at every batch")

    @property
    def k(self) -> int:
        return self.num_speculative_tokens

    def k_at(self, batch_size: int) -> int:
        """Drafts per request at a step of `batch_size` requests, as vLLM's scheduler looks it up
        (vllm/v1/spec_decode/dynamic/utils.py): a batch between two ranges, or beyond the last, keeps
        the k of the range before it, and no k exceeds num_speculative_tokens.
        [[1, 1, 4], [2, 8, 2], [16, 64, 0]] with num_speculative_tokens 4: batch 1 -> 4, 5 -> 2, 12 -> 2, 100 -> 0.
        """
        if not self.schedule:
            return self.num_speculative_tokens
        k = self.schedule[0].k
        for entry in self.schedule:
            if entry.first > batch_size:
                break
            k = entry.k
        return min(k, self.num_speculative_tokens)

    def with_k(self, k: int) -> SpecConfig | None:
        """The same drafter at a fixed k and no schedule; k = 0 is no drafting (None)."""
        return self.model_copy(update={"num_speculative_tokens": k, "schedule": None}) if k else None

    def idle(self) -> SpecConfig:
        """The same drafter loaded but drafting nothing: k = 0 at every batch size ([[1, 1, 0]]; vLLM keeps the
        last range's k for every larger batch). What a k = 0 range of a schedule serves, which is not no
        drafting: vLLM still calls the drafter every step (docs/schedule-cost.md measures what that costs)."""
        return self.model_copy(update={"schedule": [BatchSizeRange(first=1, last=1, k=0)]})

    @property
    def drafts_nothing(self) -> bool:
        """A schedule of k = 0 at every batch size (idle())."""
        return bool(self.schedule) and all(entry.k == 0 for entry in self.schedule)

    def with_schedule(self, schedule: list[BatchSizeRange]) -> SpecConfig | None:
        """The same drafter following `schedule` (num_speculative_tokens: its largest k). One k everywhere
        gives a static config at that k (None for 0), since a schedule of one k only adds its own cost."""
        ks = {entry.k for entry in schedule}
        if len(ks) == 1:
            return self.with_k(ks.pop())
        return SpecConfig.from_dict(self.with_k(max(ks)).to_vllm() | {
            SCHEDULE_FIELD: [[e.first, e.last, e.k] for e in schedule]})

    def describe(self) -> str:
        """'ngram k=3', or with a schedule 'ngram k by batch size (1: k=4 · 2-64: k=1)'; a method nobody reported
        reads 'speculative decoding (method not reported) k=3'."""
        method = "speculative decoding (method not reported)" if self.method == UNREPORTED_METHOD else self.method
        if not self.schedule:
            return f"{method} k={self.num_speculative_tokens}"
        return f"{method} k by batch size ({' · '.join(e.text() for e in self.schedule)})"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SpecConfig:
        """Validate a vLLM-style speculative_config dict; raise ConfigError naming the bad field."""
        if not isinstance(d, dict):
            raise ConfigError("speculative config must be a JSON object such as "
                              '{"method": "ngram", "num_speculative_tokens": 3}')
        d = dict(d)
        method = d.pop("method", None)
        known = vllm_methods.vllm_speculative_methods()
        if method is None:
            raise ConfigError(f"speculative config: 'method' is missing; one of: {', '.join(known)}")
        if method not in known:
            raise ConfigError(f"speculative config: unknown method {method!r}; this vLLM knows: {', '.join(known)}")
        k = d.pop("num_speculative_tokens", None)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"speculative config: 'num_speculative_tokens' must be an integer >= 1, got {k!r}")
        model = d.pop("model", None)
        schedule = parse_schedule(d.pop(SCHEDULE_FIELD), k) if d.get(SCHEDULE_FIELD) is not None else None
        d.pop(SCHEDULE_FIELD, None)
        info = method_info(method)
        if info is not None:
            if info.model == "required" and not model:
                raise ConfigError(f"speculative config: method {method!r} needs 'model' ({info.model_role})")
            if info.model_kind == "import path" and model and not _is_import_path(model):
                raise ConfigError(f"speculative config: method {method!r} needs 'model' to be a dotted import path "
                                  f"such as 'my_module.MyProposer', got {model!r}")
            if info.fixed_k is not None and k != info.fixed_k:
                raise ConfigError(f"speculative config: method {method!r} needs 'num_speculative_tokens' = "
                                  f"{info.fixed_k}, got {k}")
        fields = vllm_methods.vllm_speculative_fields()
        if fields is not None:
            unknown = sorted(set(d) - fields)
            if unknown:
                raise ConfigError(f"speculative config: unknown field(s) {', '.join(map(repr, unknown))} for this vLLM")
        if method in ("ngram", "ngram_gpu"):
            lo = d.get("prompt_lookup_min", 1)
            hi = d.get("prompt_lookup_max", lo)
            for name, v in (("prompt_lookup_min", lo), ("prompt_lookup_max", hi)):
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise ConfigError(f"speculative config: {name!r} must be an integer >= 1, got {v!r}")
            if lo > hi:
                raise ConfigError(f"speculative config: 'prompt_lookup_min' ({lo}) > 'prompt_lookup_max' ({hi})")
        if info is not None:
            for param in info.params:
                if param.name in d:
                    _check_param(param, d[param.name])
        return cls(method=method, num_speculative_tokens=k, model=model, params=d, schedule=schedule)

    @classmethod
    def from_recorded(cls, d: dict[str, Any] | None) -> SpecConfig | None:
        """A config as a file recorded it (vLLM's dict; None: no drafting), typed without this vLLM's checks:
        a file recorded with a method or field this vLLM does not know still opens."""
        if d is None:
            return None
        d = dict(d)
        schedule = d.pop(SCHEDULE_FIELD, None)
        return cls(method=d.pop("method", None) or UNREPORTED_METHOD, num_speculative_tokens=d.pop("num_speculative_tokens"),
                   model=d.pop("model", None), params=d,
                   schedule=[BatchSizeRange(first=a, last=b, k=k) for a, b, k in schedule] if schedule else None)

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
        """The dict vLLM takes; a method nobody reported (UNREPORTED_METHOD) is left out, as it was recorded."""
        d: dict[str, Any] = {"num_speculative_tokens": self.num_speculative_tokens}
        if self.method != UNREPORTED_METHOD:
            d = {"method": self.method} | d
        if self.model:
            d["model"] = self.model
        d |= self.params
        if self.schedule:
            d[SCHEDULE_FIELD] = [[e.first, e.last, e.k] for e in self.schedule]
        return d

    def to_python(self) -> str:
        """The config as Python source, for `LLM(model=..., speculative_config={...})`."""
        items = "".join(f"    {json.dumps(key)}: {_py_literal(value)},\n" for key, value in self.to_vllm().items())
        return "speculative_config={\n" + items + "}"

    def check_local_paths(self) -> None:
        """For a local engine: the draft model must be a folder that exists."""
        info = method_info(self.method)
        if info is not None and info.model_kind != "checkpoint":
            return  # custom_class names a Python class, not a folder
        if self.model and not Path(self.model).is_dir():
            raise ConfigError(f"speculative config: draft 'model' {self.model!r} is not a folder on this machine")


    def check_local_engine(self, platform: str | None = None) -> None:
        """Before starting an engine on this machine: draft folders exist, and no setting is known to fail here.

        `platform` is vLLM's name for the machine's platform ('cpu', 'cuda', 'rocm'); None detects
        this machine's, only when a setting is known to fail somewhere (detection imports vLLM).
        Settings are the speculative config's and the draft checkpoint's config.json (a Gemma 4
        assistant's use_ordered_embeddings). Raises ConfigError naming the setting, vLLM's error it
        would end in, and what to change.
        """
        self.check_local_paths()
        suspects = platform_limits(self.to_vllm(), draft_config=self.draft_config())
        if not suspects:
            return
        if platform is None:
            from .serving.server import local_device

            platform = local_device()[0]
        for limit in suspects:
            if limit.platform == platform:
                whose = "" if limit.where == "speculative config" else "the draft's config.json: "
                raise ConfigError(f"speculative config: {whose}{limit.field!r} = {limit.value!r} is known to fail on "
                                  f"{platform} ({limit.stage} \"{limit.error}\"): "
                                  f"{limit.why}. Change: {limit.change}.")

    def draft_config(self) -> dict[str, Any] | None:
        """The draft checkpoint's config.json as a dict, if `model` is a local folder that has one."""
        if not self.model:
            return None
        path = Path(self.model) / "config.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None


class DraftingFacts:
    """What a record with a `spec: SpecConfig | None` field says about its drafting (RunMeta, SweepCell): the
    spec is the one home; method, k and vLLM's dict are read from it, and older files' three copies of the same
    fact are read into it (from_recorded_fields)."""

    spec: SpecConfig | None

    @property
    def method(self) -> str | None:
        """The drafting method; None for no drafting, and for a server that drafts without saying how."""
        return self.spec.method if self.spec and self.spec.method != UNREPORTED_METHOD else None

    @property
    def num_speculative_tokens(self) -> int:
        """k; 0 for no drafting (the baseline), the largest k for a schedule."""
        return self.spec.num_speculative_tokens if self.spec else 0

    @property
    def speculative_config(self) -> dict | None:
        """As vLLM takes it; None for no drafting."""
        return self.spec.to_vllm() if self.spec else None

    @property
    def scheduled(self) -> bool:
        """k follows the batch size (vLLM's num_speculative_tokens_per_batch_size)."""
        return bool(self.spec and self.spec.schedule)

    @staticmethod
    def from_recorded_fields(data: dict) -> dict:
        """An older file's record in today's shape: its vLLM dict, method and k (the same fact three times)
        become one spec. {"speculative_config": {"method": "ngram", "num_speculative_tokens": 3},
        "method": "ngram", "num_speculative_tokens": 3, ...} -> {"spec": SpecConfig(ngram, k=3), ...}."""
        if "spec" in data:
            return data
        data = {k: v for k, v in data.items() if k not in ("method", "num_speculative_tokens")}
        try:
            data["spec"] = SpecConfig.from_recorded(data.pop("speculative_config", None))
        except (TypeError, KeyError, ValueError) as e:  # raised as ValueError: pydantic says where, as for any field
            raise ValueError(f"speculative_config is not a speculative config as vLLM takes it ({e!r})") from None
        return data


NO_DRAFTING = "no drafting"  # how a missing SpecConfig (the baseline, k = 0) is shown, everywhere


def describe_spec(spec: SpecConfig | None) -> str:
    """'ngram k=3', 'ngram k by batch size (1: k=4 · 2-64: k=1)', or 'no drafting' for None."""
    return spec.describe() if spec else NO_DRAFTING


def short_model_name(model: str | Path) -> str:
    """A model as labels name it: the last part of its folder or hub id ('/models/SmolLM2-135M/' -> 'SmolLM2-135M')."""
    return str(model).rstrip("/").split("/")[-1]


def check_server_args(spec: SpecConfig | None, server_args: Sequence[str]) -> None:
    """Refuse a schedule with data parallelism: vLLM drops the schedule there and drafts a static
    num_speculative_tokens instead (VllmConfig._maybe_disable_dynamic_sd_for_data_parallel), so the run
    would not measure what it is labelled with."""
    if spec is None or not spec.schedule:
        return
    args = list(server_args)
    for i, arg in enumerate(args):
        name, _, value = arg.partition("=")
        if name in ("--data-parallel-size", "-dp"):
            value = value or (args[i + 1] if i + 1 < len(args) else "")
            if value.isdigit() and int(value) > 1:
                raise ConfigError(f"speculative config: {SCHEDULE_FIELD!r} with {name} {value}: vLLM turns the "
                                  "schedule off under data parallelism (ranks could pick different k and deadlock) "
                                  f"and drafts num_speculative_tokens={spec.num_speculative_tokens} at every batch. "
                                  "Drop the schedule or the data parallelism")


def parse_schedule(value: Any, num_speculative_tokens: int) -> list[BatchSizeRange]:
    """Validate num_speculative_tokens_per_batch_size as vLLM does (validate_and_normalize_dynamic_sd_schedule
    in vllm/v1/spec_decode/dynamic/utils.py) and sort it; raise ConfigError naming what to change.

    [[2, 64, 1], [1, 1, 4]] -> 1: k=4, 2-64: k=1. Beyond vLLM: a k above num_speculative_tokens is
    refused, because vLLM would silently cap it there.
    """
    where = f"speculative config: {SCHEDULE_FIELD!r}"
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where} must be a non-empty list of [first batch size, last batch size, k] "
                          "entries, e.g. [[1, 1, 4], [2, 64, 1]]")
    entries = []
    for entry in value:
        if (not isinstance(entry, (list, tuple)) or len(entry) != 3
                or any(isinstance(v, bool) or not isinstance(v, int) for v in entry)):
            raise ConfigError(f"{where}: each entry must be three integers [first, last, k], got {entry!r}")
        first, last, k = entry
        if first < 1 or last < 1:
            raise ConfigError(f"{where}: batch sizes must be >= 1, got [{first}, {last}, {k}]")
        if first > last:
            raise ConfigError(f"{where}: first batch size {first} is above last {last} in [{first}, {last}, {k}]")
        if k < 0:
            raise ConfigError(f"{where}: k must be >= 0 (0 drafts nothing), got [{first}, {last}, {k}]")
        if k > num_speculative_tokens:
            raise ConfigError(f"{where}: k={k} in [{first}, {last}, {k}] is above num_speculative_tokens="
                              f"{num_speculative_tokens}, and vLLM would silently cap it there; raise "
                              f"num_speculative_tokens to {k} or lower the entry")
        entries.append(BatchSizeRange(first=first, last=last, k=k))
    entries.sort(key=lambda e: e.first)
    for before, after in zip(entries, entries[1:]):
        if after.first <= before.last:
            raise ConfigError(f"{where}: ranges {before.first}-{before.last} and {after.first}-{after.last} overlap")
    if entries[0].first != 1:
        raise ConfigError(f"{where}: the first range must start at batch size 1 (it starts at {entries[0].first}), "
                          "so every batch size has a k")
    return entries


def _is_import_path(model: str) -> bool:
    # vLLM's own test (SpeculativeConfig._is_custom_proposer_path): dotted identifiers, no '/'.
    parts = model.split(".")
    return "/" not in model and len(parts) >= 2 and all(p.isidentifier() for p in parts)


def _check_param(param: Param, value: Any) -> None:
    """Type and range of one method parameter, as the catalog describes it."""
    if value is None or param.type == "json":
        return  # None is vLLM's "unset"; JSON-valued fields are left to vLLM
    if param.choices:
        if value not in param.choices:
            raise ConfigError(f"speculative config: {param.name!r} must be one of {', '.join(param.choices)}, "
                              f"got {value!r}")
        return
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok, kind = {
        "int": (number and isinstance(value, int), "an integer"),
        "float": (number, "a number"),
        "bool": (isinstance(value, bool), "true or false"),
        "str": (isinstance(value, str), "a string"),
    }[param.type]
    lo, hi = param.minimum, param.maximum
    if ok and number and ((lo is not None and value < lo) or (hi is not None and value > hi)):
        ok = False
    if not ok:
        limits = [f">= {lo:g}" if lo is not None else "", f"<= {hi:g}" if hi is not None else ""]
        bounds = " and ".join(b for b in limits if b)
        raise ConfigError(f"speculative config: {param.name!r} must be {kind}{' ' + bounds if bounds else ''}, "
                          f"got {value!r}")


def _py_literal(value: Any) -> str:
    """Python source for a JSON-like value, strings in double quotes as in vLLM's docs."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_py_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_py_literal(v) for v in value) + "]"
    return repr(value)  # bool, None, int, float: Python spells them as it reads them
