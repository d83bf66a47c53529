"""What one visitor's run file costs specviz: the 200,000-step run of issue 43, before and after, side by side.

    .venv/bin/python benchmarks/long_run_cost.py RUN_FILE [--before CHECKOUT] [--sessions 4] [--request ID]

RUN_FILE is a run with one very long request (issue 43's repro: one request of 200,000 one-token steps, 1.7 MB
gzipped, 58 MB of JSON). Each measurement runs in a fresh Python process of its checkout (this one, and with
--before another, e.g. a worktree of the commit before the fix), so its peak memory is its own (ru_maxrss):

- read: load_run (refused or read) and the time it took;
- check: `python -m specviz check RUN_FILE` (exit code, wall time, peak memory);
- app: the recorded-run view (ui.recorded_run_view of ui.run_from_bytes, the Playground's upload path) in
  Streamlit's AppTest, opened then with the long request chosen, in --sessions sessions of one process (they
  share the app's caches, as browser sessions share one server): the time of each and the peak memory.

This checkout is measured twice: as shipped (the step cap refuses the file), and with SPECVIZ_MAX_RUN_STEPS raised
over the file's records, which measures the views themselves on all 200,000 steps. The figures depend on the
machine and how busy it is; the ratios of the rows, measured in one run of this script, are what to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

# Runs inside the measured checkout (cwd = that checkout, so its specviz is the one imported).
CHILD = r"""
import json, resource, sys, time
what, path, sessions, request_id = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
out = {}
t0 = time.perf_counter()
if what == "read":
    from specviz.runfile import RunFileError, load_run
    try:
        run = load_run(path)
        out["read"] = f"read: {sum(len(r.steps) for r in run.requests):,} steps"
    except RunFileError as e:
        out["read"] = "refused: " + str(e).split(": ", 1)[1][:90]
    out["seconds"] = [time.perf_counter() - t0]
else:
    from streamlit.testing.v1 import AppTest

    page = f'''
from pathlib import Path
import streamlit as st
from specviz import ui
from specviz.runfile import RunFileError
try:
    run = ui.run_from_bytes(Path({path!r}).read_bytes())
except RunFileError as e:
    st.error(f"This file cannot be opened: {{e}}")
else:
    ui.recorded_run_view(run)
'''
    seconds, html = [], []
    for _ in range(sessions):
        t = time.perf_counter()
        at = AppTest.from_string(page, default_timeout=600).run()
        if not at.exception and not at.error:
            at.selectbox(key="request_id").set_value(request_id).run()
        seconds.append(time.perf_counter() - t)
        out["exception"] = [str(e.message)[:200] for e in at.exception]
        out["error"] = [e.value[:120] for e in at.error]
        html.append(sum(len(m.value) for m in at.markdown))
    out["seconds"], out["markdown_chars"] = seconds, html
out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def measure(checkout: Path, what: str, path: Path, sessions: int, request_id: str, env: dict) -> dict:
    python = checkout / ".venv/bin/python"
    python = python if python.exists() else Path(sys.executable)
    started = time.perf_counter()
    if what == "check":
        proc = subprocess.run([str(python), "-c", "import resource, runpy, sys; sys.argv = ['specviz', 'check', "
                               f"{str(path)!r}]\ntry:\n    runpy.run_module('specviz', run_name='__main__')\n"
                               "except SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
                               "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, code, "
                               "file=sys.stderr)"],
                              cwd=checkout, env=env, capture_output=True, text=True)
        peak_line = [line for line in proc.stderr.splitlines() if line.startswith("PEAK")][-1].split()
        return {"seconds": [time.perf_counter() - started], "peak_mb": float(peak_line[1]),
                "exit": int(peak_line[2]) if peak_line[2].lstrip("-").isdigit() else peak_line[2],
                "said": next((line for line in proc.stderr.splitlines() if line.startswith("specviz:")), "")[:110]}
    proc = subprocess.run([str(python), "-c", CHILD, what, str(path), str(sessions), request_id], cwd=checkout,
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"failed": proc.stderr[-600:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


LONGEST = r"""
import gzip, json, sys
raw = open(sys.argv[1], "rb").read()
doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
longest = max(doc["requests"], key=lambda r: len(r.get("steps") or []))
print(json.dumps([longest["request_id"], sum(len(r.get("steps") or []) + len(r.get("stream_chunks") or [])
                                             for r in doc["requests"])]))
"""


def longest_request(path: Path) -> tuple[str, int]:
    """(the request with the most steps, the run's step records), parsed in a process of its own: Linux keeps a
    process's peak memory across fork and exec, so the children measured after would report this one's."""
    out = subprocess.run([sys.executable, "-c", LONGEST, str(path)], capture_output=True, text=True, check=True)
    request_id, records = json.loads(out.stdout)
    return request_id, records


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_file", type=Path)
    ap.add_argument("--before", type=Path, help="a checkout of specviz before the change (its own .venv or this one)")
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--request", help="the request to choose in the app (default: the one with the most steps)")
    args = ap.parse_args()
    path = args.run_file.resolve()
    request_id, records = longest_request(path)
    request_id = args.request or request_id
    base_env = {k: v for k, v in os.environ.items() if k != "SPECVIZ_MAX_RUN_STEPS"}
    trees = [("before", args.before.resolve(), base_env)] if args.before else []
    trees += [("after", HERE, base_env),
              ("after, cap raised", HERE, base_env | {"SPECVIZ_MAX_RUN_STEPS": str(2 * records)})]
    print(f"{path.name}: {path.stat().st_size / 1e6:.1f} MB on disk, {records:,} step records; the app chooses "
          f"request {request_id}; {args.sessions} app sessions in one process; {os.cpu_count()} CPUs "
          f"(a machine shared with other work: compare the rows, not the figures with another run)")
    rows = []
    for label, tree, env in trees:
        for what in ("read", "check", "app"):
            r = measure(tree, what, path, args.sessions, request_id, env)
            rows.append((label, what, r))
            if "failed" in r:
                print(f"{label:<18} {what:<6} FAILED: {r['failed']}")
                continue
            secs = " / ".join(f"{s:.1f}" for s in r["seconds"])
            extra = r.get("read") or r.get("said") or ""
            if what == "app":
                extra = (f"markdown {max(r['markdown_chars']) / 1e6:.1f} MB; "
                         + (f"exception {r['exception'][0]}" if r["exception"] else
                            f"error {r['error'][0]}" if r["error"] else "no exception"))
            code = f" exit {r['exit']}" if "exit" in r else ""
            print(f"{label:<18} {what:<6} {secs:>24} s  peak {r['peak_mb']:7.0f} MB{code}  {extra}", flush=True)
    by = {(label, what): r for label, what, r in rows}
    for what in ("read", "check", "app"):
        if ("before", what) in by and "failed" not in by["before", what]:
            b = by["before", what]
            for label in ("after", "after, cap raised"):
                a = by[label, what]
                if "failed" not in a:
                    print(f"{what}: {label} / before: time {sum(a['seconds']) / sum(b['seconds']):.2f}x, "
                          f"peak memory {a['peak_mb'] / b['peak_mb']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
