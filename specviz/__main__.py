"""The command line.

    python -m specviz record --model PATH --spec '{"method":"ngram","num_speculative_tokens":3}' \\
        --prompts builtin:code --concurrency 4 --max-tokens 128 --out runs/ngram.json.gz
    python -m specviz check runs/ngram.json.gz       # validate, print the summary as JSON
    python -m specviz compare runs/base.json.gz runs/ngram.json.gz   # same output? each divergence explained
    python -m specviz sweep --model PATH --drafter '{"method":"ngram","prompt_lookup_max":4}' \\
        --k 1,2,3,5 --concurrency 1,2,4,8,16 --prompts builtin:code --out sweeps/code
    python -m specviz import results/my-experiment --out sample_runs/sweeps/mine   # vLLM's bench sweep serve
    python -m specviz methods [--json]               # every drafting method the installed vLLM accepts
    python -m specviz demo-model                     # build the SmolLM2 demo model folder (cached)
    python -m specviz demo-model --mtp               # ... and its MiMo form, for native MTP (method 'mtp')
    python -m specviz schema --out sample_runs/run.schema.json
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shlex
import signal
import sys
from pathlib import Path

from .config import DEFAULT_LOGPROBS, ConfigError, SpecConfig, check_server_args
from .demo_model import default_dtype
from .prompts import PromptSetError, load_prompts

# Nothing heavy at the top (no runfile, httpx, pandas, vLLM): a bad argument is refused in well under 2 s
# (benchmarks/refusal_time.py); each command imports what it needs once its arguments are checked.


def _fail(message: str, code: int = 2) -> int:
    print(f"specviz: {message}", file=sys.stderr)
    return code


def _logprobs(args: argparse.Namespace) -> int:
    """--logprobs, or recording's default."""
    return DEFAULT_LOGPROBS if args.logprobs is None else args.logprobs


def cmd_record(args: argparse.Namespace) -> int:
    # Everything that can be checked is checked before the engine starts, and before the heavy imports.
    if args.spec is not None and not args.spec.strip():
        return _fail("--spec is empty: give a speculative config as JSON, e.g. "
                     "--spec '{\"method\": \"ngram\", \"num_speculative_tokens\": 3}', or --spec none to record "
                     "the baseline (no speculation)")
    try:
        spec = SpecConfig.parse(args.spec) if args.spec else None
        if spec is not None and not args.attach:
            if args.no_platform_check:
                spec.check_local_paths()
            else:
                spec.check_local_engine()
        check_server_args(spec, shlex.split(args.vllm_args or ""))
        prompt_set, prompts = load_prompts(args.prompts)
    except (ConfigError, PromptSetError) as e:
        return _fail(str(e))
    if args.attach is None and args.spec is None:
        return _fail("--spec is required (JSON, or 'none' for the baseline) unless you --attach to a server")
    if args.attach is None and not (args.model and Path(args.model).is_dir()):
        return _fail(f"--model {args.model!r} is not a model folder on this machine (or --attach to a server)")
    if args.concurrency < 1 or args.max_tokens < 1:
        return _fail("--concurrency and --max-tokens must be >= 1")
    if args.num_prompts:
        prompts = (prompts * (args.num_prompts // len(prompts) + 1))[: args.num_prompts]

    from tqdm import tqdm

    from .serving.local import LocalServer
    from .serving.recording import record
    from .serving.server import EngineError

    if args.attach:
        from .serving.attached import AttachError, attach_many

        try:
            trace_files = args.trace_file.split(",") if args.trace_file else None
            server = attach_many(args.attach.split(","), spec=spec, trace_files=trace_files)
        except AttachError as e:
            return _fail(str(e))
        for view in server.views():
            print(f"{'yes' if view.available else 'no ':<4}{view.name}: {view.why}", file=sys.stderr)
    else:
        server = LocalServer(model=args.model, spec=spec, port=args.port, dtype=args.dtype or default_dtype(args.model),
                             max_model_len=args.max_model_len, seed=args.seed,
                             extra_args=shlex.split(args.vllm_args))
    bar = None
    interrupted_while_stopping = False
    try:
        if isinstance(server, LocalServer):
            _start_with_progress(server)
        bar = tqdm(total=len(prompts), unit="req", desc="recording", file=sys.stderr)
        done = request_progress(bar)
        run = record(server, prompts, prompt_set=prompt_set, concurrency=args.concurrency,
                     max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed,
                     logprobs=_logprobs(args), chat=not args.no_chat_template, on_request_done=done,
                     keep_interrupted=True)
        bar.close()
        from .runfile import save_run

        if isinstance(server, LocalServer) and (run.meta.invalid_reason or not run.meta.complete
                                                and not _interrupted(run)):
            server.keep_files = True  # a failed run: the server's log is evidence
        path = save_run(run, args.out)  # before the server stops: a Ctrl-C while it stops loses nothing
    except EngineError as e:
        if bar is not None:
            bar.close()  # ends the bar's line, so the message starts on its own
        if isinstance(server, LocalServer):
            server.keep_files = True
        return _fail(str(e))
    except KeyboardInterrupt:  # while the engine started or warmed up, or a second Ctrl-C: nothing measured
        if bar is not None:
            bar.close()
        return _fail("interrupted; nothing saved", 130)
    finally:
        if isinstance(server, LocalServer):
            interrupted_while_stopping = _stop_server(server)
    from .metrics import incomplete_trace_note, summarize

    s = summarize(run)
    print(json.dumps({"out": str(path), "complete": s.complete, "trace_dropped_steps": s.trace_dropped_steps,
                      "tokens_per_target_pass": s.tokens_per_target_pass,
                      "mean_acceptance_length": s.mean_acceptance_length,
                      "output_tokens_per_s": s.output_tokens_per_s, "counters_match": s.counters_match,
                      "failed_requests": s.num_failed_requests, "padded_draft_slots": s.num_padded_draft_tokens,
                      "invalid_reason": s.invalid_reason, "engine_error": run.meta.engine_error}))
    for line in failed_request_lines(run):
        print(f"specviz: {line}", file=sys.stderr)
    if run.meta.engine_error and run.meta.complete:  # an incomplete run's reason carries it already
        print(f"specviz: the engine's error, from the server's log:\n{run.meta.engine_error}", file=sys.stderr)
    if not run.meta.traced and run.meta.spec is not None:
        print(f"specviz: {untraced_step_note(run)}", file=sys.stderr)
    if incomplete := incomplete_trace_note(run):
        print(f"specviz: {incomplete[0]}", file=sys.stderr)
    if run.meta.invalid_reason:
        return _fail(f"run saved INVALID to {path} (kept with the tracer's raw records): {run.meta.invalid_reason}", 1)
    if not run.meta.complete:
        return _fail(f"run saved INCOMPLETE to {path}: {run.meta.incomplete_reason}",
                     130 if _interrupted(run) or interrupted_while_stopping else 1)
    return 130 if interrupted_while_stopping else 0


def request_progress(bar):
    """The record bar's on_request_done: a failed request is not progress. The bar counts the requests that
    finished; the failures are counted beside it ('3/8 [tokens=64, failed=1]')."""
    failed = []

    def done(res) -> None:
        if res.error:
            failed.append(res.request_id)
        else:
            bar.update(1)
        bar.set_postfix(tokens=len(res.token_ids), **({"failed": len(failed)} if failed else {}))

    return done


def _interrupted(run) -> bool:
    """The user stopped the recording (Ctrl-C, or SIGTERM): the run holds what finished before."""
    from .serving.recording import INTERRUPTED

    return bool(run.meta.incomplete_reason and run.meta.incomplete_reason.startswith(INTERRUPTED))


def _stop_server(server) -> bool:
    """server.stop(); True if a Ctrl-C came while it stopped (stop then SIGKILLs the server's group at once)."""
    try:
        server.stop()
    except KeyboardInterrupt:
        print("specviz: interrupted again while the server stopped: its processes were killed (SIGKILL)",
              file=sys.stderr)
        return True
    return False


def failed_request_lines(run) -> list[str]:
    """One line per distinct request error, naming the requests that failed with it.

    Requests that died with the engine all carry the same error: one line says so, not one per request.
        ['request a1-0 failed: HTTP 400: ...', '3 requests failed (a1-2, a1-3, a1-4): ReadError: ...']
    """
    by_error: dict[str, list[str]] = {}
    for req in run.requests:
        if req.error:
            by_error.setdefault(req.error, []).append(req.request_id)
    lines = []
    for error, ids in by_error.items():
        if len(ids) == 1:
            lines.append(f"request {ids[0]} failed: {error}")
        else:
            shown = ", ".join(ids[:4]) + (f", ... ({len(ids) - 4} more)" if len(ids) > 4 else "")
            lines.append(f"{len(ids)} requests failed ({shown}): {error}")
    return lines


def untraced_step_note(run) -> str:
    """What a run recorded without the tracer holds of the step view (vLLM's per-step arrays, or the flag they need)."""
    from .untraced_steps import has_step_arrays, place_steps

    with_arrays = [r for r in run.requests if has_step_arrays(r)]
    if not with_arrays:
        return ("the server sent no per-step counts, so the run has no step view: start vLLM with "
                "--per-request-spec-decode-metrics detailed (or the specviz tracer, for the draft texts)")
    placements = [place_steps(r, k=run.meta.num_speculative_tokens, method=run.meta.method).placement
                  for r in with_arrays]
    return (f"step view without the tracer: vLLM's per-step counts for {len(with_arrays)} of {len(run.requests)} "
            f"requests, tokens placed exactly for {placements.count('exact')}, approximately for "
            f"{placements.count('approximate')} (draft texts need the tracer)")


def _start_with_progress(server) -> None:
    tty = sys.stderr.isatty()
    shown = {"at": -10.0}

    def show_start(elapsed_s: float, log_tail: str) -> None:
        last_line = log_tail.splitlines()[-1] if log_tail else ""
        if tty:
            print(f"\rstarting vLLM: {elapsed_s:5.0f} s  {last_line[-90:]:<90}", end="", file=sys.stderr)
        elif elapsed_s - shown["at"] >= 10:  # a log file gets a line every 10 s, not a redraw
            shown["at"] = elapsed_s
            print(f"starting vLLM: {elapsed_s:5.0f} s  {last_line[-120:]}", file=sys.stderr)

    took = server.start(progress=show_start)
    print(f"{chr(10) if tty else ''}vLLM ready after {took:.1f} s", file=sys.stderr)

DTYPE_HELP = "the target's dtype (vLLM --dtype); default: float32 for the demo model, else vLLM's 'auto'"
LOGPROBS_HELP = (f"keep the target's top N candidates per output token (default {DEFAULT_LOGPROBS}: a tie of three "
                 "or more shows), so `specviz compare` can say why two runs part; 0 turns it off "
                 "(benchmarks/logprobs_cost.py measures what it costs)")


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def _int_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 1,2,4, got {text!r}") from None


def cmd_sweep(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from .prompts import PromptSetError
    from .sweep import Sweep, SweepError, SweepGrid
    from .sweep_runner import check_grid, run_sweep

    try:
        drafters = [json.loads(d) for d in args.drafter]
        schedules = [json.loads(d) for d in args.schedule]
    except json.JSONDecodeError as e:
        return _fail(f"--drafter or --schedule is not valid JSON ({e.msg} at column {e.colno})")
    try:
        grid = SweepGrid(target_model=args.model, drafters=drafters, schedules=schedules, num_speculative_tokens=args.k,
                         concurrencies=args.concurrency, prompts=args.prompts, num_requests=args.num_requests,
                         max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed,
                         dtype=args.dtype or default_dtype(args.model), logprobs=_logprobs(args),
                         vllm_args=shlex.split(args.vllm_args), repeats=args.repeats, traced=not args.untraced)
        check_grid(grid)  # before any engine starts
    except ValidationError as e:
        return _fail(f"bad sweep: {e.errors()[0]['msg']}")
    except (ConfigError, PromptSetError, SweepError) as e:
        return _fail(str(e))

    out = Path(args.out)
    sweep = _with_progress(lambda callbacks: run_sweep(grid, out, **callbacks), out,
                           total=len(Sweep(grid=grid).expected_keys()) * grid.repeats)
    if isinstance(sweep, int):
        return sweep
    from .sweep_table import outputs_vs_baseline, sweep_table  # pandas: only once there is a sweep to tabulate
    from .sweep_view import measured_apart_warning

    compared = outputs_vs_baseline(sweep, out)
    table = sweep_table(sweep, outputs=compared)
    table.to_csv(out / "sweep.csv", index=False)
    for (drafter, k, c), text in compared.items():
        print(f"outputs of {drafter} k={k} c={c} against the baseline: {text}", file=sys.stderr)
    if apart := measured_apart_warning(sweep, str(out)):
        print(f"warning: {apart}", file=sys.stderr)
    print(json.dumps({"out": str(out / "sweep.json"), "cells": len(sweep.cells), "complete": sweep.complete}))
    return 0


def _with_progress(measure, out: Path, *, total: int, then: str = ""):
    """Run `measure(callbacks)` (run_sweep's on_cell/on_engine) under a progress bar over the sweep at `out`,
    and over `then` (a second sweep's name) if measure goes on to one; its result, or the exit code after
    saying why it stopped (the finished cells stay saved)."""
    from tqdm import tqdm

    from .config import describe_spec
    from .serving.server import EngineError
    from .sweep import SweepError
    from .sweep_files import load_sweep
    from .sweep_table import sweep_summary_line

    bar = None  # drawn once measuring starts: a refusal (a changed grid, a held lock) shows no bar at all

    def progress_bar():
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, unit="run", desc="sweep", file=sys.stderr)
            if (out / "sweep.json").exists():
                bar.update(load_sweep(out / "sweep.json").runs_done)
        return bar

    try:
        def on_cell(cell, sweep) -> None:
            # The count follows the sweep being measured: a confirmation adds the idle row as it goes, and
            # its head-to-head is a sweep of its own, counted from its first run (not past the confirmation's).
            bar = progress_bar()
            if sweep.runs_done <= bar.n:
                bar.reset()
                bar.set_postfix_str(then, refresh=False)
            bar.total = max(sweep.runs_planned, sweep.runs_done)
            bar.update(sweep.runs_done - bar.n)
            bar.write(sweep_summary_line(cell), file=sys.stderr)

        def on_engine(label, spec) -> None:
            progress_bar().set_description(f"starting vLLM: {describe_spec(spec)}")

        return measure(dict(on_cell=on_cell, on_engine=on_engine))
    except (SweepError, EngineError) as e:
        if bar is not None:
            bar.close()
        return _fail(f"{e}", 1)
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        return _fail(f"interrupted; finished cells are saved in {out / 'sweep.json'}; the cell in flight was "
                     "dropped; run the same command to resume", 130)
    finally:
        if bar is not None:
            bar.close()


def cmd_tune(args: argparse.Namespace) -> int:
    from .charts.sweeps import machines, recorded_on
    from .config import describe_spec
    from .prediction import fixed_k_drafters, predict
    from .schedule import (
        EngineCost,
        confirmation_grid,
        export_reason,
        k_text,
        schedule_verdict,
        single_run_caveat,
        tuned,
    )
    from .serve_command import python_config, serve_command_text
    from .sweep import Sweep, SweepError
    from .sweep_files import confirmation_folder, load_sweep
    from .sweep_runner import check_grid, run_confirmation
    from .sweep_view import runs_text
    from .vllm_import import imported_prompts_reason

    folder = Path(args.sweep)
    if folder.is_file():
        folder = _sweep_from_run(folder, args)
        if isinstance(folder, int):
            return folder
    elif args.out or args.concurrency:
        return _fail("--out and --concurrency are for tuning from a run file; a sweep folder has its own")
    try:
        sweep = load_sweep(folder / "sweep.json")
        if reason := imported_prompts_reason(sweep):
            return _fail(reason)
        names = fixed_k_drafters(sweep)
        drafter = args.drafter or (names[0] if len(names) == 1 else None)
        if drafter not in names:
            return _fail(f"--drafter: give one of {names}" if drafter is None
                         else f"--drafter {drafter!r} is not in the sweep; it has {names}")
        pred = predict(sweep, drafter)
        if whole := [r for r in pred.refusals if r.concurrency is None]:
            return _fail(f"the tuner cannot predict {drafter}: {whole[0].reason}")
        grid = confirmation_grid(sweep, pred, repeats=args.repeats, neighbours=args.neighbours)
        check_grid(grid)  # before any engine starts
        if args.head_to_head_repeats is not None and args.head_to_head_repeats < 1:
            raise ValueError(f"--head-to-head-repeats {args.head_to_head_repeats}: give 1 or more runs per cell")
    except (SweepError, ConfigError, ValueError) as e:
        return _fail(str(e))
    out = confirmation_folder(folder, drafter)
    result = _with_progress(lambda callbacks: run_confirmation(
        folder, drafter, repeats=args.repeats, neighbours=args.neighbours,
        head_to_head_repeats=args.head_to_head_repeats, sweep=sweep, pred=pred, **callbacks), out,
        total=(len(Sweep(grid=grid).expected_keys()) + len(grid.concurrencies)) * grid.repeats, then="head-to-head")
    if isinstance(result, int):
        return result
    confirm, head_to_head, _ = result
    print(f"{drafter}: predicted from the sweep, confirmed by measurement ({recorded_on(confirm.cells)}; "
          f"{confirm.grid.repeats} run{'s' if confirm.grid.repeats > 1 else ''} per cell, output tokens/s: "
          "median (min-max))")
    result = tuned(pred, sweep, confirm, [head_to_head] if head_to_head else [])
    exported = result.exported
    for row in result.rows:
        base = row.baseline.text() if row.baseline else "not measured"
        sched = (f" · k=0 with the drafter loaded {row.idle.text()}" if row.idle else "") + (
            f" · schedule {row.schedule.text()}" if row.schedule and result.schedule_measured_in != "head-to-head"
            else "")  # a head-to-head's figures stand beside its own static configs, below
        print(f"  c={row.concurrency:<3} predicted k={row.predicted_k} ({row.predicted_output_tokens_per_s:.1f}) · "
              f"confirmed k={row.confirmed_k} {row.confirmed.text()} · baseline {base}{sched}")
    if result.schedule_measured_in and any(r.schedule for r in result.rows):
        runs = runs_text({len(c.runs) for c in result.schedule_cells})
        print(f"The picks' schedule side by side, measured in the {result.schedule_measured_in} "
              f"({recorded_on(result.schedule_cells)}; {runs} per cell):")
        for row in (r for r in result.rows if r.schedule):
            beside = " · ".join(f"{k_text(k)} {by_c[row.concurrency].short()}"
                                for k, by_c in sorted(result.static_beside.items()) if row.concurrency in by_c)
            print(f"  c={row.concurrency:<3} schedule (k={result.schedule.k_at(row.concurrency)}) "
                  f"{row.schedule.short()} · {beside}")
    for line in [*schedule_verdict(result), export_reason(result) or "", single_run_caveat(result) or ""]:
        if line:
            print("  " + line)
    spent = f"this confirmation {EngineCost.of(confirm.cells).text()}"
    if head_to_head:
        spent += f"; its head-to-head {EngineCost.of(head_to_head.cells).text()}"
    grid_cells = [c for c in sweep.cells if not c.scheduled]
    full = EngineCost.of(grid_cells)
    used = machines([*confirm.cells, *(head_to_head.cells if head_to_head else []), *grid_cells])
    hardware = f" (on {', '.join(used)}: compare runs and starts, not seconds)" if len(used) > 1 else ""
    print(f"engine time (measuring and starting engines): {spent}; the sweep's grid of static k {full.text()}{hardware}")
    print(f"\nExported: {describe_spec(exported)}")
    print("\nServe it (vLLM):\n" + serve_command_text(sweep.grid.target_model, exported, trace=False))
    print("\nOr in Python:\n" + python_config(sweep.grid.target_model, exported))
    if exported is not None and exported.schedule and result.schedule_measured_in is None:
        print(f"\nTo measure it beside every static k of the sweep, run the sweep's command with "
              f"--schedule {shlex.quote(json.dumps(exported.to_vllm()))} and a new --out folder (added to this one "
              "it would be measured in rounds of its own, after the grid)")
    print(json.dumps({"out": str(out / "sweep.json"), "speculative_config": exported.to_vllm() if exported else None}))
    return 0


def _sweep_from_run(path: Path, args: argparse.Namespace) -> Path | int:
    """`tune RUN_FILE --out DIR`: measure the smallest sweep the tuner predicts from (sweep.grid_from_run) into
    DIR, the run's user messages written beside it as the prompt set; DIR, or the exit code. Resumable."""
    from pydantic import ValidationError

    from .config import describe_spec
    from .runfile import RunFileError, load_run
    from .sweep import Sweep, SweepError, drafter_label, grid_from_run
    from .sweep_files import file_stem, save_sweep
    from .sweep_runner import check_grid, run_sweep

    if not args.out:
        return _fail("tuning from a run file measures a small sweep first: give --out, a folder for it")
    try:
        run = load_run(path)
        out = Path(args.out)
        prompts = out / f"{file_stem(run.meta.prompt_set)}.json"
        grid = grid_from_run(run, str(prompts), concurrencies=args.concurrency, repeats=args.repeats)
        messages = json.dumps([r.user_message for r in run.requests], ensure_ascii=False, indent=1)
        if prompts.exists() and prompts.read_text(encoding="utf-8") != messages:
            return _fail(f"{out} already holds a sweep from another run's prompts ({prompts}): give a new --out")
        out.mkdir(parents=True, exist_ok=True)
        prompts.write_text(messages, encoding="utf-8")
        check_grid(grid)  # before any engine starts
    except ValidationError as e:
        return _fail(f"cannot build a sweep from {path}: {e.errors()[0]['msg']}")
    except (RunFileError, SweepError, ConfigError, PromptSetError, OSError) as e:
        return _fail(str(e))
    print(f"measuring the sweep the tuner predicts from into {out}: no drafting and {drafter_label(grid.drafters[0])}"
          f" at k={grid.num_speculative_tokens[0]}, concurrency {', '.join(map(str, grid.concurrencies))}, "
          f"{grid.repeats} runs each", file=sys.stderr)
    sweep = _with_progress(lambda callbacks: run_sweep(grid, out, **callbacks), out,
                           total=len(Sweep(grid=grid).expected_keys()) * grid.repeats)
    if isinstance(sweep, int):
        return sweep
    if not sweep.notes:  # the pages show them as the sweep's recording notes
        m, n = run.meta, len(run.requests)
        save_sweep(sweep.model_copy(update={"notes": (
            f"Measured by `specviz tune {path} --out {out}` from run {m.run_id}: {describe_spec(m.spec)}, prompt set "
            f"'{m.prompt_set}' ({n} request{'s' if n > 1 else ''}, max {m.max_tokens} tokens) at concurrency "
            f"{m.concurrency}, recorded {m.created_at} on {m.platform} ({m.device_name}), vLLM {m.vllm_version}. "
            "Its cells: no drafting and that drafter at that k.")}), out / "sweep.json")
    return out


# `specviz check`'s exit codes (README, "The command line"): 0 valid and complete; 1 invalid (breaks its invariants,
# or its steps disagree with vLLM's counters); 2 unreadable (not a run file, corrupt, too large); 3 valid but
# incomplete (the engine died or the recording was stopped: meta.incomplete_reason says why; or the tracer dropped
# steps it could not write in time: meta.trace_dropped_steps counts them).
CHECK_INCOMPLETE = 3
CHECK_EXIT_CODES = "exit 0: valid and complete; 1: invalid; 2: unreadable; 3: valid but incomplete"


def cmd_import(args: argparse.Namespace) -> int:
    """`import PATH... --out DIR`: vLLM's bench sweep serve folder (or bench serve result files) as a sweep in DIR."""
    from .sweep import SweepError
    from .sweep_files import load_sweep, save_sweep
    from .vllm_import import import_into, is_imported

    existing = Path(args.out) / "sweep.json"
    try:
        if existing.exists() and not is_imported(load_sweep(existing)):
            return _fail(f"{existing} holds a sweep specviz measured: give --out a new folder (or one an import wrote)")
        sweep, report = import_into([Path(p) for p in args.paths], Path(args.out), confirm_prompts=args.confirm_prompts)
    except SweepError as e:
        return _fail(str(e))
    for line in report.lines():
        print(f"left out: {line}")
    path = save_sweep(sweep, Path(args.out) / "sweep.json")
    drafters = sorted({c.drafter for c in sweep.cells})
    print(f"imported {report.num_runs} run(s) of {report.tool} into {path}: {len(sweep.cells)} cells "
          f"({', '.join(drafters)}) at concurrency {', '.join(map(str, sweep.grid.concurrencies))}")
    print(json.dumps({"out": str(path), "cells": len(sweep.cells), "left_out": len(report.skipped)}))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .metrics import incomplete_trace_note, summarize
    from .runfile import RunFileError, load_run

    try:
        run = load_run(args.file)
    except RunFileError as e:
        return _fail(str(e))
    summary = summarize(run)
    print(summary.model_dump_json(indent=2))
    for line in failed_request_lines(run):
        print(f"specviz: {line}", file=sys.stderr)
    if run.meta.engine_error:
        print(f"specviz: the engine's error, from the server's log:\n{run.meta.engine_error}", file=sys.stderr)
    if not run.meta.traced and run.meta.spec is not None:
        print(f"specviz: {untraced_step_note(run)}", file=sys.stderr)
    if summary.num_padded_draft_tokens:
        print(f"specviz: vLLM padded {summary.num_padded_steps} step(s) with {summary.num_padded_draft_tokens} "
              "placeholder draft slots (requests that joined with one token left to compute) and counted them "
              "as rejected drafts; the figures above leave them out, vLLM's own acceptance figures include them",
              file=sys.stderr)
    if run.meta.invalid_reason:
        return _fail(f"INVALID run: {run.meta.invalid_reason}", 1)
    if incomplete := incomplete_trace_note(run):
        print(f"specviz: {incomplete[0]}", file=sys.stderr)
        if not incomplete[1]:
            return _fail("the run's step records disagree with vLLM's own spec-decode counters", 1)
        return CHECK_INCOMPLETE  # the difference is the missing steps', said above
    if summary.counters_match is False:
        return _fail("the run's step records disagree with vLLM's own spec-decode counters", 1)
    if not run.meta.complete:
        return _fail(f"INCOMPLETE run: {run.meta.incomplete_reason or 'no reason recorded'}", CHECK_INCOMPLETE)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from .divergence import compare_runs
    from .runfile import RunFileError, load_run

    try:
        baseline, run = load_run(args.baseline), load_run(args.run)
    except RunFileError as e:
        return _fail(str(e))
    decode = None
    if Path(run.meta.target_model).is_dir():  # decode the two tokens where runs part, when the model is here
        from .serving.recording import load_tokenizer, token_decoder

        decode = token_decoder(load_tokenizer(run.meta.target_model))
    comparison = compare_runs(baseline, run, decode=decode)
    for c in comparison.requests:
        print(f"request {c.prompt_index} ({c.request_id}): {c.full()}")
    if comparison.unmatched:
        print(f"{comparison.unmatched} request(s) of the run have no baseline request with the same prompt")
    print(comparison.summary())
    if not comparison.requests:
        return _fail("nothing to compare: the two runs share no prompt", 2)
    return comparison.exit_code  # 0 identical or ties, 1 NOT a tie, 3 not explained (see RunComparison)


def cmd_methods(args: argparse.Namespace) -> int:
    from .catalog import catalog, catalog_json
    from .method_trials import TrialsFileError, default_trials, load_trials
    from .methods_view import catalog_table

    if args.trials:
        try:
            trials = load_trials(args.trials)
        except TrialsFileError as e:
            return _fail(str(e))
    else:
        trials, problem = default_trials()
        if problem:  # the catalog is still worth printing without the trial results
            print(f"specviz: trial results ignored: {problem}", file=sys.stderr)
    print(catalog_json(trials) if args.json else catalog_table(catalog(trials)))
    return 0


def cmd_demo_model(args: argparse.Namespace) -> int:
    from .demo_model import DemoModelError, ensure_demo_mimo_model, ensure_demo_model

    build = ensure_demo_mimo_model if args.mtp else ensure_demo_model
    try:
        path = build(Path(args.dest) if args.dest else None)
    except DemoModelError as e:
        return _fail(str(e))
    print(path)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from .runfile import run_json_schema

    text = json.dumps(run_json_schema(), indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


VLLM_ARGS = "--vllm-args"
VLLM_ARGS_HELP = ("arguments for {what}, e.g. '--tensor-parallel-size 4 --no-enable-prefix-caching' (quoted, one "
                  "value); one flag may follow unquoted (--vllm-args --no-enable-prefix-caching); repeat "
                  "--vllm-args to add more")


def join_vllm_args(argv: list[str]) -> list[str]:
    """Let `--vllm-args --no-enable-prefix-caching` mean `--vllm-args=--no-enable-prefix-caching`.

    argparse takes a value that starts with '-' for another option and refuses that spelling. The
    one token after --vllm-args is its value (several arguments go in one quoted value); repeated
    --vllm-args are joined into one value, as the shell would split them.
    """
    out: list[str] = []
    values: list[str] = []
    at = None  # where the joined --vllm-args goes: its first occurrence
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":  # the rest are not options
            out += argv[i:]
            break
        if token == VLLM_ARGS and i + 1 < len(argv):
            value, i = argv[i + 1], i + 2
        elif token.startswith(VLLM_ARGS + "="):
            value, i = token[len(VLLM_ARGS) + 1:], i + 1
        else:
            out.append(token)
            i += 1
            continue
        if at is None:
            at = len(out)
            out.append("")
        values.append(value)
    if at is not None:
        out[at] = f"{VLLM_ARGS}={' '.join(values)}"
    return out


def _stdout_reader_gone() -> bool:
    """True when stdout is a pipe whose reader has closed it (`specviz check FILE | head`)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return True  # not a file descriptor: the BrokenPipeError came from this stream
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _quiet_stdout() -> None:
    """Send what is left of stdout to /dev/null, so that the interpreter's last flush raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        sys.stdout = open(os.devnull, "w")  # lives until exit


def _interrupt(signum, frame) -> None:
    """SIGTERM as Ctrl-C: the vLLM servers a command started are stopped on the way out (their context
    managers run), and a sweep says where its finished cells are, instead of leaving servers behind."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="specviz", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("record", help="start vLLM with the tracer, run a prompt set, save the run")
    r.add_argument("--model", help="target model folder (not needed with --attach)")
    r.add_argument("--spec", help="speculative config as JSON, or 'none' for the baseline; with --attach: "
                                  "the config the server was started with (optional)")
    r.add_argument("--attach", metavar="URL[,URL...]",
                   help="record from running vLLM server(s) instead of starting one; several URLs share the "
                        "requests round-robin")
    r.add_argument("--trace-file", help="with --attach: the SPECVIZ_TRACE_FILE of each server (comma-separated, "
                                        "in URL order) when it runs the specviz tracer on this machine")
    r.add_argument("--prompts", required=True, help="builtin:chat|summarize|code|repetitive, or a .txt/.json file")
    r.add_argument("--concurrency", type=int, default=1)
    r.add_argument("--max-tokens", type=int, default=128)
    r.add_argument("--out", required=True, help="run file to write (.json or .json.gz)")
    r.add_argument("--num-prompts", type=int, default=0, help="cycle the prompt set to this many requests")
    r.add_argument("--temperature", type=float, default=0.0)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--dtype", default=None, help=DTYPE_HELP)
    r.add_argument("--logprobs", type=_non_negative, default=None, help=LOGPROBS_HELP)
    r.add_argument("--max-model-len", type=int, default=2048)
    r.add_argument("--port", type=int, default=None, help="default: a free port")
    r.add_argument("--no-chat-template", action="store_true", help="send prompts as raw text")
    r.add_argument(VLLM_ARGS, default="", help=VLLM_ARGS_HELP.format(what="the vLLM server specviz starts"))
    r.add_argument("--no-platform-check", action="store_true",
                   help="start the engine even with a setting known to fail on this platform (to see vLLM's own "
                        "error, or to try a newer vLLM that may have fixed it)")
    r.set_defaults(fn=cmd_record)

    w = sub.add_parser("sweep", help="measure drafters x k x concurrency against the baseline; resumable")
    w.add_argument("--model", required=True, help="target model folder")
    w.add_argument("--drafter", action="append", default=[],
                   help="a speculative config as JSON without num_speculative_tokens; repeat for several")
    w.add_argument("--schedule", action="append", default=[],
                   help="a whole speculative config whose k follows the batch size (with "
                        "num_speculative_tokens_per_batch_size), measured as one more row at every concurrency, "
                        "e.g. what `specviz tune` exports; repeat for several; may be added to a sweep on resume")
    w.add_argument("--k", type=_int_list, default=[1, 2, 3, 5], help="num_speculative_tokens values, e.g. 1,2,3,5")
    w.add_argument("--concurrency", type=_int_list, default=[1, 2, 4, 8, 16], help="e.g. 1,2,4,8,16")
    w.add_argument("--prompts", default="builtin:code", help="builtin:NAME or a .txt/.json file")
    w.add_argument("--num-requests", type=int, default=16, help="requests per cell (prompts are cycled)")
    w.add_argument("--max-tokens", type=int, default=64)
    w.add_argument("--temperature", type=float, default=0.0)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--dtype", default=None, help=DTYPE_HELP)
    w.add_argument("--logprobs", type=_non_negative, default=None, help=LOGPROBS_HELP)
    w.add_argument("--out", required=True, help="folder for sweep.json, sweep.csv and the cells' runs")
    w.add_argument(VLLM_ARGS, default="", help=VLLM_ARGS_HELP.format(what="every vLLM server of the sweep"))
    w.add_argument("--repeats", type=int, default=1,
                   help="runs per cell, in rounds (every configuration once per round, one engine start each); "
                        "the table gives the median and the min-max spread; a larger value adds rounds to a sweep")
    w.add_argument("--untraced", action="store_true",
                   help="measure as vLLM serves by default: no tracer, async scheduling as the server decides; "
                        "acceptance from vLLM's counters and per-request figures")
    w.set_defaults(fn=cmd_sweep)

    t = sub.add_parser("tune", help="confirm the tuner's picks by measurement and export a per-batch-size "
                                    "num_speculative_tokens schedule; resumable")
    t.add_argument("sweep", help="a sweep folder (holding sweep.json), e.g. sample_runs/sweeps/smollm2-code; or a "
                                 "run file that drafted at one k, from which a small sweep is measured first (--out)")
    t.add_argument("--out", help="with a run file: the folder for the sweep measured from it (resumable)")
    t.add_argument("--concurrency", type=_int_list,
                   help="with a run file: concurrencies to measure (default 1,2,4,8,16 and the run's own)")
    t.add_argument("--drafter", help="the drafter's label in the sweep (default: its only drafter)")
    t.add_argument("--repeats", type=int, default=3, help="runs per confirmation cell, in rounds")
    t.add_argument("--neighbours", type=int, default=1,
                   help="also measure this many k either side of the predicted best (default 1)")
    t.add_argument("--head-to-head-repeats", type=int,
                   help="runs per cell of the head-to-head (the picks' schedule beside each static config), "
                        "which decides the export (default: --repeats)")
    t.set_defaults(fn=cmd_tune)

    i = sub.add_parser("import", help="read vLLM's own `bench sweep serve` folder (or `bench serve --save-result` "
                                      "files) as an untraced sweep the Throughput and Tuning pages open")
    i.add_argument("paths", nargs="+", help="one experiment folder (output_dir/experiment_name), or result JSON files")
    i.add_argument("--out", required=True, help="the sweep folder to write (sweep.json; vLLM's files copied under "
                                                "vllm/), e.g. sample_runs/sweeps/NAME")
    i.add_argument("--confirm-prompts", default=None,
                   help="the prompt set `specviz tune` confirms with (builtin:NAME or a file): vLLM's datasets "
                        "are not specviz prompt sets, so without it the sweep can be viewed and predicted from, "
                        "not confirmed")
    i.set_defaults(fn=cmd_import)

    c = sub.add_parser("check", help=f"validate a run file and print its summary as JSON ({CHECK_EXIT_CODES})",
                       description=f"Validate a run file and print its summary as JSON. {CHECK_EXIT_CODES}.")
    c.add_argument("file")
    c.set_defaults(fn=cmd_check)

    cmp = sub.add_parser("compare", help="compare a run with its baseline: identical output, or where they part "
                                         "and whether the target's logprobs show a tie (exit 0 identical or ties, 1 NOT a tie, "
                                         "3 not explained: no logprobs or a token outside the recorded top N)")
    cmp.add_argument("baseline", help="the baseline run file (--spec none)")
    cmp.add_argument("run", help="a run of the same prompts, e.g. with speculative decoding")
    cmp.set_defaults(fn=cmd_compare)

    m = sub.add_parser("methods", help="list every drafting method the installed vLLM accepts")
    m.add_argument("--json", action="store_true", help="print the catalog as JSON")
    m.add_argument("--trials", default=None,
                   help="method-trials file to merge (default: sample_runs/method_trials.json if present)")
    m.set_defaults(fn=cmd_methods)

    d = sub.add_parser("demo-model", help="build the SmolLM2-135M-Instruct demo model folder (cached)")
    d.add_argument("--dest", default=None)
    d.add_argument("--mtp", action="store_true",
                   help="also write its MiMo form (same weights plus one untrained MTP layer) for method 'mtp'; "
                        "prints that folder")
    d.set_defaults(fn=cmd_demo_model)

    s = sub.add_parser("schema", help="print or write the JSON Schema of run files")
    s.add_argument("--out", default=None)
    s.set_defaults(fn=cmd_schema)

    if argv is None:  # the real command line (not a test calling main): `kill` stops it as Ctrl-C does
        signal.signal(signal.SIGTERM, _interrupt)
    argv = join_vllm_args(sys.argv[1:] if argv is None else list(argv))
    args, unknown = p.parse_known_args(argv)
    if unknown:
        hint = (f" (several arguments for vLLM go in one quoted value, {VLLM_ARGS} '--tensor-parallel-size 4', "
                f"or repeat {VLLM_ARGS})") if any(a.startswith(VLLM_ARGS + "=") for a in argv) else ""
        p.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    try:
        code = args.fn(args)
        sys.stdout.flush()  # a reader that stopped early (`| head`) shows here at the latest
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise  # a broken pipe to something else (a server) is a real error
        _quiet_stdout()
        return 141  # as a command killed by SIGPIPE (128 + 13)
    return code


if __name__ == "__main__":
    sys.exit(main())
