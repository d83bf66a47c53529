"""Record the sample sweeps in sample_runs/sweeps/ with the SmolLM2 demo model on this machine.

    .venv/bin/python scripts/record_sweeps.py            # resumes where an interrupted recording stopped

Each sweep is what `python -m specviz sweep` records (the command for each is printed first), so a
user reproduces one on their own server with that command. Run it on a quiet machine: the figures
are throughput measurements.
"""

import json
import shlex
import subprocess
import sys
from pathlib import Path

from specviz.demo_model import ensure_demo_model
from specviz.train import drafter_spec

ROOT = Path(__file__).resolve().parent.parent
NGRAM_2_4 = {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}
# The teaching-sized drafters trained for SmolLM2 by `python -m specviz.train` (see docs/drafters.md).
DRAFT_MODEL = drafter_spec("draft_model", relative_to=ROOT)
EAGLE3 = drafter_spec("eagle3", relative_to=ROOT)
SWEEPS = {
    # Three repeats per cell: about 70 minutes for the chat sweep's 10 configurations here, 35 for code.
    "smollm2-chat": dict(prompts="builtin:chat", drafters=[NGRAM_2_4, DRAFT_MODEL, EAGLE3], k="1,3,5", repeats=3),
    "smollm2-code": dict(prompts="builtin:code", drafters=[NGRAM_2_4], k="1,2,3,5", repeats=3),
}
COMMON = ["--concurrency", "1,2,4,8,16", "--num-requests", "16", "--max-tokens", "64", "--dtype", "bfloat16"]


def main() -> None:
    model = str(ensure_demo_model().relative_to(ROOT))
    for name, s in SWEEPS.items():
        cmd = [sys.executable, "-m", "specviz", "sweep", "--model", model, "--prompts", s["prompts"], "--k", s["k"],
               *[a for d in s["drafters"] for a in ("--drafter", json.dumps(d))], *COMMON,
               "--repeats", str(s["repeats"]),
               "--out", f"sample_runs/sweeps/{name}"]
        print("$ " + shlex.join(["python", *cmd[1:]]), flush=True)
        subprocess.run(cmd, cwd=ROOT, check=True)


if __name__ == "__main__":
    main()
