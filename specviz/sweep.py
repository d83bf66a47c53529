"""Sweeps: drafting configurations x num_speculative_tokens x concurrency, always with the baseline.

    grid = SweepGrid(target_model=".cache/models/SmolLM2-135M-Instruct",
                     drafters=[{"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}],
                     num_speculative_tokens=[1, 3, 5], concurrencies=[1, 4, 16],
                     prompts="builtin:code", num_requests=16, max_tokens=64)
    sweep = run_sweep(grid, Path("sweeps/code"))   # 1 baseline + 3 ngram engines, 3 cells each
    table = sweep_table(sweep)                     # one row per cell, speedup vs baseline at that concurrency

One engine per configuration (a drafter at one k, or the baseline), reused across concurrencies,
with a warm-up at each concurrency before measuring. After every cell the sweep file
(`<out>/sweep.json`) is rewritten atomically and the cell's run (with its traces) is saved under
`<out>/runs/`, so an interrupted sweep keeps its finished cells and the same command resumes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .config import ConfigError, SpecConfig
from .metrics import StepFigures, step_figures, summarize
from .prompts import load_prompts
from .trace import Run, first_error, save_run

SWEEP_FILE_KIND = "specviz.sweep"
SWEEP_SCHEMA_VERSION = 1
BASELINE = "baseline"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SweepError(ValueError):
    """A sweep that cannot start or continue; the message says what to change."""


def drafter_label(drafter: dict | None) -> str:
    """A short name for a drafting configuration, unique within a grid.

    {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4} -> "ngram lookup 2-4"
    {"method": "draft_model", "model": "/m/tiny-draft"}                 -> "draft_model tiny-draft"
    """
    if drafter is None:
        return BASELINE
    d = dict(drafter)
    method = d.pop("method")
    parts = [method]
    if "model" in d:
        parts.append(str(d.pop("model")).rstrip("/").split("/")[-1])
    if "prompt_lookup_min" in d or "prompt_lookup_max" in d:
        lo, hi = d.pop("prompt_lookup_min", None), d.pop("prompt_lookup_max", None)
        parts.append(f"lookup {lo if lo is not None else '?'}-{hi if hi is not None else '?'}")
    parts += [f"{key}={value}" for key, value in sorted(d.items())]
    return " ".join(parts)


class SweepGrid(_Frozen):
    """What to measure. Drafters are speculative configs without `num_speculative_tokens` (the grid's k)."""

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
    vllm_args: list[str] = Field(default_factory=list, description="more server arguments, e.g. --tensor-parallel-size 4")

    @model_validator(mode="after")
    def _check(self) -> SweepGrid:
        for name, values in (("num_speculative_tokens", self.num_speculative_tokens),
                             ("concurrencies", self.concurrencies)):
            if any(v < 1 for v in values) or len(set(values)) != len(values):
                raise ValueError(f"{name} must be distinct integers >= 1, got {values}")
        if self.num_requests < max(self.concurrencies):
            raise ValueError(f"num_requests ({self.num_requests}) is below the largest concurrency "
                             f"({max(self.concurrencies)}): that concurrency would never be reached")
        labels = [drafter_label(d) for d in self.drafters]
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
        return configs


class SweepCell(_Frozen):
    """One measured point: one engine configuration at one concurrency."""

    drafter: str = Field(description="drafter_label(), or 'baseline'")
    method: str | None
    num_speculative_tokens: int | None = Field(description="None for the baseline")
    speculative_config: dict | None
    concurrency: int
    prompt_set: str
    num_requests: int
    max_tokens: int
    num_output_tokens: int
    wall_time_s: float
    output_tokens_per_s: float = Field(description="all output tokens / wall time of the cell")
    request_output_tokens_per_s_p50: float | None
    time_per_output_token_s_p50: float | None
    time_per_output_token_s_p90: float | None
    time_to_first_token_s_p50: float | None
    time_to_first_token_s_p90: float | None
    mean_acceptance_length: float | None
    draft_acceptance_rate: float | None
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    num_accepted_tokens_per_pos: list[int]
    acceptance_rate_per_pos: list[float]
    steps: StepFigures
    counters_match: bool | None
    run_file: str = Field(description="the cell's run with its traces, relative to the sweep folder")
    engine_ready_after_s: float | None
    created_at: str
    vllm_version: str
    platform: str
    device_name: str

    @property
    def key(self) -> tuple[str, int | None, int]:
        return (self.drafter, self.num_speculative_tokens, self.concurrency)


class Sweep(_Frozen):
    kind: Literal["specviz.sweep"] = SWEEP_FILE_KIND
    schema_version: Literal[1] = SWEEP_SCHEMA_VERSION
    grid: SweepGrid
    cells: list[SweepCell] = Field(default_factory=list)
    notes: str = ""

    def expected_keys(self) -> list[tuple[str, int | None, int]]:
        return [(label, spec.num_speculative_tokens if spec else None, c)
                for label, spec in self.grid.engine_configs() for c in self.grid.concurrencies]

    @property
    def complete(self) -> bool:
        return {c.key for c in self.cells} >= set(self.expected_keys())


def cell_from_run(run: Run, *, drafter: str, run_file: str, engine_ready_after_s: float | None) -> SweepCell:
    s = summarize(run)
    starts = [r.start_time_s for r in run.requests]
    ends = [r.end_time_s for r in run.requests if r.end_time_s is not None]
    m = run.meta
    return SweepCell(
        drafter=drafter, method=m.method, num_speculative_tokens=m.num_speculative_tokens,
        speculative_config=m.speculative_config, concurrency=m.concurrency, prompt_set=m.prompt_set,
        num_requests=len(run.requests), max_tokens=m.max_tokens, num_output_tokens=s.num_output_tokens,
        wall_time_s=max(ends) - min(starts) if ends else 0.0,
        output_tokens_per_s=s.output_tokens_per_s or 0.0,
        request_output_tokens_per_s_p50=s.request_output_tokens_per_s_p50,
        time_per_output_token_s_p50=s.time_per_output_token_s_p50,
        time_per_output_token_s_p90=s.time_per_output_token_s_p90,
        time_to_first_token_s_p50=s.time_to_first_token_s_p50,
        time_to_first_token_s_p90=s.time_to_first_token_s_p90,
        mean_acceptance_length=s.mean_acceptance_length, draft_acceptance_rate=s.draft_acceptance_rate,
        num_drafts=s.num_drafts, num_draft_tokens=s.num_draft_tokens, num_accepted_tokens=s.num_accepted_tokens,
        num_accepted_tokens_per_pos=s.num_accepted_tokens_per_pos, acceptance_rate_per_pos=s.acceptance_rate_per_pos,
        steps=step_figures(run), counters_match=s.counters_match, run_file=run_file,
        engine_ready_after_s=engine_ready_after_s, created_at=m.created_at, vllm_version=m.vllm_version,
        platform=m.platform, device_name=m.device_name,
    )


# ---- files -------------------------------------------------------------------------------------


def save_sweep(sweep: Sweep, path: Path) -> Path:
    """Write atomically: an interrupted sweep never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(sweep.model_dump_json(indent=1))
    tmp.replace(path)
    return path


def load_sweep(path: str | Path) -> Sweep:
    """Read a sweep file; raise SweepError saying why a corrupt or foreign file is refused."""
    path = Path(path)
    try:
        doc = json.loads(path.read_bytes())
    except OSError as e:
        raise SweepError(f"{path}: cannot read: {e.strerror or e}") from e
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SweepError(f"{path}: not JSON, or truncated ({e})") from e
    if not isinstance(doc, dict) or doc.get("kind") != SWEEP_FILE_KIND:
        raise SweepError(f"{path}: not a specviz sweep file (expected \"kind\": \"{SWEEP_FILE_KIND}\")")
    if doc.get("schema_version") != SWEEP_SCHEMA_VERSION:
        raise SweepError(f"{path}: schema_version {doc.get('schema_version')!r}; "
                         f"this specviz reads version {SWEEP_SCHEMA_VERSION}")
    try:
        return Sweep.model_validate(doc)
    except ValidationError as e:
        raise SweepError(f"{path}: invalid sweep file {first_error(e)}") from e


# ---- running -----------------------------------------------------------------------------------


def sweep_prompts(grid: SweepGrid) -> tuple[str, list[str]]:
    """The prompt set's name and its prompts cycled to num_requests (raises PromptSetError)."""
    name, prompts = load_prompts(grid.prompts)
    return name, (prompts * (grid.num_requests // len(prompts) + 1))[: grid.num_requests]


def check_grid(grid: SweepGrid) -> None:
    """Everything that can be refused before an engine starts: configs, draft folders, model, prompts."""
    if not Path(grid.target_model).is_dir():
        raise SweepError(f"target model {grid.target_model!r} is not a model folder on this machine")
    for _, spec in grid.engine_configs():
        if spec is not None:
            spec.check_local_paths()
    sweep_prompts(grid)


def run_sweep(
    grid: SweepGrid,
    out_dir: Path,
    *,
    on_cell: Callable[[SweepCell, Sweep], None] | None = None,
    on_engine: Callable[[str, SpecConfig | None], None] | None = None,
    start_progress: Callable[[float, str], None] | None = None,
) -> Sweep:
    """Measure every cell of the grid not yet in `<out_dir>/sweep.json`; return the sweep.

    Raises SweepError if out_dir holds a sweep of another grid, or when a server dies (the
    finished cells stay saved, and the dead cell's partial run is kept as `*.incomplete.json.gz`).
    """
    from .engine import LocalServer, load_tokenizer, record

    check_grid(grid)
    out_dir = Path(out_dir)
    path = out_dir / "sweep.json"
    sweep = load_sweep(path) if path.exists() else Sweep(grid=grid)
    if sweep.grid != grid:
        raise SweepError(f"{out_dir} holds a sweep of another grid; use a new --out folder, or the same "
                         f"arguments as before to resume it. Its grid: {sweep.grid.model_dump_json()}")
    done = {c.key for c in sweep.cells}
    prompt_set, prompts = sweep_prompts(grid)
    tokenizer = load_tokenizer(grid.target_model)
    for label, spec in grid.engine_configs():
        k = spec.num_speculative_tokens if spec else None
        todo = [c for c in grid.concurrencies if (label, k, c) not in done]
        if not todo:
            continue
        if on_engine:
            on_engine(label, spec)
        with LocalServer(model=grid.target_model, spec=spec, dtype=grid.dtype, seed=grid.seed,
                         extra_args=grid.vllm_args) as server:
            ready_s = server.start(progress=start_progress)
            for c in todo:
                # Warm up at this batch size first: the first steps of a new shape are slow.
                record(server, prompts[:c], prompt_set=prompt_set, concurrency=c, max_tokens=8,
                       tokenizer=tokenizer, warmup=False)
                run = record(server, prompts, prompt_set=prompt_set, concurrency=c, max_tokens=grid.max_tokens,
                             temperature=grid.temperature, seed=grid.seed, tokenizer=tokenizer, warmup=False)
                stem = f"{label}-k{k}" if k else label
                stem = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in stem) + f"-c{c}"
                if not run.meta.complete:
                    kept = save_run(run, out_dir / "runs" / f"{stem}.incomplete.json.gz")
                    raise SweepError(f"cell {label} k={k} concurrency {c} failed: {run.meta.incomplete_reason}\n"
                                     f"Finished cells are saved in {path}; the partial run is in {kept}. "
                                     "Run the same command again to resume.")
                run_file = f"runs/{stem}.json.gz"
                save_run(run, out_dir / run_file)
                cell = cell_from_run(run, drafter=label, run_file=run_file, engine_ready_after_s=ready_s)
                sweep = sweep.model_copy(update={"cells": [*sweep.cells, cell]})
                save_sweep(sweep, path)
                if on_cell:
                    on_cell(cell, sweep)
    return sweep


# ---- the table ---------------------------------------------------------------------------------

TABLE_COLUMNS = [
    "drafter", "method", "num_speculative_tokens", "concurrency", "prompt_set", "num_requests", "max_tokens",
    "output_tokens_per_s", "speedup", "request_output_tokens_per_s_p50",
    "time_per_output_token_s_p50", "time_per_output_token_s_p90",
    "time_to_first_token_s_p50", "time_to_first_token_s_p90",
    "mean_acceptance_length", "draft_acceptance_rate", "acceptance_rate_per_pos",
    "num_engine_steps", "engine_step_time_s", "counters_match",
    "platform", "device_name", "vllm_version", "created_at", "run_file",
]


def sweep_table(sweep: Sweep) -> pd.DataFrame:
    """One row per cell, in TABLE_COLUMNS order.

    speedup = output tokens/s of the cell / output tokens/s of the baseline at the same concurrency
    and prompt set (None when that baseline cell is missing).
    """
    rows = []
    for cell in sweep.cells:
        row = cell.model_dump(exclude={"steps"})
        row["num_engine_steps"] = cell.steps.num_engine_steps
        row["engine_step_time_s"] = cell.steps.engine_step_time_s
        rows.append(row)
    table = pd.DataFrame(rows, columns=[c for c in TABLE_COLUMNS if c != "speedup"])
    baseline = {(r.concurrency, r.prompt_set): r.output_tokens_per_s
                for r in table.itertuples() if r.drafter == BASELINE}
    table.insert(TABLE_COLUMNS.index("speedup"), "speedup", [
        r.output_tokens_per_s / baseline[(r.concurrency, r.prompt_set)]
        if baseline.get((r.concurrency, r.prompt_set)) else None
        for r in table.itertuples()
    ])
    return table


def sweep_summary_line(cell: SweepCell) -> str:
    k = f"k={cell.num_speculative_tokens}" if cell.num_speculative_tokens else "   "
    al = f"AL {cell.mean_acceptance_length:.2f}" if cell.mean_acceptance_length else "AL  -  "
    return f"{cell.drafter:<24} {k} c={cell.concurrency:<3} {cell.output_tokens_per_s:7.1f} tok/s  {al}"

