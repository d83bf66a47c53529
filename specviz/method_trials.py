"""The method-trials file: what `scripts/try_methods.py` found when it tried every method here.

    trials = load_trials("sample_runs/method_trials.json")   # TrialsFileError says why a file is refused
    trials, problem = default_trials()                       # the one in sample_runs/, if any

The catalog (catalog.py) adds what they say to each method's `known_to_run`; the Methods page and
`specviz methods` show them (methods_view.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from .base import Frozen, SpecvizError
from .files import SAMPLE_RUNS_DIR, Wording, first_error, read_versioned_json

TRIALS_FILE_KIND = "specviz.method_trials"
DEFAULT_TRIALS_PATH = SAMPLE_RUNS_DIR / "method_trials.json"


class TrialsFileError(SpecvizError, ValueError):
    """A trials file that cannot be used; the message says why."""


class MethodTrial(Frozen):
    method: str
    target: str
    draft: str | None
    ran: bool
    error: str | None
    mean_acceptance_length: float | None
    note: str
    recorded_at: str | None = None  # when this trial ran, if not the file's created_at (try_methods.py --merge)


class MethodTrials(Frozen):
    kind: Literal["specviz.method_trials"] = TRIALS_FILE_KIND
    vllm_version: str
    platform: str
    device_name: str
    created_at: str
    trials: list[MethodTrial]


# A trials file has no schema_version; its refusals keep the wording they had before the shared loader.
_TRIALS_WORDING = Wording(
    missing="{source} does not exist",
    unreadable="{name} is not a JSON file ({error})",
    not_json="{name} is not a JSON file ({error})",
    wrong_kind="{name} is not a specviz method-trials file: its 'kind' is {found!r}, expected {kind!r}",
)


def load_trials(path: str | Path = DEFAULT_TRIALS_PATH) -> MethodTrials:
    """Read a method-trials file; raise TrialsFileError naming the problem."""
    path = Path(path)
    data = read_versioned_json(path, kind=TRIALS_FILE_KIND, versions=None, error=TrialsFileError,
                               label="method-trials", name=path.name, wording=_TRIALS_WORDING)
    try:
        return MethodTrials.model_validate(data)
    except ValidationError as e:
        raise TrialsFileError(f"{path.name}: invalid trials file {first_error(e)}") from None


def default_trials() -> tuple[MethodTrials | None, str | None]:
    """(the trials in sample_runs/, or None, and why they could not be read if the file is there but bad)."""
    if not DEFAULT_TRIALS_PATH.exists():
        return None, None
    try:
        return load_trials(DEFAULT_TRIALS_PATH), None
    except TrialsFileError as e:
        return None, str(e)


# ---- summaries shared by the catalog and the tables --------------------------------------------

def first_line(text: str | None) -> str:
    """The first non-blank line of an error message."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[0] if lines else "no error message"


REASON_CHARS = 140  # a reason is one line of a table cell: the whole error stays in the page's expander


def one_line_reason(text: str | None) -> str:
    """An error as a one-line reason: pydantic's wrapper ('pydantic_core._pydantic_core.ValidationError: 1
    validation error for VllmConfig | Value error, <message> [type=value_error, input_value=ArgsKwargs(...)]')
    reduced to its message and who refused it, a dotted exception path to the exception's name, and at most
    REASON_CHARS characters.
    'pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig | Value error, Model Runner
    V1 does not support: dspark speculative decoding [type=value_error, ...]' -> 'Model Runner V1 does not
    support: dspark speculative decoding (VllmConfig refused it)'."""
    line = first_line(text)
    found = re.search(r"validation errors? for (\w+)\s*\|?\s*(?:Value error, )?(.*?)(?:\s*\[type=.*)?$", line)
    if found:
        message = re.sub(r"\s*Supported architectures: .*$", "", found.group(2)).strip()  # a list of ~400 names
        line = f"{message or 'invalid value'} ({found.group(1)} refused it)"
    else:
        line = re.sub(r"^(?:\w+\.)+(\w+(?:Error|Exception)):", r"\1:", line)
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1].rstrip() + "…"


def once(items) -> list:
    """The items in first-seen order, each once."""
    return list(dict.fromkeys(items))


def acceptance_lengths(trials: list[MethodTrial]) -> str:
    """'2.20 (tiny-llama-2L), 2.25 (SmolLM2-135M-Instruct)': each target's mean acceptance length once."""
    by_target = {t.target: t.mean_acceptance_length for t in trials if t.mean_acceptance_length is not None}
    return ", ".join(f"{length:.2f} ({target})" for target, length in by_target.items())


def failure_reasons(trials: list[MethodTrial]) -> str:
    """Each distinct error as a one-line reason (one_line_reason), once."""
    return "; ".join(once(one_line_reason(t.error) for t in trials))
