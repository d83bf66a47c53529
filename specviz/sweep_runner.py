"""Running a sweep: every configuration once per round, one engine start each, a warm-up at each
concurrency, and the sweep file rewritten after every run (see sweep.py for the data).

    sweep = run_sweep(grid, Path("sweeps/code"))   # resumes what <out>/sweep.json already holds
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from .config import SpecConfig, check_server_args
from .prompts import load_prompts
from .runfile import save_run
from .sweep import Sweep, SweepCell, SweepError, SweepGrid, cell_run
from .sweep_files import confirmation_folder, file_stem, head_to_head_folder, load_sweep, save_sweep

LOCK_FILE = ".measuring.lock"  # in a sweep folder while a process measures into it (gitignored)


def sweep_prompts(grid: SweepGrid) -> tuple[str, list[str]]:
    """The prompt set's name and its prompts cycled to num_requests (raises PromptSetError)."""
    name, prompts = load_prompts(grid.prompts)
    return name, (prompts * (grid.num_requests // len(prompts) + 1))[: grid.num_requests]


def check_grid(grid: SweepGrid) -> None:
    """Everything that can be refused before an engine starts: configs, draft folders, settings known
    to fail on this platform, model, prompts."""
    if not Path(grid.target_model).is_dir():
        raise SweepError(f"target model {grid.target_model!r} is not a model folder on this machine")
    for _, spec in grid.engine_configs():
        if spec is not None:
            spec.check_local_engine()
            check_server_args(spec, grid.vllm_args)
    sweep_prompts(grid)


def sweep_plan(grid: SweepGrid) -> list[tuple[int, str, SpecConfig | None]]:
    """(repeat, drafter label, spec) per engine start: every configuration once per round, odd rounds reversed.

    The baseline B and ngram at k=1 and 3 with 2 repeats: round 0 starts B, k=1, k=3; round 1 starts
    k=3, k=1, B. Slow drift (the machine warming up, other work arriving) then hits every
    configuration alike, and none always runs first or last. The price is one engine start per
    configuration per round (about 30 s each on a CPU), against one per configuration without repeats.
    """
    configs = grid.engine_configs()
    return [(r, label, spec) for r in range(grid.repeats) for label, spec in (configs[::-1] if r % 2 else configs)]


def runs_left(sweep: Sweep, grid: SweepGrid) -> list[tuple[int, str, SpecConfig | None, list[int]]]:
    """(repeat, label, spec, concurrencies not yet measured) per engine start still needed, in sweep_plan's
    order; an engine start whose concurrencies are all measured is left out."""
    left = []
    for repeat, label, spec in sweep_plan(grid):
        k = spec.num_speculative_tokens if spec else 0
        todo = [c for c in grid.concurrencies_for(spec) if not sweep.has_run((label, k, c), repeat)]
        if todo:
            left.append((repeat, label, spec, todo))
    return left


def this_machine() -> tuple[str, str, str]:
    """(platform, device name, vLLM version) of this machine, as its runs will record them."""
    from .serving.server import local_device, vllm_version

    return (*local_device(), vllm_version())


def check_same_machine(sweep: Sweep, machine: tuple[str, str, str], out_dir: Path) -> None:
    """Refuse to resume a sweep recorded elsewhere: its rounds would set one machine's runs against
    another's (a Xeon's baseline against an EPYC's k=3), which no spread can show. Raises SweepError."""
    recorded = {(c.platform, c.device_name, c.vllm_version) for c in sweep.cells}
    if recorded and recorded != {machine}:
        theirs = "; ".join(f"{p} ({d}), vLLM {v}" for p, d, v in sorted(recorded))
        raise SweepError(f"{out_dir} was recorded on {theirs}; this machine is {machine[0]} ({machine[1]}), vLLM "
                         f"{machine[2]}. Resuming would mix machines in one sweep: use a new --out folder (for "
                         "`specviz tune`, move the drafter's confirm/ folder aside) and measure it all here.")


class MeasuringLock:
    """The lock's handle while measuring: note_server writes the server's process group into the lock file,
    so a resume after this process died (SIGKILL, a crash) can stop an engine it left running."""

    def __init__(self, lock_file, header: str):
        self._file, self._header, self._groups = lock_file, header, []

    def note_server(self, server) -> None:
        self._groups = [server.pgid]  # one engine at a time: the previous one has been stopped
        self._file.seek(0)
        self._file.truncate(0)
        self._file.write(self._header + "".join(f"{SERVER_GROUP} {g}\n" for g in self._groups))
        self._file.flush()
        os.fsync(self._file.fileno())


SERVER_GROUP = "server process group"  # a lock file's line naming the engine being measured


def stop_engines_left_by(lock_text: str) -> list[int]:
    """Stop every vLLM process group a dead holder's lock names (serving.local.stop_leftover_group); the
    groups stopped. 'specviz pid 4242 ...\nserver process group 4301\n' -> [4301] if 4301 still runs vLLM."""
    from .serving.local import stop_leftover_group

    stopped = []
    for line in lock_text.splitlines():
        if line.startswith(SERVER_GROUP + " ") and line.removeprefix(SERVER_GROUP + " ").strip().isdigit():
            pgid = int(line.removeprefix(SERVER_GROUP + " "))
            if pgid != os.getpgid(0) and stop_leftover_group(pgid):
                stopped.append(pgid)
    return stopped


@contextmanager
def measuring_lock(out_dir: Path, on_leftover: Callable[[str], None] | None = None) -> Iterator[MeasuringLock]:
    """Hold `<out_dir>/.measuring.lock` while measuring into out_dir; raises SweepError if another process holds it.

    Two processes measuring into one folder would each rewrite sweep.json without the other's runs, and
    time-share the machine, so both would measure less than it serves. The lock is an flock: the kernel
    drops it when its process ends, however it ends, so a killed sweep leaves no stale lock behind. It
    names the engine's process group (MeasuringLock.note_server): a lock that is free but not empty was
    left by a process that died while measuring, and the engine it names is stopped before measuring
    (`on_leftover(message)` says so).
    """
    import fcntl  # POSIX only, as vLLM's serving is

    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / LOCK_FILE, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().splitlines()[0:1] or ["another process"]
            raise SweepError(f"{out_dir} is being measured by {holder[0].strip()}: wait for it to finish (resuming "
                             "then measures only what is left), or use another --out folder.") from None
        lock.seek(0)
        left = lock.read()
        if stopped := stop_engines_left_by(left):
            message = (f"stopped the vLLM engine (process group {', '.join(map(str, stopped))}) left running by "
                       f"the process that measured into {out_dir} before and died ({left.splitlines()[0].strip()})")
            if on_leftover:
                on_leftover(message)
        header = (f"specviz pid {os.getpid()} on {socket.gethostname()}, since "
                  f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC\n")
        lock.seek(0)
        lock.truncate(0)
        lock.write(header)
        lock.flush()
        try:
            yield MeasuringLock(lock, header)
        finally:
            lock.seek(0)
            lock.truncate(0)
            fcntl.flock(lock, fcntl.LOCK_UN)


def server_args(grid: SweepGrid, spec: SpecConfig | None) -> list[str]:
    """The grid's server arguments; an untraced speculative server also reports per-request acceptance.

    vLLM refuses --per-request-spec-decode-metrics without a speculative config, so the baseline
    goes without it; the 'detailed' level sends each request's acceptance histogram and its per-step
    accepted/drafted arrays with its last chunk, from which untraced_steps rebuilds the step view.
    """
    extra = list(grid.vllm_args)
    if spec is not None and not grid.traced and "--per-request-spec-decode-metrics" not in extra:
        extra += ["--per-request-spec-decode-metrics", "detailed"]
    return extra


def run_sweep(
    grid: SweepGrid,
    out_dir: Path,
    *,
    on_cell: Callable[[SweepCell, Sweep], None] | None = None,
    on_engine: Callable[[str, SpecConfig | None], None] | None = None,
    start_progress: Callable[[float, str], None] | None = None,
) -> Sweep:
    """Measure every run of the grid not yet in `<out_dir>/sweep.json`, in sweep_plan's order; return the sweep.

    `on_cell(cell, sweep)` follows every run with its cell (all of that cell's runs so far).
    Raises SweepError if out_dir holds a sweep of another grid or of another machine, or is being measured
    by another process, or when a server dies (the finished cells stay saved, and the dead cell's partial
    run is kept as `*.incomplete.json.gz`).
    """
    check_grid(grid)
    out_dir = Path(out_dir)
    sweep = _open_sweep(grid, out_dir)
    if not runs_left(sweep, grid):  # a finished sweep opened elsewhere measures nothing, so mixes nothing
        return sweep
    check_same_machine(sweep, this_machine(), out_dir)
    with measuring_lock(out_dir, on_leftover=lambda message: print(f"specviz: {message}", file=sys.stderr)) as lock:
        sweep = _open_sweep(grid, out_dir)  # again, under the lock: another process may have added runs meanwhile
        return _measure(grid, out_dir, sweep, on_cell=on_cell, on_engine=on_engine, start_progress=start_progress,
                        lock=lock)


def _open_sweep(grid: SweepGrid, out_dir: Path) -> Sweep:
    """The sweep in <out_dir>/sweep.json with this grid (or a new one); raises SweepError for another grid."""
    path = out_dir / "sweep.json"
    sweep = load_sweep(path) if path.exists() else Sweep(grid=grid)
    may_change = {"repeats": grid.repeats, "schedules": grid.schedules, "cells_at_k": grid.cells_at_k}
    if (sweep.grid.model_copy(update=may_change) != grid
            or grid.schedules[:len(sweep.grid.schedules)] != sweep.grid.schedules):
        raise SweepError(f"{out_dir} holds a sweep of another grid; use a new --out folder, or the same "
                         f"arguments as before to resume it (--repeats may grow, schedules may be added). Its grid: "
                         f"{sweep.grid.model_dump_json()}")
    return sweep.model_copy(update={"grid": grid})


def _measure(grid: SweepGrid, out_dir: Path, sweep: Sweep, *, on_cell, on_engine, start_progress,
             lock: MeasuringLock | None = None) -> Sweep:
    """run_sweep's measuring loop: every run left, saved as it finishes."""
    from .serving.local import LocalServer
    from .serving.recording import load_tokenizer, record, warmup_prompts

    path = out_dir / "sweep.json"
    prompt_set, prompts = sweep_prompts(grid)
    tokenizer = load_tokenizer(grid.target_model)
    for repeat, label, spec, todo in runs_left(sweep, grid):
        k = spec.num_speculative_tokens if spec else 0
        if on_engine:
            on_engine(label, spec)
        with LocalServer(model=grid.target_model, spec=spec, dtype=grid.dtype, seed=grid.seed, trace=grid.traced,
                         extra_args=server_args(grid, spec), on_spawn=lock.note_server if lock else None) as server:
            ready_s = server.start(progress=start_progress)
            name = label if spec is None or spec.schedule else f"{label} k={k}"  # a schedule's label says its k
            for c in todo:
                # Warm up at this batch size first: the first steps of a new shape are slow. With prompts
                # of no set, so the measured prompts reach vLLM's prefix cache only from measured runs:
                # the engine's first concurrency prefills each distinct prompt once, the later ones find
                # them cached, alike for every configuration (benchmarks/prefix_cache.py).
                warm = record(server, warmup_prompts(c), prompt_set="warm-up", concurrency=c, max_tokens=8,
                              logprobs=grid.logprobs, tokenizer=tokenizer, warmup=False)
                if not warm.meta.complete:
                    raise SweepError(f"cell {name} concurrency {c} failed in its warm-up, before measuring: "
                                     f"{warm.meta.incomplete_reason}\nFinished cells are saved in {path}.")
                run = record(server, prompts, prompt_set=prompt_set, concurrency=c, max_tokens=grid.max_tokens,
                             temperature=grid.temperature, seed=grid.seed, logprobs=grid.logprobs,
                             tokenizer=tokenizer, warmup=False)
                stem = label if spec is None or spec.schedule else f"{label}-k{k}"
                stem = file_stem(stem) + f"-c{c}"
                stem += f"-r{repeat}" if repeat else ""  # the first round keeps the names of one-run sweeps
                if run.meta.invalid_reason:
                    kept = save_run(run, out_dir / "runs" / f"{stem}.invalid.json.gz")
                    raise SweepError(f"cell {name} concurrency {c} broke the run's invariants: "
                                     f"{run.meta.invalid_reason}\nThe run is kept for inspection in {kept} "
                                     f"(`specviz check {kept}`); finished cells are saved in {path}.")
                if not run.meta.complete:
                    kept = save_run(run, out_dir / "runs" / f"{stem}.incomplete.json.gz")
                    raise SweepError(f"cell {name} concurrency {c} failed: {run.meta.incomplete_reason}\n"
                                     f"Finished cells are saved in {path}; the partial run is in {kept}. "
                                     "Run the same command again to resume.")
                run_file = f"runs/{stem}.json.gz"
                save_run(run, out_dir / run_file)
                sweep, cell = sweep.with_run(label, spec, cell_run(
                    run, repeat=repeat, run_file=run_file, engine_ready_after_s=ready_s))
                save_sweep(sweep, path)
                if on_cell:
                    on_cell(cell, sweep)
    return sweep


def run_confirmation(sweep_dir: Path, drafter: str, *, repeats: int = 3, neighbours: int = 1,
                     head_to_head_repeats: int | None = None, sweep: Sweep | None = None, pred=None,
                     **callbacks) -> tuple[Sweep, Sweep | None, SpecConfig | None]:
    """Measure the cells that decide (schedule.confirmation_grid); where the baseline wins a concurrency, the
    drafter idle as one more row (k = 0 of a schedule, SpecConfig.idle()); pick on measurement; then the
    picks' schedule side by side with no drafting and each picked k, in the same rounds
    (schedule.head_to_head_grid, kept in sweep_files.head_to_head_folder); resumable.

    Returns the confirmation sweep, the head-to-head sweep (None when the picks make no schedule: one k or
    none everywhere) and the picks' spec (schedule.Tuned.schedule; None: no drafting pays anywhere; what to
    export is schedule.tuned's answer). `head_to_head_repeats`: runs per head-to-head cell (default
    `repeats`; the head-to-head decides the export, so it may want more). `callbacks` go to run_sweep;
    `sweep` and `pred` (its prediction.Prediction for the drafter), when the caller has them already.
    Raises SweepError when the tuner refuses the drafter as a whole.
    """
    from .prediction import predict
    from .schedule import confirmation_grid, confirmation_rows, head_to_head_grid, needs_idle_row, picks_schedule, schedule_label

    sweep = sweep or load_sweep(Path(sweep_dir) / "sweep.json")
    pred = pred or predict(sweep, drafter)
    if whole := [r for r in pred.refusals if r.concurrency is None]:
        raise SweepError(f"the tuner cannot predict {drafter}: {whole[0].reason}")
    out = confirmation_folder(sweep_dir, drafter)
    kept = load_sweep(out / "sweep.json").grid.schedules if (out / "sweep.json").exists() else []
    grid = confirmation_grid(sweep, pred, repeats=repeats, neighbours=neighbours,
                             schedules=[SpecConfig.from_dict(d) for d in kept])
    confirm = run_sweep(grid, out, **callbacks)
    idle = pred.spec.idle().to_vllm()
    if needs_idle_row(confirmation_rows(pred, confirm)) and idle not in grid.schedules:
        grid = grid.model_copy(update={"schedules": [*grid.schedules, idle]})
        confirm = run_sweep(grid, out, **callbacks)
    rows = confirmation_rows(pred, confirm)
    picked = picks_schedule(pred.spec, {r.concurrency: r.confirmed_k for r in rows})
    if picked is None or not picked.schedule:
        return confirm, None, picked
    side_by_side = head_to_head_grid(confirm.grid, rows, picked, repeats=head_to_head_repeats or repeats)
    folder = head_to_head_folder(sweep_dir, drafter, schedule_label(picked))
    return confirm, run_sweep(side_by_side, folder, **callbacks), picked
