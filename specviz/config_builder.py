"""The Methods page's config builder as plain functions: what a method switch keeps, the typed
parameter values, the "Other fields" JSON, and the SpecConfig they make (validated by SpecConfig).
"""

from __future__ import annotations

import json
from typing import Any

from .catalog import ExamplePair, MethodInfo, Param, method_info
from .config import ConfigError, SpecConfig


def example_of(method: str) -> ExamplePair | None:
    """The method's first example (target, draft, settings), or None when it has none."""
    info = method_info(method)
    return info.examples[0] if info and info.examples else None


def after_method_change(previous: str, method: str, *, target: str, draft: str, k: int,
                        max_k: int) -> dict[str, Any]:
    """The builder's target, draft and k once the user switches from `previous` to `method`.

    A target the user typed stays; only an empty target or the previous method's example target is
    replaced by the new method's example. k stays, unless the method allows only one value (fixed_k)
    or k is out of range. The draft becomes the new method's example draft (another method's draft
    checkpoint would be wrong).

        after_method_change("ngram", "eagle3", target="my-org/MyTarget-70B", draft="", k=5, max_k=32)
        -> {"target": "my-org/MyTarget-70B", "draft": <eagle3's example draft>, "k": 5}
    """
    info, example, old = method_info(method), example_of(method), example_of(previous)
    old_example = old.target if old else None
    if example is not None and (not target.strip() or target.strip() == old_example):
        target = example.target
    if info is not None and info.fixed_k is not None:
        k = info.fixed_k
    k = min(max(k, 1), max_k)
    return {"target": target, "draft": (example.draft or "") if example else "", "k": k}


def merge_other_fields(config: dict[str, Any], text: str) -> dict[str, Any]:
    """`config` with the JSON object `text` ("Other fields") added; ConfigError if it is not a JSON object
    or sets a field the builder already set to another value (num_speculative_tokens 7 against the
    slider's 3 is refused, not silently taken)."""
    if not text.strip():
        return dict(config)
    extra = json_value(text, "other fields")
    if not isinstance(extra, dict):
        raise ConfigError("other fields must be a JSON object")
    clashes = [f"{key} is {json.dumps(extra[key])} there but {json.dumps(config[key])} above"
               for key in extra if key in config and extra[key] != config[key]]
    if clashes:
        raise ConfigError("Other fields disagree with the controls: " + "; ".join(clashes)
                          + ". Set each field in one place (remove it from Other fields, or change the control).")
    return config | extra


def json_value(text: str, what: str) -> Any:
    """`text` read as JSON; ConfigError '<what> is not valid JSON (<why> at column <n>)' if it is not."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{what} is not valid JSON ({e.msg} at column {e.colno})") from None


def param_value(param: Param, text: str) -> Any:
    """A typed text field's value for the config: None (vLLM's default) when empty, JSON for a JSON field."""
    text = text.strip()
    if not text:
        return None
    return json_value(text, param.name) if param.type == "json" else text


def builder_spec(info: MethodInfo, k: int, *, draft: str, params: dict[str, Any], other_fields: str,
                 target: str) -> SpecConfig:
    """The builder's controls as one validated SpecConfig; ConfigError names what to change.

    The draft is left out for methods that take no 'model'; "Other fields" may add fields but not
    contradict a control (merge_other_fields); an empty target is refused.
    """
    d = {"method": info.name, "num_speculative_tokens": k, **params}
    if draft.strip() and info.model != "unused":
        d["model"] = draft.strip()
    spec = SpecConfig.from_dict(merge_other_fields(d, other_fields))
    if not target.strip():
        raise ConfigError("the target model is empty")
    return spec
