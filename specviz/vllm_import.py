"""vLLM's own benchmark results as a specviz sweep: `vllm bench sweep serve` folders and `vllm bench serve` JSONs.

    sweep, report = import_vllm_results([Path("results/my-experiment")])   # a bench sweep serve experiment folder
    sweep, report = import_vllm_results([Path("a.json"), Path("b.json")])  # bench serve --save-result files
    save_sweep(sweep, Path("sample_runs/sweeps/mine/sweep.json"))          # `specviz import` does both

What vLLM 0.32 writes (vllm/benchmarks/sweep/serve.py, vllm/benchmarks/serve.py): under
`output_dir/experiment_name/`, one folder per (serve params, bench params) combination,
`SERVE-<serve params>-BENCH-<bench params>/`, holding `run=N.json` per run (N from 0; `--num-runs`), the runs
again as a list in `summary.json`, and `run=N.failure.json` for a run that failed under `--continue-on-error`
(`SERVE-...-failure.json` at the top for a server that did not start); `summary.csv` at the top holds every
run. Each `run=N.json` is `bench serve`'s result with the combination's serve and bench params merged in flat
(`speculative_config` as a dict, `max_concurrency`, ...) and `run_number`. It holds neither the base serve
command nor the vLLM version nor the hardware: those come from `--metadata vllm_version=... hardware=...`
on the bench command when given (specviz.vllm_bench passes them), and are recorded as unknown otherwise.

The import makes one untraced cell per (speculative config, max_concurrency), its runs the repeats; the
baseline is the combination without `speculative_config`. Acceptance comes from vLLM's counters as bench serve
read them (spec_decode_num_drafts, _draft_tokens, _accepted_tokens, _per_position_acceptance_rates); a cell's
steps are counted from them as for specviz's own untraced sweeps (metrics.counted_step_figures), which is what
the step-cost fit needs. What vLLM does not save, the sweep leaves empty: per-request acceptance (no bootstrap
interval), the engine step time, the p90 of TTFT and TPOT unless `--metric-percentiles` asked for 90.

Refused (SweepError, nothing written): a folder with no vLLM results, files that are not bench serve results,
mixed models or vLLM versions, a drafting run without spec-decode fields, a run without a speculative_config that
drafted anyway (the serve command itself carried one), two combinations that differ in another serve or bench
param yet land in one cell. Listed (ImportReport.skipped, kept in the sweep's notes): failed runs and servers.
"""

from __future__ import annotations

import csv
import json
import re
from datetime import datetime, timezone
from pathlib import Path

from pydantic import Field, ValidationError

from .base import Frozen
from .config import ConfigError, SpecConfig
from .files import first_error
from .metrics import Summary, counted_step_figures
from .sweep import BASELINE, CellRun, Sweep, SweepCell, SweepError, SweepGrid, drafter_label

VLLM_SWEEP_TOOL = "vllm bench sweep serve"
VLLM_BENCH_TOOL = "vllm bench serve"
UNKNOWN = "unknown"
RUN_FILE = re.compile(r"^run=(\d+)\.json$")
FAILURE_FILE = re.compile(r"failure\.json$")
# bench serve's latency figures: mean_ttft_ms, median_tpot_ms, std_itl_ms, p99_e2el_ms, p99.9_ttft_ms, ...
LATENCY_FIELD = re.compile(r"^(mean|median|std|p\d+(\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")
# Keys bench serve writes that specviz does not read; kept out of a cell's identity.
IGNORED_RESULT_FIELDS = {
    "endpoint_type", "backend", "label", "tokenizer_id", "request_rate", "burstiness", "ramp_up_strategy",
    "ramp_up_start_rps", "ramp_up_end_rps", "request_goodput", "total_token_throughput", "max_output_tokens_per_s",
    "max_concurrent_requests", "rtfx", "input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times",
    "queue_times", "generated_texts", "errors", "rps_change_events", "total_input_sequences",
    "input_sequence_throughput", "_benchmark_name",
}
METADATA_FIELDS = ("vllm_version", "hardware", "dtype", "dataset_name")  # --metadata KEY=VALUE that specviz reads


class BenchServeResult(Frozen):
    """The fields of one `vllm bench serve --save-result` JSON that specviz reads (unknown fields refused here;
    the rest of the file is sorted out before, by read_result)."""

    date: str = Field(description="'20261207-154500', the bench client's local time")
    model_id: str
    num_prompts: int
    max_concurrency: int | None
    duration: float
    completed: int
    failed: int = 0
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    output_throughput: float
    spec_decode_acceptance_rate: float | None = None
    spec_decode_acceptance_length: float | None = None
    spec_decode_num_drafts: int | None = None
    spec_decode_draft_tokens: int | None = None
    spec_decode_accepted_tokens: int | None = None
    spec_decode_per_position_acceptance_rates: list[float] | None = None
    run_number: int = 0
    latency_ms: dict[str, float] = Field(default_factory=dict, description="mean_ttft_ms, median_tpot_ms, ...")
    metadata: dict[str, str] = Field(default_factory=dict, description="--metadata keys specviz reads")
    params: dict = Field(default_factory=dict, description="the sweep's serve and bench params, and any other key")

    @property
    def has_spec_decode(self) -> bool:
        return self.spec_decode_num_drafts is not None and self.spec_decode_per_position_acceptance_rates is not None


class ImportReport(Frozen):
    source: str
    tool: str
    num_runs: int
    skipped: list[tuple[str, str]] = Field(default_factory=list, description="(file, why it was left out)")

    def lines(self) -> list[str]:
        return [f"{f}: {why}" for f, why in self.skipped]


def read_result(path: Path) -> BenchServeResult:
    """One bench serve result file, its fields sorted into what specviz reads and the params beside them."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SweepError(f"{path}: not a readable JSON file ({e})") from e
    if not isinstance(doc, dict) or "model_id" not in doc or "output_throughput" not in doc:
        raise SweepError(f"{path}: not a `vllm bench serve --save-result` result (no model_id and "
                         "output_throughput): give the files bench serve saved, or a bench sweep serve folder")
    known = set(BenchServeResult.model_fields) - {"latency_ms", "metadata", "params"}
    fields = {k: v for k, v in doc.items() if k in known}
    fields["latency_ms"] = {k: v for k, v in doc.items() if LATENCY_FIELD.match(k) and v is not None}
    fields["metadata"] = {k: str(doc[k]) for k in METADATA_FIELDS if k in doc}
    fields["params"] = {k: v for k, v in doc.items() if k not in known and k not in fields["latency_ms"]
                        and not LATENCY_FIELD.match(k) and k not in METADATA_FIELDS and k not in IGNORED_RESULT_FIELDS}
    try:
        return BenchServeResult.model_validate(fields)
    except ValidationError as e:
        raise SweepError(f"{path}: invalid bench serve result {first_error(e)}") from e


def _speculative_config(result: BenchServeResult, path: Path) -> SpecConfig | None:
    """The run's drafting, from its serve params (`speculative_config`, a dict or its JSON text)."""
    raw = next((result.params[k] for k in ("speculative_config", "speculative-config") if k in result.params), None)
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as e:
            raise SweepError(f"{path}: speculative_config is not JSON ({raw!r})") from e
    if raw is None:
        if result.spec_decode_num_drafts:
            raise SweepError(
                f"{path}: the run drafted ({result.spec_decode_num_drafts} drafts) but its params hold no "
                "speculative_config, so the serve command itself carried one: put every speculative config in "
                "--serve-params (and none in --serve-cmd), so the baseline and each config are told apart")
        return None
    try:
        return SpecConfig.from_dict(raw)
    except (ConfigError, ValueError, TypeError) as e:
        raise SweepError(f"{path}: speculative_config {raw}: {e}") from e


def _created_at(date: str) -> str:
    """bench serve's '20261207-154500' (local time, no zone) as ISO text; kept as given if it is not that."""
    try:
        return datetime.strptime(date, "%Y%m%d-%H%M%S").isoformat()
    except ValueError:
        return date


def _hardware(metadata: dict[str, str]) -> tuple[str, str]:
    """(platform, device) from --metadata hardware='cpu: AMD EPYC' (or 'MI300X x8'); unknown when not said."""
    text = metadata.get("hardware")
    if not text:
        return UNKNOWN, UNKNOWN
    platform, _, device = text.partition(":")
    return (platform.strip(), device.strip()) if device else (UNKNOWN, text.strip())


def _seconds(result: BenchServeResult, name: str) -> float | None:
    value = result.latency_ms.get(name)
    return value / 1000 if value is not None else None


def cell_run(result: BenchServeResult, spec: SpecConfig | None, run_file: str, run_id: str) -> CellRun:
    """One bench serve result as a sweep's untraced run; acceptance from vLLM's counters as bench serve read them.

    Per position, vLLM saves rates (accepted at position j / drafts); the counts are rate x drafts, rounded:
    rates [0.6, 0.4] over 10 drafts -> num_accepted_tokens_per_pos [6, 4].
    """
    k = spec.num_speculative_tokens if spec else 0
    drafts = result.spec_decode_num_drafts or 0
    rates = list(result.spec_decode_per_position_acceptance_rates or [])[:k] if spec else []
    per_pos = [round(r * drafts) for r in rates]
    accepted = result.spec_decode_accepted_tokens or 0
    draft_tokens = result.spec_decode_draft_tokens or 0
    platform, device = _hardware(result.metadata)
    summary = Summary(
        run_id=run_id, complete=result.failed == 0, method=spec.method if spec else None, num_speculative_tokens=k,
        concurrency=result.max_concurrency or result.num_prompts, prompt_set=_prompt_set(result),
        max_tokens=_output_len(result), num_requests=result.completed, num_output_tokens=result.total_output_tokens,
        num_steps=0, vllm_version=result.metadata.get("vllm_version", UNKNOWN), platform=platform, device_name=device,
        mean_acceptance_length=1 + accepted / drafts if drafts else None,
        draft_acceptance_rate=accepted / draft_tokens if draft_tokens else None,
        num_drafts=drafts, num_draft_tokens=draft_tokens, num_accepted_tokens=accepted,
        num_accepted_tokens_per_pos=per_pos, acceptance_rate_per_pos=rates, request_acceptance_lengths=[],
        output_tokens_per_s=result.output_throughput, request_output_tokens_per_s_p50=None,
        time_to_first_token_s_p50=_seconds(result, "median_ttft_ms"),
        time_to_first_token_s_p90=_seconds(result, "p90_ttft_ms"),
        time_per_output_token_s_p50=_seconds(result, "median_tpot_ms"),
        time_per_output_token_s_p90=_seconds(result, "p90_tpot_ms"),
        counters_match=None, num_failed_requests=result.failed,
    )
    return CellRun(**dict(summary), repeat=result.run_number, run_file=run_file, wall_time_s=result.duration,
                   steps=counted_step_figures(summary), request_acceptance=None, traced=False,
                   async_scheduling=None, engine_ready_after_s=None, created_at=_created_at(result.date))


def _prompt_set(result: BenchServeResult) -> str:
    """The dataset as far as the files say: 'vllm:random' when the bench params named it, else 'vllm:unknown'."""
    name = result.params.get("dataset_name") or result.metadata.get("dataset_name")
    return f"vllm:{name or UNKNOWN}"


def _output_len(result: BenchServeResult) -> int:
    """Output tokens per request: the mean over the completed requests (all the same with --ignore-eos)."""
    return max(1, round(result.total_output_tokens / result.completed)) if result.completed else 1


def _find_results(paths: list[Path]) -> tuple[list[Path], list[tuple[str, str]], str, str]:
    """(result files, failures listed, tool, source) from a sweep folder or from result files."""
    if len(paths) == 1 and paths[0].is_dir():
        folder = paths[0]
        runs = sorted(p for p in folder.glob("*/*.json") if RUN_FILE.match(p.name))
        failures = sorted([*folder.glob("*failure.json"), *folder.glob("*/*.failure.json")])
        if not runs:
            raise SweepError(
                f"{folder}: not a `vllm bench sweep serve` experiment folder (no SERVE-...-BENCH-.../run=N.json "
                "inside" + (f"; {len(failures)} failure file(s)" if failures else "") + "): give the folder "
                "output_dir/experiment_name that bench sweep serve wrote, or bench serve result JSON files")
        skipped = [(str(p.relative_to(folder)), _failure_reason(p)) for p in failures]
        return runs, skipped, VLLM_SWEEP_TOOL, str(folder)
    files = []
    for p in paths:
        if p.is_dir():
            raise SweepError(f"{p}: give one bench sweep serve folder, or bench serve result files, not both")
        if not p.exists():
            raise SweepError(f"{p}: no such file")
        files.append(p)
    skipped = [(str(p), _failure_reason(p)) for p in files if FAILURE_FILE.search(p.name)]
    return [p for p in files if not FAILURE_FILE.search(p.name)], skipped, VLLM_BENCH_TOOL, ", ".join(map(str, paths))


def _failure_reason(path: Path) -> str:
    try:
        doc = json.loads(path.read_text())
        return f"failed: {doc.get('error_type', '?')}: {doc.get('error', '?')}"
    except (OSError, json.JSONDecodeError, AttributeError):
        return "failed (its failure file is unreadable)"


def _identity_params(result: BenchServeResult) -> dict:
    """The params that make a combination, beside its speculative config and concurrency."""
    return {k: v for k, v in result.params.items() if k not in ("speculative_config", "speculative-config",
                                                                 "max_concurrency", "run_number")}


def import_vllm_results(paths: list[Path], *, run_file_prefix: str = "") -> tuple[Sweep, ImportReport]:
    """Build an untraced sweep from vLLM's results (module docstring); raise SweepError saying what to change.
    Each run's run_file is its path in the experiment folder (or its file name), under `run_file_prefix`."""
    if not paths:
        raise SweepError("give a `vllm bench sweep serve` experiment folder or `vllm bench serve` result files")
    files, skipped, tool, source = _find_results([Path(p) for p in paths])
    if not files:
        raise SweepError(f"{source}: every run failed: " + "; ".join(f"{f}: {why}" for f, why in skipped))
    root = Path(paths[0]) if tool == VLLM_SWEEP_TOOL else None
    results = [(p, read_result(p)) for p in files]
    for field, label in (("model_id", "models"), ("vllm_version", "vLLM versions")):
        values = {(r.model_id if field == "model_id" else r.metadata.get(field, UNKNOWN)) for _, r in results}
        if len(values) > 1:
            raise SweepError(f"{source}: the runs mix {label} ({', '.join(sorted(values))}): a sweep compares "
                             "configurations of one model on one vLLM; import each separately")
    cells: dict[tuple[str, int, int], dict] = {}
    for path, result in results:
        spec = _speculative_config(result, path)
        if spec is not None and not result.has_spec_decode:
            raise SweepError(f"{path}: the run drafted with {spec.to_vllm()} but holds no spec-decode fields "
                             "(spec_decode_num_drafts, spec_decode_per_position_acceptance_rates): bench serve "
                             "reads them from the server's /metrics; run it against a vLLM server that reports them")
        if result.max_concurrency is None:
            raise SweepError(f"{path}: no max_concurrency (requests were sent at a rate, not a fixed number in "
                             "flight): give bench serve --max-concurrency, as the tuner works per concurrency")
        label = drafter_label(spec.to_vllm() if spec else None) if spec is None or spec.schedule else \
            drafter_label({k: v for k, v in spec.to_vllm().items() if k != "num_speculative_tokens"})
        key = (label, spec.num_speculative_tokens if spec else 0, result.max_concurrency)
        rel = str(Path(run_file_prefix) / (path.relative_to(root) if root else path.name))
        run_id = f"{path.parent.name}/{path.stem}" if root else path.stem
        entry = cells.setdefault(key, {"spec": spec, "params": _identity_params(result), "runs": [], "results": []})
        if entry["params"] != _identity_params(result):
            raise SweepError(f"{path}: its params {_identity_params(result)} differ from {entry['params']} of another "
                             f"run of {label} at concurrency {result.max_concurrency}: the sweep varies more than "
                             "speculative_config and max_concurrency; import one value of the rest at a time")
        if any(r.repeat == result.run_number for r in entry["runs"]):
            raise SweepError(f"{path}: two runs numbered {result.run_number} of {label} at concurrency "
                             f"{result.max_concurrency}: give each file once")
        entry["runs"].append(cell_run(result, spec, rel, run_id))
        entry["results"].append(result)
    if not any(spec_key[0] == BASELINE for spec_key in cells):
        raise SweepError(f"{source}: no baseline (a combination without speculative_config): add {{}} to "
                         "--serve-params so every speedup has the same server without drafting beside it")
    return _sweep(cells, results, tool, source, skipped), ImportReport(
        source=source, tool=tool, num_runs=len(results), skipped=skipped)


def _sweep(cells: dict, results: list, tool: str, source: str, skipped: list[tuple[str, str]]) -> Sweep:
    first = results[0][1]
    built = []
    for (label, _, c), entry in sorted(cells.items(), key=lambda kv: (kv[0][0] != BASELINE, kv[0])):
        runs = sorted(entry["runs"], key=lambda r: r.repeat)
        built.append(SweepCell(drafter=label, spec=entry["spec"], concurrency=c, prompt_set=runs[0].prompt_set,
                               num_requests=max(r.num_requests for r in runs), max_tokens=runs[0].max_tokens,
                               runs=runs))
    static = {c.drafter: c.spec for c in built if c.spec and not c.spec.schedule}
    drafters = [{k: v for k, v in spec.to_vllm().items() if k != "num_speculative_tokens"} for spec in static.values()]
    schedules = list({c.drafter: c.spec.to_vllm() for c in built if c.spec and c.spec.schedule}.values())
    ks = sorted({c.num_speculative_tokens for c in built if c.spec and not c.spec.schedule}) or [1]
    concurrencies = sorted({c.concurrency for c in built})
    params = cells[next(iter(cells))]["params"]
    input_len = round(first.total_input_tokens / first.completed) if first.completed else 0
    grid = SweepGrid(
        target_model=first.model_id, drafters=drafters, num_speculative_tokens=ks, concurrencies=concurrencies,
        prompts=built[0].prompt_set, num_requests=max(max(c.num_requests for c in built), max(concurrencies)),
        max_tokens=max(c.max_tokens for c in built), dtype=str(params.get("dtype") or first.metadata.get("dtype")
                                                                 or "auto"),
        repeats=max(len(c.runs) for c in built), traced=False, schedules=schedules)
    notes = [f"Imported from {tool} results ({source}) by `specviz import`, {datetime.now(timezone.utc):%Y-%m-%d}: "
             f"{len(results)} run(s) of {first.model_id}, about {input_len} input and {grid.max_tokens} output tokens "
             f"per request, {grid.num_requests} prompts, dataset {built[0].prompt_set.removeprefix('vllm:')}; "
             f"vLLM {first.metadata.get('vllm_version', UNKNOWN)}; hardware "
             f"{first.metadata.get('hardware', UNKNOWN + ' (the files do not say)')}. Untraced: acceptance from "
             "vLLM's counters as bench serve read them; no per-request acceptance, no engine step time."]
    notes += [f"Left out: {f}: {why}" for f, why in skipped]
    return Sweep(grid=grid, cells=built, notes="\n".join(notes))


VLLM_FILES_DIR = "vllm"  # where `specviz import` keeps vLLM's files inside the sweep folder
IMPORTED_PROMPTS_PREFIX = "vllm:"  # a grid's prompts that name vLLM's dataset, not a specviz prompt set


def import_into(paths: list[Path], out: Path, *, confirm_prompts: str | None = None) -> tuple[Sweep, ImportReport]:
    """Import (import_vllm_results) and copy vLLM's files to `out/vllm/`, so the sweep folder holds its sources;
    the caller saves the sweep as `out/sweep.json`. Nothing is copied when the import is refused.
    `confirm_prompts` (builtin:NAME or a file) becomes the grid's prompts, those `specviz tune` confirms with."""
    import shutil

    from .prompts import PromptSetError, load_prompts

    paths = [Path(p) for p in paths]
    sweep, report = import_vllm_results(paths, run_file_prefix=VLLM_FILES_DIR)
    if confirm_prompts:
        try:
            load_prompts(confirm_prompts)
        except (PromptSetError, OSError, ValueError) as e:
            raise SweepError(f"--confirm-prompts {confirm_prompts}: {e}") from e
        sweep = sweep.model_copy(update={"grid": sweep.grid.model_copy(update={"prompts": confirm_prompts}),
                                         "notes": sweep.notes + f"\n`specviz tune` confirms with {confirm_prompts} "
                                                 "through specviz's own client, not vLLM's dataset."})
    dest, part = out / VLLM_FILES_DIR, out / (VLLM_FILES_DIR + ".part")
    shutil.rmtree(part, ignore_errors=True)
    if len(paths) == 1 and paths[0].is_dir():
        shutil.copytree(paths[0], part)
    else:
        part.mkdir(parents=True)
        for p in paths:
            shutil.copy2(p, part / p.name)
    shutil.rmtree(dest, ignore_errors=True)
    part.replace(dest)
    return sweep, report


def imported_prompts_reason(sweep: Sweep) -> str | None:
    """Why `specviz tune` cannot confirm an imported sweep as it stands; None when it can."""
    if not sweep.grid.prompts.startswith(IMPORTED_PROMPTS_PREFIX):
        return None
    return (f"this sweep was imported from vLLM's benchmark (dataset {sweep.grid.prompts.removeprefix('vllm:')}), "
            "which specviz's client cannot replay: import it again with --confirm-prompts builtin:NAME (or a prompt "
            "file) to confirm the picks by measurement on those prompts")


def summary_csv_rows(folder: Path) -> int:
    """Rows of the experiment's summary.csv (every run bench sweep serve finished); 0 when it has none."""
    path = Path(folder) / "summary.csv"
    if not path.exists():
        return 0
    with path.open(newline="") as f:
        return sum(1 for _ in csv.DictReader(f))


def is_imported(sweep: Sweep) -> bool:
    """A sweep read from vLLM's own results (its cells' prompt sets name vLLM's dataset)."""
    return any(c.prompt_set.startswith(IMPORTED_PROMPTS_PREFIX) for c in sweep.cells)


NOT_SAVED_BY_VLLM = ("per-request acceptance (so no 90% interval on the acceptance length), the engine step time "
                     "(so the time per target pass is inferred from throughput, as for specviz's untraced sweeps), "
                     "the specviz tracer's steps, and the outputs (so 'identical to the baseline' is not checked)")


def imported_lines(sweep: Sweep, step_cost_reason: str | None) -> list[str]:
    """What the Tuning page says about an imported sweep: where its figures come from, what vLLM did not save, and
    which prediction cannot be made (the step-cost fit's reason, when it refused)."""
    if not is_imported(sweep):
        return []
    lines = ["Imported from vLLM's own benchmark: throughput, latency and acceptance per draft position are vLLM's "
             "figures (bench serve's output_throughput and spec_decode_* fields, from the server's counters). "
             f"vLLM does not save {NOT_SAVED_BY_VLLM}."]
    if step_cost_reason:
        lines.append(f"The tuner cannot predict throughput at unmeasured k from these files: {step_cost_reason}. "
                     "The measured cells and the best measured k per concurrency are below.")
    if reason := imported_prompts_reason(sweep):
        lines.append(reason.replace("this sweep", "`specviz tune`: this sweep", 1))
    return lines


def best_measured_k(sweep: Sweep, drafter: str) -> list[dict]:
    """Per concurrency, the drafter's measured k with the most output tokens/s (median of its runs), beside the
    baseline: [{'concurrency': 1, 'best measured k': 4, 'output tokens/s': 250.1, 'baseline tokens/s': 94.0,
    'speedup': 2.66}, ...]; k=0 when no k beat the baseline."""
    rows = []
    for c in sorted({cell.concurrency for cell in sweep.cells}):
        base = next((x for x in sweep.cells if x.spec is None and x.concurrency == c), None)
        mine = [x for x in sweep.cells if x.drafter == drafter and x.concurrency == c and not x.scheduled]
        if not mine:
            continue
        best = max(mine, key=lambda x: x.output_tokens_per_s)
        if base is not None and base.output_tokens_per_s >= best.output_tokens_per_s:
            best = base
        rows.append({"concurrency": c, "best measured k": best.num_speculative_tokens,
                     "output tokens/s": round(best.output_tokens_per_s, 1),
                     "baseline tokens/s": round(base.output_tokens_per_s, 1) if base else None,
                     "speedup": round(best.output_tokens_per_s / base.output_tokens_per_s, 2) if base else None,
                     "runs": len(best.runs)})
    return rows
