"""How long `specviz` takes to refuse a bad argument, beside a good command's time to first engine output.

    .venv/bin/python benchmarks/refusal_time.py [--repeats 3]

A refusal must come before the heavy imports (vLLM, torch, pandas): the target is under 2 s. Each
refusal below is a real `python -m specviz ...` process, timed from launch to exit (the median of
--repeats). The good command, `specviz record` of the demo model with ngram k=3, is timed from launch to
its first line about the engine ("starting vLLM: ..."), then stopped by SIGTERM (as Ctrl-C; its server is
stopped with it). Printed side by side, with the ratio, since the machine may be shared: say how busy it
was next to any figure (the load average is printed).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SPEC = '{"method": "ngram", "num_speculative_tokens": 3}'


def refusals(model: str, out: str) -> dict[str, list[str]]:
    record = ["record", "--model", model, "--out", out]
    return {
        "record --spec (unknown method)": record + ["--spec", '{"method": "nope", "num_speculative_tokens": 3}',
                                                    "--prompts", "builtin:chat"],
        "record --concurrency 0": record + ["--spec", SPEC, "--prompts", "builtin:chat", "--concurrency", "0"],
        "record --prompts (missing file)": record + ["--spec", SPEC, "--prompts", "/nonexistent/prompts.json"],
        "sweep --concurrency 0": ["sweep", "--model", model, "--drafter", '{"method": "ngram"}', "--concurrency", "0",
                                  "--out", out + ".sweep"],
        "sweep --prompts (missing file)": ["sweep", "--model", model, "--drafter", '{"method": "ngram"}',
                                           "--prompts", "/nonexistent/prompts.json", "--out", out + ".sweep"],
    }


def time_refusal(args: list[str]) -> tuple[float, int, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "specviz", *args], cwd=REPO, capture_output=True, text=True)
    return time.perf_counter() - start, done.returncode, done.stderr.strip().splitlines()[-1][:100]


def time_to_engine_output(model: str, out: str) -> float:
    """Launch a good `record`, return the seconds to its first 'starting vLLM' line, then stop it."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "specviz", "record", "--model", model, "--spec", SPEC,
                             "--prompts", "builtin:chat", "--out", out], cwd=REPO, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        seen = None
        buffer = ""
        while seen is None:
            char = proc.stderr.read(1)  # the progress line is redrawn with \r on a terminal: read by character
            if not char:
                raise RuntimeError(f"record ended (code {proc.wait()}) before starting vLLM: {buffer[-300:]}")
            buffer += char
            if "starting vLLM" in buffer:
                seen = time.perf_counter() - start
        return seen
    finally:
        proc.send_signal(signal.SIGTERM)  # as Ctrl-C: it stops its server on the way out
        proc.stderr.close()
        proc.wait(timeout=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--model", default=None, help="default: the demo model (built if missing)")
    args = p.parse_args()
    sys.path.insert(0, str(REPO))
    from specviz.demo_model import ensure_demo_model

    model = args.model or str(ensure_demo_model())
    out = str(Path(tempfile.mkdtemp(prefix="specviz-refusal-")) / "run.json.gz")
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    slowest = 0.0
    for name, argv in refusals(model, out).items():
        runs = [time_refusal(argv) for _ in range(args.repeats)]
        median = statistics.median(t for t, _, _ in runs)
        slowest = max(slowest, median)
        print(f"refusal {name:<34} {median:5.2f} s (median of {args.repeats}; exit {runs[0][1]}): {runs[0][2]}")
    engine = time_to_engine_output(model, out)
    print(f"good record, launch to first engine output  {engine:5.2f} s")
    print(f"slowest refusal / good command's time to engine output: {slowest / engine:.2f} "
          f"({'under' if slowest < 2 else 'OVER'} the 2 s target)")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
