"""Sweeps: drafting configurations x num_speculative_tokens x concurrency, always with the baseline.

    grid = SweepGrid(target_model=".cache/models/SmolLM2-135M-Instruct",
                     drafters=[{"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}],
                     num_speculative_tokens=[1, 3, 5], concurrencies=[1, 4, 16],
                     prompts="builtin:code", num_requests=16, max_tokens=64)
    sweep = run_sweep(grid, Path("sweeps/code"))   # sweep_runner: 1 baseline + 3 ngram engines, 3 cells each
    table = sweep_table(sweep)                     # sweep_table: a row per cell, speedup vs baseline at that c

One engine per configuration (a drafter at one k, or the baseline), reused across concurrencies,
with a warm-up at each concurrency before measuring. After every run the sweep file
(`<out>/sweep.json`, sweep_files.save_sweep) is rewritten atomically and the run (with its traces) is
saved under `<out>/runs/`, so an interrupted sweep keeps its finished runs and the same command resumes it.

With `repeats=N` every cell is measured N times, in rounds: each round starts every configuration
once (sweep_plan), so drift on the machine spreads over all of them. A cell keeps one run per
repeat; its figures are the median with the min-max spread (SweepCell), the speedup is paired by
round (speedups), and acceptance pools the runs with a bootstrap interval over requests.
With `traced=False` the servers run as vLLM serves by default (no tracer; async scheduling as the
server decides) and acceptance comes from vLLM's counters and per-request figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, computed_field, model_validator

from .acceptance_at_k import MIN_DRAFTED_STEPS
from .base import Frozen as _Frozen
from .base import SpecvizError
from .config import SCHEDULE_FIELD, ConfigError, DraftingFacts, SpecConfig, short_model_name
from .metrics import (
    StepFigures,
    Summary,
    bootstrap_acceptance_length,
    count_acceptance,
    counted_step_figures,
    step_figures,
    summarize,
)
from .runfile import Run

SWEEP_FILE_KIND = "specviz.sweep"
SWEEP_SCHEMA_VERSION = 3  # 3: a cell's drafting is one typed spec; 2: one run per repeat; 1: one run, flat
BASELINE = "baseline"


class SweepError(SpecvizError, ValueError):
    """A sweep that cannot start or continue; the message says what to change."""


def drafter_label(drafter: dict | None) -> str:
    """A short name for a drafting configuration, unique within a grid.

    {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4} -> "ngram lookup 2-4"
    {"method": "ngram", "prompt_lookup_max": 4}                         -> "ngram lookup 4-4" (vLLM's default min)
    {"method": "draft_model", "model": "/m/tiny-draft"}                 -> "draft_model tiny-draft"
    {"method": "ngram", "num_speculative_tokens": 4,
     "num_speculative_tokens_per_batch_size": [[1, 1, 4], [2, 64, 1]]}  -> "ngram k by batch 1:4 2-64:1"
    """
    if drafter is None:
        return BASELINE
    d = dict(drafter)
    method = d.pop("method")
    schedule = d.pop(SCHEDULE_FIELD, None)
    if schedule:
        d.pop("num_speculative_tokens", None)  # the schedule's largest k: implied
    parts = [method]
    if "model" in d:
        parts.append(short_model_name(d.pop("model")))
    if "prompt_lookup_min" in d or "prompt_lookup_max" in d:
        # vLLM 0.32 gives a missing bound the other's value (SpeculativeConfig.__post_init__,
        # vllm/config/speculative.py): {"prompt_lookup_max": 4} drafts as lookup 4-4.
        lo, hi = d.pop("prompt_lookup_min", None), d.pop("prompt_lookup_max", None)
        parts.append(f"lookup {lo if lo is not None else hi}-{hi if hi is not None else lo}")
    parts += [f"{key}={value}" for key, value in sorted(d.items())]
    if schedule:
        parts.append("k by batch " + " ".join(f"{a}:{k}" if a == b else f"{a}-{b}:{k}" for a, b, k in schedule))
    return " ".join(parts)


class SweepGrid(_Frozen):
    """What to measure. Drafters are speculative configs without `num_speculative_tokens` (the grid's k);
    `schedules` are whole configs whose k follows the batch size, each measured as one more row."""

    target_model: str
    drafters: list[dict]
    num_speculative_tokens: list[int] = Field(min_length=1)
    concurrencies: list[int] = Field(min_length=1)
    prompts: str = Field(description="builtin:NAME or a prompt file, cycled to num_requests")
    num_requests: int = Field(ge=1, description="requests per cell; at least the largest concurrency")
    max_tokens: int = Field(ge=1)
    temperature: float = 0.0
    seed: int = 0
    dtype: str = "auto"
    logprobs: int = Field(default=0, ge=0, description="top candidates kept per output token (0: none, as "
                                                        "sweeps before logprobs were recorded)")
    vllm_args: list[str] = Field(default_factory=list, description="more server arguments, e.g. --tensor-parallel-size 4")
    repeats: int = Field(default=1, ge=1, description="runs per cell, in rounds: every configuration once per round")
    traced: bool = Field(default=True, description="False: servers keep their own defaults (no tracer, async "
                                                   "scheduling as vLLM decides); acceptance from vLLM's counters")
    schedules: list[dict] = Field(default_factory=list, description=(
        "whole speculative configs with num_speculative_tokens_per_batch_size, measured at every concurrency"))
    cells_at_k: dict[int, list[int]] | None = Field(default=None, description=(
        "k -> the concurrencies measured at that k (0: the baseline), for a confirmation that measures only the "
        "cells that decide; None: every k at every concurrency. Schedules are measured at every concurrency."))

    @model_validator(mode="after")
    def _check(self) -> SweepGrid:
        for name, values in (("num_speculative_tokens", self.num_speculative_tokens),
                             ("concurrencies", self.concurrencies)):
            if any(v < 1 for v in values) or len(set(values)) != len(values):
                raise ValueError(f"{name} must be distinct integers >= 1, got {values}")
        if self.num_requests < max(self.concurrencies):
            raise ValueError(f"num_requests ({self.num_requests}) is below the largest concurrency "
                             f"({max(self.concurrencies)}): that concurrency would never be reached")
        labels = [drafter_label(d) for d in self.drafters + self.schedules]
        if len(set(labels)) != len(labels):
            raise ValueError(f"two drafters have the same configuration: {labels}")
        return self

    def engine_configs(self) -> list[tuple[str, SpecConfig | None]]:
        """(drafter label, spec) per engine: the baseline first, then each drafter at each k.

        Raises ConfigError naming the bad drafter, before any engine starts.
        """
        configs: list[tuple[str, SpecConfig | None]] = [(BASELINE, None)]
        for d in self.drafters:
            if "num_speculative_tokens" in d:
                raise ConfigError(f"drafter {d}: leave out 'num_speculative_tokens'; the sweep's k values "
                                  f"({self.num_speculative_tokens}) are applied to every drafter")
            for k in sorted(self.num_speculative_tokens):
                configs.append((drafter_label(d), SpecConfig.from_dict(d | {"num_speculative_tokens": k})))
        for d in self.schedules:
            spec = SpecConfig.from_dict(d)
            if not spec.schedule:
                raise ConfigError(f"schedule {d}: it has no {SCHEDULE_FIELD!r}; put a static config in drafters")
            configs.append((drafter_label(d), spec))
        return configs

    def concurrencies_for(self, spec: SpecConfig | None) -> list[int]:
        """The concurrencies a configuration is measured at (cells_at_k narrows the static ones)."""
        if self.cells_at_k is None or (spec is not None and spec.schedule):
            return list(self.concurrencies)
        wanted = set(self.cells_at_k.get(spec.num_speculative_tokens if spec else 0, []))
        return [c for c in self.concurrencies if c in wanted]


class CellRun(Summary):
    """One run of a cell: its figures (metrics.Summary) and what the sweep keeps beside them."""

    repeat: int = Field(ge=0, description="the repeat round the run was measured in, from 0")
    run_file: str = Field(description="the run with its traces, relative to the sweep folder")
    wall_time_s: float
    steps: StepFigures = Field(description="from the tracer's steps, or from vLLM's counters when untraced")
    request_acceptance: list[tuple[int, int]] | None = Field(
        default=None, description="(num_drafts, num_accepted_tokens) per request in request order, for the "
                                  "bootstrap interval; None when the server did not report them")
    traced: bool = Field(description="the server ran the specviz tracer (which needs async scheduling off)")
    async_scheduling: bool | None = Field(description="None when unknown")
    engine_ready_after_s: float | None
    created_at: str


def median_or_none(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


class SweepCell(DraftingFacts, _Frozen):
    """One configuration (a drafter at one k, or the baseline) at one concurrency: one run per repeat.

    Its figures are over its runs. Throughput: the median and the spread (min-max), e.g. runs at
    40, 44 and 41 output tokens/s -> 41, spread 40-44. Acceptance: over all the runs' drafted steps
    (the same prompts each time), with a 90% bootstrap interval that resamples the requests (a
    request's counts summed over the repeats, so a prompt counts once). The median, the spread and
    the interval are written into the file beside the runs and recomputed when it is read. A
    schema-1 cell (one run, its figures flat in the cell) is read as a cell of one run.
    """

    drafter: str = Field(description="drafter_label(), or 'baseline'")
    spec: SpecConfig | None = Field(description="the drafting configuration; None: the baseline (no drafting)")
    concurrency: int
    prompt_set: str
    num_requests: int
    max_tokens: int
    runs: list[CellRun] = Field(min_length=1, description="one per repeat, in the order measured")

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data):
        if isinstance(data, dict):
            if "runs" not in data and "run_file" in data:
                data = _cell_from_v1(data)
            data = {k: v for k, v in data.items() if k not in cls.model_computed_fields}
            data = DraftingFacts.from_recorded_fields(data)  # schema 1-2: vLLM's dict, its method and k beside it
        return data

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.drafter, self.num_speculative_tokens, self.concurrency)

    @computed_field
    @property
    def repeats(self) -> int:
        return len(self.runs)

    @computed_field
    @property
    def traced(self) -> bool:
        """True when every run was traced (acceptance from the tracer's steps, else from vLLM's counters)."""
        return all(r.traced for r in self.runs)

    @computed_field
    @property
    def async_scheduling(self) -> bool | None:
        values = {r.async_scheduling for r in self.runs}
        return values.pop() if len(values) == 1 else None

    @computed_field
    @property
    def output_tokens_per_s(self) -> float:
        """Median over the runs of all output tokens / wall time of the run."""
        return median_or_none([r.output_tokens_per_s or 0.0 for r in self.runs])

    @computed_field
    @property
    def output_tokens_per_s_min(self) -> float:
        return min(r.output_tokens_per_s or 0.0 for r in self.runs)

    @computed_field
    @property
    def output_tokens_per_s_max(self) -> float:
        return max(r.output_tokens_per_s or 0.0 for r in self.runs)

    def _pooled(self, field: str, weight: str) -> float | None:
        """One of the runs' figures over all of them, each run weighted by a count of it: lengths 1.75 and
        1.625 over 4 and 8 drafts -> (1.75 * 4 + 1.625 * 8) / 12 = 1.667 = 1 + (3 + 5) / 12."""
        runs = [r for r in self.runs if getattr(r, weight) and getattr(r, field) is not None]
        total = sum(getattr(r, weight) for r in runs)
        return sum(getattr(r, field) * getattr(r, weight) for r in runs) / total if total else None

    @computed_field
    @property
    def mean_acceptance_length(self) -> float | None:
        """Over all the runs' drafted steps: the runs' figures weighted by their drafts."""
        return self._pooled("mean_acceptance_length", "num_drafts")

    @computed_field
    @property
    def mean_acceptance_length_90(self) -> tuple[float, float] | None:
        """90% bootstrap interval over the requests; None when no run kept per-request counts."""
        return bootstrap_acceptance_length(self.request_acceptance) if self.request_acceptance else None

    @property
    def request_acceptance(self) -> list[tuple[int, int]] | None:
        """(num_drafts, num_accepted_tokens) per request, summed over the runs that kept them."""
        kept = [r.request_acceptance for r in self.runs if r.request_acceptance]
        if not kept:
            return None
        n = min(len(counts) for counts in kept)
        return [(sum(c[i][0] for c in kept), sum(c[i][1] for c in kept)) for i in range(n)]

    @property
    def draft_acceptance_rate(self) -> float | None:
        return self._pooled("draft_acceptance_rate", "num_draft_tokens")

    @property
    def acceptance_rate_per_pos(self) -> list[float]:
        runs = [r for r in self.runs if r.num_drafts and r.acceptance_rate_per_pos]
        total = sum(r.num_drafts for r in runs)
        width = max((len(r.acceptance_rate_per_pos) for r in runs), default=0)
        return [sum(r.acceptance_rate_per_pos[j] * r.num_drafts for r in runs if j < len(r.acceptance_rate_per_pos))
                / total for j in range(width)]

    @property
    def steps(self) -> StepFigures:
        """The runs' step figures added up (histogram, steps); the median engine step time."""
        hists = [r.steps.accepted_histogram for r in self.runs]
        width = max(len(h) for h in hists)
        return StepFigures(
            accepted_histogram=[sum(h[a] for h in hists if a < len(h)) for a in range(width)],
            num_steps_without_drafts=sum(r.steps.num_steps_without_drafts for r in self.runs),
            num_engine_steps=sum(r.steps.num_engine_steps for r in self.runs),
            engine_step_time_s=median_or_none([r.steps.engine_step_time_s for r in self.runs
                                        if r.steps.engine_step_time_s is not None]))

    @property
    def counters_match(self) -> bool | None:
        values = [r.counters_match for r in self.runs]
        return None if any(v is None for v in values) else all(values)

    def median_of(self, field: str) -> float | None:
        """The median over the runs of one of their figures, e.g. 'time_per_output_token_s_p50'."""
        return median_or_none([getattr(r, field) for r in self.runs if getattr(r, field) is not None])

    @property
    def platform(self) -> str:
        return self.runs[0].platform

    @property
    def device_name(self) -> str:
        return self.runs[0].device_name

    @property
    def vllm_version(self) -> str:
        return self.runs[0].vllm_version


def _cell_from_v1(d: dict) -> dict:
    """A schema-1 cell (one traced run, flat) as a cell whose one run carries those figures."""
    identity = ("drafter", "method", "num_speculative_tokens", "speculative_config", "concurrency", "prompt_set",
                "num_requests", "max_tokens")
    steps = StepFigures.model_validate(d["steps"])
    run = {k: v for k, v in d.items() if k not in ("drafter", "speculative_config")}
    run |= dict(run_id=Path(d["run_file"]).name.split(".")[0], complete=True, repeat=0, traced=True,
                async_scheduling=False, request_acceptance_lengths=[], request_acceptance=None,
                num_steps=sum(steps.accepted_histogram) + steps.num_steps_without_drafts)
    return {k: d[k] for k in identity} | {"runs": [run]}


TUNE_FROM_RUN_CONCURRENCIES = [1, 2, 4, 8, 16]


def grid_from_run(run: Run, prompts: str, *, concurrencies: list[int] | None = None, repeats: int = 3) -> SweepGrid:
    """The smallest sweep the tuner predicts from, for one run that drafted: no drafting and the run's drafter at
    its k, at each of `concurrencies` (default 1, 2, 4, 8, 16, and the run's own), with the run's target, dtype,
    output length and sampling; `prompts` is a prompt file holding the run's user messages (the caller writes it).

    Worked: an ngram k=3 run of 8 chat prompts at concurrency 4 -> baseline and ngram (its lookup) at k=3, at
    c = 1, 2, 4, 8, 16, 16 requests per cell (the 8 prompts cycled), `repeats` runs each: 30 runs.
    Raises SweepError when the run cannot seed one: no drafting, a k that follows the batch size, requests
    sent without the chat template (a sweep sends chat messages), or too few drafted steps for a cell of the
    run's prompts cycled to `num_requests` to reach the tuner's MIN_DRAFTED_STEPS.
    """
    spec = run.meta.spec
    if spec is None:
        raise SweepError("this run has no drafting (a baseline): give a run that drafted, at the k to tune from")
    if spec.schedule:
        raise SweepError("this run's k follows the batch size (num_speculative_tokens_per_batch_size): give a run at "
                         "one k, the largest you would serve")
    if any(r.user_message is None for r in run.requests):
        raise SweepError("this run sent its prompts without the chat template, and a sweep sends chat messages: "
                         "record the prompts with `specviz record` (chat is its default) and tune from that run")
    drafter = {key: value for key, value in spec.to_vllm().items() if key != "num_speculative_tokens"}
    concurrencies = sorted(set(concurrencies or TUNE_FROM_RUN_CONCURRENCIES) | {run.meta.concurrency})
    num_requests = max(len(run.requests), max(concurrencies))
    drafted = (run.meta.vllm_counters.num_drafts if not run.meta.traced and run.meta.vllm_counters
               else count_acceptance([s for r in run.requests for s in r.steps], spec.k).num_drafts)
    if drafted * num_requests / len(run.requests) < MIN_DRAFTED_STEPS:
        raise SweepError(
            f"this run drafted {drafted} times over its {len(run.requests)} request(s), so a cell of {num_requests} "
            f"request(s) would draft about {drafted * num_requests // len(run.requests)} times, below the "
            f"{MIN_DRAFTED_STEPS} the tuner needs: record more requests or longer outputs, and tune from that run")
    return SweepGrid(target_model=run.meta.target_model, drafters=[drafter], num_speculative_tokens=[spec.k],
                     concurrencies=concurrencies, prompts=prompts,
                     num_requests=num_requests, max_tokens=run.meta.max_tokens,
                     temperature=run.meta.sampling.get("temperature") or 0.0, seed=run.meta.sampling.get("seed") or 0,
                     dtype=run.meta.dtype or "auto", logprobs=run.meta.sampling.get("logprobs") or 0,
                     repeats=repeats, traced=run.meta.traced)


class Sweep(_Frozen):
    kind: Literal["specviz.sweep"] = SWEEP_FILE_KIND
    schema_version: Literal[3] = SWEEP_SCHEMA_VERSION
    grid: SweepGrid
    cells: list[SweepCell] = Field(default_factory=list)
    notes: str = ""

    def expected_keys(self) -> list[tuple[str, int, int]]:
        return [(label, spec.num_speculative_tokens if spec else 0, c)
                for label, spec in self.grid.engine_configs() for c in self.grid.concurrencies_for(spec)]

    @property
    def runs_planned(self) -> int:
        """Runs the grid asks for: each (drafter, k, concurrency) cell grid.repeats times."""
        return len(self.expected_keys()) * self.grid.repeats

    @property
    def runs_done(self) -> int:
        return sum(len(c.runs) for c in self.cells)

    @property
    def complete(self) -> bool:
        """Every cell of the grid measured grid.repeats times."""
        done = {c.key: len(c.runs) for c in self.cells}
        return all(done.get(key, 0) >= self.grid.repeats for key in self.expected_keys())

    def has_run(self, key: tuple[str, int, int], repeat: int) -> bool:
        return any(c.key == key and any(r.repeat == repeat for r in c.runs) for c in self.cells)

    def with_run(self, drafter: str, spec: SpecConfig | None, run: CellRun) -> tuple[Sweep, SweepCell]:
        """The sweep with one more run in its cell (a new cell for its first run), and that cell."""
        key = (drafter, spec.num_speculative_tokens if spec else 0, run.concurrency)
        cells = list(self.cells)
        i = next((i for i, c in enumerate(cells) if c.key == key), None)
        if i is None:
            cells.append(SweepCell(drafter=drafter, spec=spec, concurrency=run.concurrency,
                                   prompt_set=run.prompt_set, num_requests=run.num_requests, max_tokens=run.max_tokens,
                                   runs=[run]))
            i = len(cells) - 1
        else:
            cells[i] = cells[i].model_copy(update={"runs": [*cells[i].runs, run]})
        return self.model_copy(update={"cells": cells}), cells[i]

    def rows_measured_apart(self) -> dict[tuple[str, int], tuple[str, str]]:
        """The configurations whose first run came after another configuration's last: rows added to a
        finished sweep (`specviz sweep ... --schedule` on its folder) were measured in rounds of their own,
        so the drift between then and the grid's time is in no cell's spread. In interleaved rounds every
        row's first run comes before every row's last; with one round nothing is interleaved, so nothing
        is singled out.

        {('ngram lookup 2-4 k by batch 1:5 2-16:4', 5): ('2026-12-06T18:00:40+00:00', '2026-12-06T18:09:12+00:00')}:
        (drafter, k) -> the row's first and last run."""
        times: dict[tuple[str, int], list[str]] = {}
        for cell in self.cells:
            times.setdefault((cell.drafter, cell.num_speculative_tokens), []).extend(r.created_at for r in cell.runs)
        if self.grid.repeats < 2 or len(times) < 2:
            return {}
        apart = {}
        for (drafter, k), mine in times.items():
            if any(min(mine) > max(ts) for row, ts in times.items() if row != (drafter, k)):
                apart[drafter, k] = (min(mine), max(mine))
        return apart


def request_acceptance(run: Run) -> list[tuple[int, int]] | None:
    """(num_drafts, num_accepted_tokens) per request: from the tracer's steps, else from vLLM's per-request
    figures (`--per-request-spec-decode-metrics`); zeros for the baseline; None when unknown."""
    if run.meta.traced or run.meta.spec is None:
        return [(a.num_drafts, a.num_accepted_tokens) for a in (count_acceptance(r.steps) for r in run.requests)]
    if run.requests and all(r.spec_decode_metrics for r in run.requests):
        return [(r.spec_decode_metrics.num_spec_steps, r.spec_decode_metrics.num_accepted_draft_tokens)
                for r in run.requests]
    return None


def cell_run(run: Run, *, repeat: int, run_file: str, engine_ready_after_s: float | None) -> CellRun:
    """One run's figures as a sweep keeps them (untraced: steps from vLLM's counters)."""
    s = summarize(run)
    starts = [r.start_time_s for r in run.requests]
    ends = [r.end_time_s for r in run.requests if r.end_time_s is not None]
    return CellRun(
        **dict(s), repeat=repeat, run_file=run_file, wall_time_s=max(ends) - min(starts) if ends else 0.0,
        steps=step_figures(run) if run.meta.traced else counted_step_figures(s),
        request_acceptance=request_acceptance(run), traced=run.meta.traced,
        async_scheduling=run.meta.async_scheduling, engine_ready_after_s=engine_ready_after_s,
        created_at=run.meta.created_at,
    )

