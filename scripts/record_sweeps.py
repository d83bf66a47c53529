"""Record the sample sweeps in sample_runs/sweeps/ with the SmolLM2 demo model on this machine.

    .venv/bin/python scripts/record_sweeps.py            # resumes where an interrupted recording stopped

Each sweep is what `python -m specviz sweep` records (the command for each is printed first), so a
user reproduces one on their own server with that command. Where a sweep is tuned, `python -m specviz
tune` then confirms the tuner's picks on fresh runs (into <sweep>/confirm/) and measures the picks'
schedule head to head with no drafting and the static k it stands against, in the same rounds
(<sweep>/confirm/<drafter>/head-to-head/): that is the schedule's row. (Added to the finished sweep's
folder, a row would be measured in rounds of its own, after the grid: Sweep.rows_measured_apart.)
Run it on a quiet machine: the figures are throughput measurements.
"""

import json
import shlex
import subprocess
import sys

from specviz.demo_model import ensure_demo_model
from specviz.files import REPO_DIR
from specviz.train import drafter_spec

NGRAM_2_4 = {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}
# The teaching-sized drafters trained for SmolLM2 by `python -m specviz.train` (see docs/drafters.md).
DRAFT_MODEL = drafter_spec("draft_model", relative_to=REPO_DIR)
EAGLE3 = drafter_spec("eagle3", relative_to=REPO_DIR)
SWEEPS = {
    # Three repeats per cell. chat: about 76 minutes for its 10 configurations on a 2-core AMD EPYC; recorded
    # in bfloat16 at k = 1, 3, 5 before the demo model's float32 default (re-recorded below as smollm2-chat-f32).
    "smollm2-chat": dict(prompts="builtin:chat", drafters=[NGRAM_2_4, DRAFT_MODEL, EAGLE3], k="1,3,5", repeats=3,
                         dtype="bfloat16", tune=["ngram lookup 2-4", "eagle3 smollm2-135m-eagle3"]),
    # chat in float32 at k = 1..5: ngram and the EAGLE-3 head (the tuned drafters; the draft model is only in the
    # bfloat16 sweep above, kept for it), about 111 minutes on a 2-core Intel Xeon; the EAGLE-3 tune about 81
    # more, the ngram tune about 73.
    "smollm2-chat-f32": dict(prompts="builtin:chat", drafters=[NGRAM_2_4, EAGLE3], k="1,2,3,4,5", repeats=3,
                             dtype=None, tune=["eagle3 smollm2-135m-eagle3", "ngram lookup 2-4"]),
    # code: about 40 minutes for the grid in float32 (the demo model's default), then the tune.
    "smollm2-code": dict(prompts="builtin:code", drafters=[NGRAM_2_4], k="1,2,3,4,5", repeats=3, dtype=None,
                         tune=["ngram lookup 2-4"]),
}
COMMON = ["--concurrency", "1,2,4,8,16", "--num-requests", "16", "--max-tokens", "64"]


def main() -> None:
    model = str(ensure_demo_model().relative_to(REPO_DIR))
    for name, s in SWEEPS.items():
        out = f"sample_runs/sweeps/{name}"
        cmd = [sys.executable, "-m", "specviz", "sweep", "--model", model, "--prompts", s["prompts"], "--k", s["k"],
               *[a for d in s["drafters"] for a in ("--drafter", json.dumps(d))], *COMMON,
               *(["--dtype", s["dtype"]] if s["dtype"] else []), "--repeats", str(s["repeats"]), "--out", out]
        _run(cmd)
        for drafter in s["tune"]:
            _run([sys.executable, "-m", "specviz", "tune", out, "--drafter", drafter, "--repeats", "3"])


def _run(cmd: list[str]) -> None:
    """Run a specviz command from the repo root, printed first, its output on the terminal."""
    print("$ " + shlex.join(["python", *cmd[1:]]), flush=True)
    subprocess.run(cmd, cwd=REPO_DIR, check=True)


if __name__ == "__main__":
    main()
