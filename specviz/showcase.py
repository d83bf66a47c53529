"""What the app opens on: the recorded run (and request) that shows speculative decoding best.

Pure functions over (name, Run) pairs; names are paths relative to sample_runs/, such as
"showcase/ngram-edit-c1.json.gz" or "smollm2-ngram-k3-code-c1.json.gz".

    opening_run(entries)   the run the Playground opens on:
        1. runs under showcase/ when that folder holds a speculative run, else every run;
        2. among them the valid, complete, traced speculative runs with accepted drafts;
        3. the best: one with a baseline to race against (race.find_baseline), then concurrency 1
           (a single request on the engine is the cleanest race), then the highest mean acceptance
           length (1 + accepted / drafts).
       With the sample runs of this repository: smollm2-ngram-k3-code-c1 (3.34 tokens per pass at
       concurrency 1, raced against smollm2-baseline-code-c1); the concurrency-4 run's 3.36 loses on
       the second rule.
    opening_request(run)   the request shown first: one that had a draft rejected (so every chip role
        can show) with the most accepted drafts; else the one with the most accepted drafts.
    lossless_rows(folders) each speculative run's output against its baseline (the Methods page's
        "Is it lossless?" table).
    example_step(req)      the step to show as the request's example at the top, by a rule (see it): one
        with accepted, corrected and discarded chips in one row that all read as words, like "sunny
        and ~~warm~~ clear ~~outside~~"; else the nearest to that.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from .divergence import compare_runs
from .metrics import output_tokens_per_s, run_acceptance
from .race import find_baseline, is_speculative, spec_label
from .runfile import Request, Run

SHOWCASE_DIR = "showcase"
K = TypeVar("K")


def _in_showcase(name) -> bool:
    return str(name).replace("\\", "/").startswith(f"{SHOWCASE_DIR}/")


def _accepted(req: Request) -> int:
    return sum(s.num_accepted for s in req.steps)


def _rejected(req: Request) -> int:
    return sum(1 for s in req.steps if s.draft_token_ids and s.num_accepted < s.num_drafts)


def showable(run: Run) -> bool:
    """A speculative run worth opening on: valid, complete, traced, with drafts accepted."""
    return (is_speculative(run) and run.meta.complete and run.meta.traced
            and any(_accepted(r) for r in run.requests))


def opening_run(entries: Sequence[tuple[K, Run]]) -> K | None:
    """The name of the run to open on (see the module docstring); the first name if none is speculative."""
    if not entries:
        return None
    pool = [(n, r) for n, r in entries if _in_showcase(n) and showable(r)] or \
           [(n, r) for n, r in entries if showable(r)]
    if not pool:
        return entries[0][0]

    def score(entry: tuple[K, Run]) -> tuple:
        _, run = entry
        length = run_acceptance(run).mean_acceptance_length or 0.0
        return (find_baseline(run, entries) is not None, run.meta.concurrency == 1, length)

    return max(pool, key=score)[0]  # max keeps the first of equals: the list order breaks ties


def opening_request(run: Run) -> int:
    """Index of the request to show first (see the module docstring); 0 when nothing was accepted."""
    if not run.requests:
        return 0
    scores = [(_rejected(r) > 0, _accepted(r)) for r in run.requests]
    best = max(range(len(scores)), key=lambda i: scores[i])
    return best if scores[best][1] else 0


_LINE_LIKE = set("=-_~")  # struck through, these merge with the line and read as a bar


def _shown(texts: Sequence[str]) -> int:
    """How many of the pieces still read once struck through: a visible character that is not line-like.
    ['\\n   ', ' total', ' =', '):'] -> 2 (whitespace shows nothing and '=' reads as a bar; code's '):' reads)."""
    return sum(1 for t in texts if any(not c.isspace() and c not in _LINE_LIKE for c in t))


def _words(texts: Sequence[str]) -> int:
    """How many of the pieces hold a letter or digit: ['.', ' total', '):'] -> 1."""
    return sum(1 for t in texts if any(c.isalnum() for c in t))


def example_step(req: Request) -> int | None:
    """Index of the step to show as the request's example; None without drafts.

    The rule, in order: the step shows all of the mechanism (some drafts accepted, the first rejected one
    corrected, a discarded tail after it: "sunny and ~~warm~~ clear ~~outside~~"); every piece of it
    reads once struck through (accepted drafts, the correction and the discarded tail each show a character
    that is not whitespace or line-like, so no blank row and no struck-through '=' that reads as a bar; code's
    '):' reads); the most accepted words (pieces with a letter or digit); the most accepted drafts; the
    earliest. Without such a step the next best by the same order.
    """
    drafted = [i for i, s in enumerate(req.steps) if s.draft_token_ids]
    if not drafted:
        return None

    def score(i: int) -> tuple:
        s = req.steps[i]
        n, k = s.num_accepted, s.num_drafts
        rejected = n < k
        accepted, discarded = s.draft_texts[:n], s.draft_texts[n + 1:]
        correction = s.sampled_texts[n:n + 1] if rejected else []
        whole = n > 0 and rejected and k - n > 1
        readable = (bool(s.draft_texts) and _shown(accepted) == n and _shown(correction) == len(correction)
                    and _shown(discarded) == len(discarded))
        return (whole, readable, n > 0 and rejected, _words(accepted), n, -i)

    return max(drafted, key=score)


SHORT_VERDICTS = {"tie": "a tie", "not_a_tie": "NOT a tie", "unexplained": "not explained"}


def showcase_folders(sample_runs: Path) -> list[Path]:
    """showcase/ (the shipped runs) first, then the other recordings of the same prompts (showcase-bf16-epyc/, ...)."""
    return sorted((p for p in sample_runs.glob(f"{SHOWCASE_DIR}*") if p.is_dir()), key=lambda p: (p.name != SHOWCASE_DIR,
                                                                                                 p.name))


def prompts_label(run: Run, words: int = 5) -> str:
    """The prompt set's name and its first prompt's opening words, so that two recordings of a set whose prompts
    changed between them do not read as the same prompts: "showcase-edit: “Fix the typo in this…” and 1 more"."""
    first = next((r.user_message or r.prompt for r in run.requests), "").split()
    opening = " ".join(first[:words]) + ("…" if len(first) > words else "")
    more = f" and {len(run.requests) - 1} more" if len(run.requests) > 1 else ""
    return f"{run.meta.prompt_set}: “{opening}”{more}"


def lossless_rows(folders: Sequence[tuple[str, Sequence[tuple[K, Run]]]]) -> list[dict]:
    """One row per speculative run: its output against the baseline recorded beside it, and the speed.

    `folders` is [(label, [(name, run), ...]), ...]: runs are paired only within a folder (one dtype,
    one machine). A row:
        {"runs": "float32", "drafting": "ngram k=3", "dtype": "float32", "identical output": "2 of 2",
         "where they part": "", "tokens/s, baseline -> drafting": "19.0 -> 41.9 (2.21x)",
         "machine": "Intel(R) Xeon(R) Processor", "prompts": "showcase-edit: “Fix the typo in this…” and 1 more"}
    (the answer before the provenance: at 1280 px the last columns scroll out of the table's box)
    and where runs part, per request: "token 12: a tie; token 63: a tie".
    """
    rows = []
    for label, entries in folders:
        for _, run in entries:
            pair = find_baseline(run, entries) if is_speculative(run) else None
            if pair is None:
                continue
            comparison = compare_runs(pair.baseline, run)
            base_tps, run_tps = output_tokens_per_s(pair.baseline), output_tokens_per_s(run)
            speed = (f"{base_tps:.1f} -> {run_tps:.1f} ({run_tps / base_tps:.2f}x)" if base_tps and run_tps else "–")
            rows.append({
                "runs": label, "drafting": spec_label(run), "dtype": run.meta.dtype or "not recorded",
                "identical output": f"{comparison.identical} of {len(comparison.requests)}",
                "where they part": "; ".join(f"token {c.divergence.position + 1}: {SHORT_VERDICTS[c.verdict]}"
                                             for c in comparison.requests if c.divergence),
                "tokens/s, baseline -> drafting": speed,
                "machine": run.meta.device_name, "prompts": prompts_label(run),
            })
    return rows
