"""Prompt sets: built-in ones of different character, or a user's file.

Acceptance depends on the workload: a drafter that copies from the prompt (ngram) does well when
the answer repeats the prompt (code editing, repetition) and poorly on open chat. The built-in
sets are chosen so that this shows. `load_prompts("builtin:code")` or a file path:
a .json file holding a list of strings, or a text file with one prompt per line.
"""

from __future__ import annotations

import json
from pathlib import Path

from .base import SpecvizError

_ARTICLE = (
    "The city council met on Tuesday to discuss the new public library. The building, which "
    "will replace the old library on Main Street, is planned to open in the spring of next year. "
    "It will have a larger children's section, a room for community meetings, and a small cafe. "
    "Several residents asked whether the old building would be torn down. The mayor said that "
    "the council has not decided yet, but that one option is to turn it into a museum about the "
    "history of the town. The library director thanked the volunteers who raised money for new "
    "books and said that the library will stay open during the move."
)

_CODE = '''def total_price(items, tax_rate):
    total = 0
    for item in items:
        total = total + item["price"] * item["quantity"]
    total = total + total * tax_rate
    return total


def average_price(items):
    if len(items) == 0:
        return 0
    return total_price(items, 0) / len(items)
'''

# The showcase's code edits, each answered correctly by the demo model in float32 (scripts/record_showcase.py)
_SHOWCASE_TYPO = ("def add(a, b):\n    return a + b\n\n\ndef subtract(a, b):\n    retrun a - b\n\n\n"
                  "def multiply(a, b):\n    return a * b\n\n\ndef divide(a, b):\n    return a / b\n")
_SHOWCASE_JS = "".join(
    f"function {name}(name) {{\n  console.log('{words}, ' + name + '!');\n}}\n\n"
    for name, words in [("greet", "Hello"), ("farewell", "Goodbye"), ("thank", "Thank you"), ("welcome", "Welcome"),
                        ("congratulate", "Congratulations"), ("apologize", "Sorry")]).rstrip() + "\n"

BUILTIN_PROMPT_SETS: dict[str, tuple[str, list[str]]] = {
    "chat": (
        "open-ended questions; little to copy from the prompt",
        [
            "What are three good habits for staying healthy?",
            "Explain why the sky is blue to a ten-year-old.",
            "Give me a short plan for learning to cook.",
            "What should I pack for a weekend trip to the mountains?",
            "Write a friendly message inviting a colleague to lunch.",
            "Why do people keep pets? Give a few reasons.",
            "Describe a calm morning routine.",
            "What is the difference between weather and climate?",
        ],
    ),
    "summarize": (
        "summarise a given article; the answer reuses its phrases",
        [
            f"Summarize the following article in three sentences.\n\n{_ARTICLE}",
            f"List the main facts in this article as bullet points.\n\n{_ARTICLE}",
            f"What did the mayor say? Answer using the article.\n\n{_ARTICLE}",
            f"Write a one-paragraph news brief based on this article.\n\n{_ARTICLE}",
        ],
    ),
    "code": (
        "edit a given piece of code; most of the answer is copied",
        [
            f"Rename the variable `total` to `subtotal` in this code and return the whole code.\n\n{_CODE}",
            f"Add a docstring to each function in this code and return the whole code.\n\n{_CODE}",
            f"Rewrite this code to use type hints and return the whole code.\n\n{_CODE}",
            f"Replace `len(items) == 0` with `not items` in this code and return the whole code.\n\n{_CODE}",
        ],
    ),
    "repetitive": (
        "repeat or extend lists and patterns; highly predictable text",
        [
            "Count from 1 to 40, separated by commas.",
            "Write the days of the week, then write them again in the same order, three times.",
            "Repeat this sentence five times: The quick brown fox jumps over the lazy dog.",
            "List the months of the year, one per line, then list them again.",
            "Write the alphabet in capital letters with spaces between the letters, twice.",
            "Write 'red, green, blue' ten times on one line.",
        ],
    ),
    # The showcase runs' prompts (scripts/record_showcase.py, sample_runs/showcase/): answers right and short enough to read.
    "showcase-edit": (
        "two small code edits the demo model gets right: fix a typo in four functions, translate six to Python; "
        "the answers copy most of the prompt",
        [
            "Fix the typo in this Python code and return the whole code.\n\n```python\n" + _SHOWCASE_TYPO + "```",
            "Translate this JavaScript code to Python.\n\n```javascript\n" + _SHOWCASE_JS + "```",
        ],
    ),
    "showcase-chat": (
        "two everyday questions held out from the shipped drafters' training",
        ["What are three good habits for staying healthy?", "What are the benefits of reading books?"],
    ),
}


# Prompt sets by what they ask of the model: a stakeholder reads the workload, not the set's name.
WORKLOADS = {
    "showcase-edit": "code editing", "code": "code editing", "showcase-chat": "chat", "chat": "chat",
    "heldout-chat": "chat", "summarize": "summarising an article", "repetitive": "repetitive text",
    "playground race": "your prompt",
}


def workload_name(prompt_set: str) -> str:
    """'showcase-edit' -> 'code editing'; a set this table does not know keeps its name in quotes."""
    return WORKLOADS.get(prompt_set, f"prompt set '{prompt_set}'")


class PromptSetError(SpecvizError, ValueError):
    pass


def load_prompts(spec: str) -> tuple[str, list[str]]:
    """Return (prompt set name, prompts) for 'builtin:NAME' or a file path."""
    if spec.startswith("builtin:"):
        name = spec.removeprefix("builtin:")
        if name not in BUILTIN_PROMPT_SETS:
            raise PromptSetError(f"unknown built-in prompt set {name!r}; choose one of: "
                                 + ", ".join(f"builtin:{n}" for n in BUILTIN_PROMPT_SETS))
        return name, list(BUILTIN_PROMPT_SETS[name][1])
    path = Path(spec)
    if not path.is_file():
        raise PromptSetError(f"prompt file {spec!r} does not exist (or use builtin:chat, builtin:code, ...)")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            prompts = json.loads(text)
        except json.JSONDecodeError as e:
            raise PromptSetError(f"{spec}: not valid JSON ({e.msg}, line {e.lineno})") from e
        if not (isinstance(prompts, list) and all(isinstance(p, str) for p in prompts)):
            raise PromptSetError(f"{spec}: expected a JSON list of strings")
    else:
        prompts = [line for line in text.splitlines() if line.strip()]
    if not prompts:
        raise PromptSetError(f"{spec}: no prompts in the file")
    return path.stem, prompts
