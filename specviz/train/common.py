"""Shared bits of the two trainers: seeding, batching, the learning-rate schedule, the training loop,
saving, model cards."""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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


@dataclass
class LoopResult:
    """What the training loop did: steps taken, tokens seen, the smoothed loss and its history."""

    steps: int = 0
    tokens_seen: int = 0
    ema_loss: float | None = None
    history: list[dict] = field(default_factory=list)  # every 50 steps: step, smoothed loss, elapsed_s
    elapsed_s: float = 0.0

    def figures(self) -> dict:
        """The training figures both trainers record, in training.json's order."""
        return {"steps": self.steps, "train_tokens_seen": self.tokens_seen, "train_time_s": round(self.elapsed_s, 1),
                "final_train_loss": round(self.ema_loss or 0, 4)}


def train_loop(model, opt, schedule: StepSchedule, lengths: list[int], *, batch_tokens: int, seed: int,
               batch_loss: Callable[[list[int]], tuple], desc: str, progress=print,
               after_step: Callable[[int], None] | None = None) -> LoopResult:
    """Optimizer steps until `schedule` says stop or its time budget is spent.

    Each step takes the next batch of similar-length sequences (`lengths` are the training
    sequences'), sets the scheduled learning rate, and calls `batch_loss(indices)` -> (loss tensor,
    tokens in the batch); the gradient is clipped to norm 1. `after_step(step)` runs after each."""
    import torch
    from tqdm import tqdm

    rng = random.Random(seed)
    batches: list[list[int]] = []
    done = LoopResult()
    bar = tqdm(total=None if schedule.auto else schedule.steps, desc=desc, unit="step")
    while done.steps < schedule.steps:
        if schedule.fit(done.steps):
            bar.total = schedule.steps
            progress(f"{schedule.steps} steps fit the time budget")
        if not batches:
            batches = length_batches(lengths, batch_tokens, rng)
        for group in opt.param_groups:
            group["lr"] = schedule.lr(done.steps)
        loss, tokens = batch_loss(batches.pop())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        done.steps += 1
        done.tokens_seen += tokens
        done.ema_loss = loss.item() if done.ema_loss is None else 0.98 * done.ema_loss + 0.02 * loss.item()
        bar.set_postfix(loss=f"{done.ema_loss:.3f}")
        bar.update(1)
        if done.steps % 50 == 0:
            done.history.append({"step": done.steps, "loss": round(done.ema_loss, 4),
                                 "elapsed_s": round(schedule.elapsed_s(), 1)})
        if after_step:
            after_step(done.steps)
        if schedule.over_budget():
            progress(f"time budget of {schedule.time_budget_s:.0f} s reached at step {done.steps}")
            break
    bar.close()
    done.elapsed_s = schedule.elapsed_s()
    return done


def print_figures(name: str, figures: dict) -> None:
    print(f"\n== {name} ==")
    for k, v in figures.items():
        print(f"  {k}: {v}")


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


def simulate_chains(chains: list[list[list[bool]]], ks) -> dict:
    """Greedy speculative decoding over answers. `chains[seq][t][j]`: whether the j-th draft of the
    chain started at answer position t is the target's token (False past the answer's end).
    -> {k: (mean acceptance length, per-position rates)}; each step accepts drafts up to the first
    wrong one and the next step starts after the target's own token."""
    out = {}
    for k in ks:
        steps, accepted, per_pos = 0, 0, [0] * k
        for rows in chains:
            t = 0
            while t < len(rows):
                a = 0
                while a < k and rows[t][a]:
                    a += 1
                for j in range(a):
                    per_pos[j] += 1
                steps += 1
                accepted += a
                t += a + 1
        out[k] = (1 + accepted / max(1, steps), [p / max(1, steps) for p in per_pos])
    return out


def simulated_figures(sim: dict) -> dict:
    """`simulate_chains`' result as both trainers record it, rounded."""
    return {"sim_mean_acceptance_length": {k: round(v[0], 3) for k, v in sim.items()},
            "sim_acceptance_per_pos": {k: [round(r, 3) for r in v[1]] for k, v in sim.items()}}


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
