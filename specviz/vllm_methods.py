"""What the installed vLLM accepts in a speculative config: its method names and its field names.

    vllm_speculative_methods()  -> ("ngram", "medusa", "mlp_speculator", "draft_model", "suffix", ...)
    vllm_speculative_fields()   -> frozenset({"method", "num_speculative_tokens", "model", ...}) or None

Read from vLLM's own `SpeculativeMethod` literal and `SpeculativeConfig` dataclass, so a newer
vLLM's methods are known without code changes. Without vLLM (a laptop that only opens recorded
runs) the methods fall back to the list below and the fields to None (unknown: not checked).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
from functools import cache
from pathlib import Path
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
    """The `method` values the installed vLLM accepts (its SpeculativeMethod literal).

    Read from vLLM's source file, not by importing it: `import vllm.config` takes 8-20 s (torch,
    transformers), and a bad --spec must be refused in well under 2 s. Importing is the fallback."""
    if (source := _speculative_source()) is not None:
        try:
            if methods := _literal_from_source(source, "SpeculativeMethod"):
                return methods
        except (SyntaxError, ValueError):
            pass
    try:
        from vllm.config.speculative import SpeculativeMethod
    except ImportError:
        return _FALLBACK_METHODS
    return tuple(dict.fromkeys(_literal_values(SpeculativeMethod)))


@cache
def vllm_speculative_fields() -> frozenset[str] | None:
    """Field names of the installed vLLM's SpeculativeConfig, or None when vLLM is not importable (read from
    its source first, as vllm_speculative_methods is)."""
    if (source := _speculative_source()) is not None:
        try:
            if fields := _class_fields_from_source(source, "SpeculativeConfig"):
                return fields
        except (SyntaxError, ValueError):
            pass
    try:
        from vllm.config.speculative import SpeculativeConfig
    except ImportError:
        return None
    return frozenset(f.name for f in dataclasses.fields(SpeculativeConfig))


def _speculative_source() -> str | None:
    """The text of the installed vLLM's vllm/config/speculative.py, found without importing vLLM."""
    try:
        found = importlib.util.find_spec("vllm")  # a top-level package: located, not imported
    except (ImportError, ValueError):
        return None
    for folder in (found.submodule_search_locations or []) if found else []:
        try:
            return (Path(folder) / "config" / "speculative.py").read_text(encoding="utf-8")
        except OSError:
            continue
    return None


def _literal_from_source(source: str, name: str) -> tuple[str, ...]:
    """The strings of a module-level `name = Literal[...]`, following the Literal aliases it names.

    'A = Literal["x", B]' with 'B = Literal["y"]' -> ("x", "y"). Raises ValueError for anything else
    (the caller then imports vLLM and asks typing)."""
    aliases = {node.targets[0].id: node.value for node in ast.parse(source).body
               if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)}

    def values(node: ast.expr) -> list[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.Name) and node.id in aliases:
            return values(aliases[node.id])
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Literal":
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return [v for item in items for v in values(item)]
        raise ValueError(f"not a Literal of strings: {ast.dump(node)[:80]}")

    if name not in aliases:
        raise ValueError(f"{name} is not assigned at module level")
    return tuple(dict.fromkeys(values(aliases[name])))


def _class_fields_from_source(source: str, name: str) -> frozenset[str]:
    """The annotated attributes of class `name` (a dataclass's fields), ClassVar and InitVar left out."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return frozenset(item.target.id for item in node.body
                             if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                             and not any(word in ast.unparse(item.annotation) for word in ("ClassVar", "InitVar")))
    raise ValueError(f"class {name} not found")
