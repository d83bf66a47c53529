"""Shared bits of the two trainers: seeding, batching, the learning-rate schedule, saving, model cards."""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from pathlib import Path

# vLLM gives a drafter that shares the target's vocabulary the target's tokenizer, so the 3.5 MB
# tokenizer.json is not shipped; the small files say which tokenizer and chat template belong to it.
TOKENIZER_FILES = ("tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja", "generation_config.json")


def seed_everything(seed: int, threads: int | None = None) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if threads:
        torch.set_num_threads(threads)


def lr_at(step: int, steps: int, peak: float, warmup: int) -> float:
    """Linear warm-up, then cosine decay to 10% of the peak."""
    if step < warmup:
        return peak * (step + 1) / warmup
    t = min(1.0, (step - warmup) / max(1, steps - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


PROBE_STEPS = 8
REFIT_STEP = 64  # the first steps run slower (allocator and cache warm-up), so the pace is measured again


def fitted_steps(elapsed_s: float, time_budget_s: float, probe_steps: int = PROBE_STEPS) -> int:
    """Optimizer steps that fit `time_budget_s` at the pace of the first `probe_steps`, so the
    learning-rate schedule ends when the budget does (8 steps in 4 s, budget 600 s -> 1200 steps)."""
    return max(2 * probe_steps, int(time_budget_s / (elapsed_s / probe_steps)))


class StepSchedule:
    """A trainer's number of optimizer steps and its learning rate at each.

    `steps` 0 = as many as fit `time_budget_s`, set by `fit` after the first PROBE_STEPS and set
    again at REFIT_STEP from the pace of the steps in between. Either way training stops once the
    budget is spent (`over_budget`). Both warm up over PROBE_STEPS, so `--steps N`, with the N a
    budget fitted, repeats that run's schedule on any machine given the time: exactly from
    REFIT_STEP on. Before it the fitted run decayed over its first estimate, so its rate differed
    slightly (say a first estimate of 1100 steps for a final 1403: 0.9944 instead of 0.9966 of the
    peak at step 63)."""

    def __init__(self, steps: int, time_budget_s: float, peak_lr: float):
        self.auto = steps <= 0
        self.steps = 10**6 if self.auto else steps
        self.time_budget_s, self.peak_lr = time_budget_s, peak_lr
        self.started = time.monotonic()
        self.probe_end_s = 0.0

    def fit(self, step: int) -> bool:
        """At the end of the probe, and again at REFIT_STEP, set the number of steps from the pace
        so far; True when it did. (Budget 1200 s; the probe ended at 54 s and step 64 at 110 s, so
        1.0 s a step -> 64 + (1200 - 110) / 1.0 = 1154 steps.)"""
        if not self.auto:
            return False
        if step == PROBE_STEPS:
            self.probe_end_s = self.elapsed_s()
            self.steps = fitted_steps(self.probe_end_s, self.time_budget_s)
            return True
        if step == REFIT_STEP < self.steps:
            elapsed = self.elapsed_s()
            pace_s = (elapsed - self.probe_end_s) / (REFIT_STEP - PROBE_STEPS)
            self.steps = REFIT_STEP + max(1, int((self.time_budget_s - elapsed) / pace_s))
            return True
        return False

    def lr(self, step: int) -> float:
        return lr_at(step, self.steps, self.peak_lr, warmup=PROBE_STEPS)

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def over_budget(self) -> bool:
        return self.elapsed_s() > self.time_budget_s

    def command_args(self) -> str:
        return f"--steps {0 if self.auto else self.steps} --time-budget-s {self.time_budget_s:g}"

    def command_note(self, steps_done: int) -> str:
        return f"   # {steps_done} steps fitted the budget; --steps {steps_done} repeats them" if self.auto else ""


def length_batches(lengths: list[int], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Index batches of similar-length sequences with at most `batch_tokens` (padded) tokens, shuffled."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], rng.random()))
    batches, cur, longest = [], [], 0
    for i in order:
        longest2 = max(longest, lengths[i])
        if cur and longest2 * (len(cur) + 1) > batch_tokens:
            batches.append(cur)
            cur, longest2 = [], lengths[i]
        cur.append(i)
        longest = longest2
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def copy_tokenizer(target: Path, dest: Path) -> list[str]:
    copied = []
    for name in TOKENIZER_FILES:
        if (Path(target) / name).is_file():
            shutil.copy(Path(target) / name, Path(dest) / name)
            (Path(dest) / name).chmod(0o644)
            copied.append(name)
    return copied


def write_json(path: Path, data: dict) -> None:
    Path(path).write_text(json.dumps(data, indent=2) + "\n")


def expected_acceptance_length(rates: list[float]) -> float:
    """1 + sum over positions of the chance all drafts up to it are accepted (per-position conditional rates)."""
    total, alive = 1.0, 1.0
    for r in rates:
        alive *= r
        total += alive
    return total


def write_card(out: Path, title: str, summary: str, command: str, figures: dict, data_meta: dict) -> None:
    """README.md of a trained drafter: what it is, how it was made, what it measured offline."""
    lines = [f"# {title}", "", summary, "", "## How it was made", "", "```", command, "```", "",
             "Training data (on-policy: the target's own greedy answers, generated with vLLM):", ""]
    lines += [f"- {k}: {v}" for k, v in data_meta.items()]
    lines += ["", "## Figures printed at the end of training (held-out answers, offline simulation)", ""]
    lines += [f"- {k}: {v}" for k, v in figures.items()]
    lines += ["", "Measured in vLLM: see sample_runs/drafters/ and docs/drafters.md. This is a teaching-sized",
              "drafter trained in minutes on two CPU cores, not a production one.", ""]
    (Path(out) / "README.md").write_text("\n".join(lines))
