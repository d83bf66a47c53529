"""Try every speculative decoding method the installed vLLM knows, on this machine, and record what happened.

    .venv/bin/python scripts/try_methods.py                      # all methods, every target
    .venv/bin/python scripts/try_methods.py --methods eagle,eagle3 --targets tiny --out /tmp/t.json
    .venv/bin/python scripts/try_methods.py --targets tiny-mimo,demo-mimo,gemma4 --merge   # re-try the MTP families

For each (method, target) it starts a real vLLM server with specviz's tracer (one at a time: two
cores do not run two engines), streams 2 greedy prompts of 16 tokens through it and checks that
the target verified drafts (summarize(run).num_drafts > 0). A method "ran" only then. When the
server does not start, or dies, the root exception vLLM logged is recorded (read from the whole
server log, not the generic "Engine core initialization failed"). A plain server per target
gives the greedy output every speculative run must reproduce.

Targets: the demo model (SmolLM2-135M-Instruct) and a tiny random-weight 2-layer Llama
(specviz.testing.tiny_models), with drafters built on the fly by specviz.testing.draft_heads
(nothing downloaded). The MTP families need targets of their own, tried with the MTP methods
only (MTP_TARGETS): the demo model's MiMo form (one untrained MTP layer), a tiny MiMo whose
hand-laid MTP layer agrees with it, and a tiny Gemma 4 target with its assistant (plus one
with ordered embeddings, which cannot run on CPU) (specviz.testing.mtp_models).
Writes sample_runs/method_trials.json (see --out); --merge keeps the trials of that file that this
run did not redo, each with the date it was recorded.

Some methods get a second trial, listed after the first with the same method name:
- suffix, with --arctic-site DIR: arctic-inference goes on that server's PYTHONPATH only, so the
  venv stays as installed. It has no wheel, only an sdist whose CMake build does not find this
  venv's Python headers by itself; what built it here (sample_runs/method_trials.json):
      export CMAKE_ARGS="-DPython_EXECUTABLE=$PWD/.venv/bin/python3 -DPython_INCLUDE_DIR=<python>/include/python3.11"
      .venv/bin/pip wheel --no-deps --build-constraint <file: torch==2.13.0+cpu> arctic-inference==0.3.0 -w W
      .venv/bin/pip install --no-deps --target DIR W/arctic_inference-0.3.0-*.whl
- dspark: with VLLM_USE_V2_MODEL_RUNNER=1, since vLLM's V1 model runner refuses it.
custom_class is served `specviz.testing.draft_heads.LastTokenLookupProposer`. Configs are built without
SpecConfig.from_dict's checks (specviz's catalog refuses some of them, e.g. gemma4_mtp without a
model): the point is what vLLM itself says.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from specviz.config import ConfigError, SpecConfig, short_model_name
from specviz.files import REPO_DIR, SAMPLE_RUNS_DIR
from specviz.metrics import summarize
from specviz.serving.local import LocalServer
from specviz.serving.recording import load_tokenizer, record
from specviz.serving.server import EngineError, local_device, vllm_version
from specviz.testing import draft_heads
from specviz.vllm_methods import vllm_speculative_methods

K = 3
MAX_TOKENS = 16
PROMPTS = ["Explain why the sky is blue to a ten-year-old.", "List the days of the week."]
START_TIMEOUT_S = 600
RECORD_TIMEOUT_S = 300
TINY = "tiny-llama-2L"
TINY_DRAFT = "tiny-llama-1L-draft"
CUSTOM_PROPOSER = "specviz.testing.draft_heads.LastTokenLookupProposer"


def _arctic_version(site: Path) -> str:
    found = sorted(site.glob("arctic_inference-*.dist-info"))
    return found[-1].name.removeprefix("arctic_inference-").removesuffix(".dist-info") if found else "?"


# ---- targets and drafters ----------------------------------------------------------------------


# The MTP targets are tried with these methods only: every other method was tried on the Llamas.
MTP_TARGETS = {"tiny-mimo": ("mtp", "mimo_mtp"), "demo-mimo": ("mtp",), "gemma4": ("mtp", "gemma4_mtp")}
TINY_MIMO = "tiny-mimo-2L"
TINY_GEMMA4 = "tiny-gemma4-2L"
ALL_TARGETS = "tiny,demo,tiny-mimo,demo-mimo,gemma4"


def build_targets(work: Path, which: list[str]) -> dict[str, dict]:
    """{folder name: {"path", "dtype", "draft", "methods"}} for the requested targets ("methods": None = all)."""
    from specviz.demo_model import ensure_demo_mimo_model, ensure_demo_model
    from specviz.testing.mtp_models import build_tiny_gemma4_pair, build_tiny_mimo
    from specviz.testing.tiny_models import build_tiny_pair

    demo = ensure_demo_model(progress=lambda m: print(f"  demo model: {m}", flush=True))
    targets: dict[str, dict] = {}
    tiny_dir = work / "models"
    if not (tiny_dir / TINY).is_dir():
        target, draft = build_tiny_pair(tiny_dir / "pair", tokenizer_from=demo)
        shutil.move(str(target), tiny_dir / TINY)
        shutil.move(str(draft), tiny_dir / TINY_DRAFT)
        shutil.rmtree(tiny_dir / "pair", ignore_errors=True)
    if "tiny" in which:
        targets[TINY] = {"path": tiny_dir / TINY, "dtype": "float32", "draft": tiny_dir / TINY_DRAFT}
    if "demo" in which:
        # No packaged model shares SmolLM2's tokenizer; the tiny draft does (same vocabulary). float32:
        # in bfloat16 near-tied logits can flip between a one-row and a (k+1)-row forward pass, and
        # then greedy output differs from the plain server's for reasons that are not the drafter's.
        targets[demo.name] = {"path": demo, "dtype": "float32", "draft": tiny_dir / TINY_DRAFT}
    if "tiny-mimo" in which:
        path = tiny_dir / TINY_MIMO
        if not (path / "config.json").is_file():
            build_tiny_mimo(path, tokenizer_from=demo)
        targets[TINY_MIMO] = {"path": path, "dtype": "float32", "draft": None, "methods": MTP_TARGETS["tiny-mimo"],
                              "mtp_label": "the target's own hand-laid MTP layer (passes the next token's embedding; "
                                           "agrees with this target) (specviz.testing.mtp_models.build_tiny_mimo)"}
    if "demo-mimo" in which:
        path = ensure_demo_mimo_model(progress=lambda m: print(f"  demo model (MiMo form): {m}", flush=True))
        targets[path.name] = {"path": path, "dtype": "float32", "draft": None, "methods": MTP_TARGETS["demo-mimo"],
                              "mtp_label": "the target's own MTP layer, UNTRAINED (random, seed 0): the demo model's "
                                           "MiMo form (specviz demo-model --mtp)"}
    if "gemma4" in which:
        gemma_dir = tiny_dir / TINY_GEMMA4
        if not (gemma_dir / "gemma4-target" / "config.json").is_file():
            build_tiny_gemma4_pair(gemma_dir, tokenizer_from=demo)
            build_tiny_gemma4_pair(gemma_dir, tokenizer_from=demo, use_ordered_embeddings=True)
        targets[TINY_GEMMA4] = {"path": gemma_dir / "gemma4-target", "dtype": "float32", "methods": MTP_TARGETS["gemma4"],
                                "draft": gemma_dir / "gemma4-assistant",
                                "ordered_draft": gemma_dir / "gemma4-assistant-ordered"}
    return targets


def _build_mlp_speculator(dest: Path, target: Path) -> Path:
    """An MLPSpeculator checkpoint (IBM layout) for `target`; vLLM 0.32 has no V1 proposer for it."""
    import torch
    from safetensors.torch import save_file

    config = json.loads((target / "config.json").read_text())
    hidden, vocab = config["hidden_size"], config["vocab_size"]
    g = torch.Generator().manual_seed(0)
    tensors = {}
    for i in range(K):
        tensors[f"emb.{i}.weight"] = torch.randn(vocab, hidden, generator=g) * 0.02
        tensors[f"proj.{i}.weight"] = torch.randn(hidden, hidden, generator=g) / hidden**0.5
        tensors[f"head.{i}.weight"] = torch.randn(vocab, hidden, generator=g) * 0.02
        tensors[f"ln.{i}.weight"] = torch.ones(hidden)
        tensors[f"ln.{i}.bias"] = torch.zeros(hidden)
    dest.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(dest / "model.safetensors"), metadata={"format": "pt"})
    (dest / "config.json").write_text(json.dumps({
        "architectures": ["MLPSpeculatorPreTrainedModel"], "model_type": "mlp_speculator",
        "vocab_size": vocab, "emb_dim": hidden, "inner_dim": hidden, "n_predict": K,
        "top_k_tokens_per_head": [1] * K, "n_candidates": 1, "tie_weights": False, "scale_input": False,
    }, indent=2))
    return dest


def _build_dspark(dest: Path, target: Path) -> Path:
    """A random-weight Qwen3DSparkModel draft for `target`: the DFlash backbone plus a Markov head."""
    import torch
    from safetensors.torch import load_file, save_file

    draft_heads.build_dflash_head(dest, target)
    config = json.loads((dest / "config.json").read_text())
    tensors = load_file(str(dest / "model.safetensors"))
    rank, vocab = 16, config["vocab_size"]
    g = torch.Generator().manual_seed(1)
    dtype = tensors["norm.weight"].dtype
    tensors["markov_head.markov_w1.weight"] = (torch.randn(vocab, rank, generator=g) * 0.02).to(dtype)
    tensors["markov_head.markov_w2.weight"] = (torch.randn(vocab, rank, generator=g) * 0.02).to(dtype)
    save_file(tensors, str(dest / "model.safetensors"), metadata={"format": "pt"})
    config |= {"architectures": ["Qwen3DSparkModel"], "markov_rank": rank, "block_size": K,
               "dspark_noise_token_id": config["dflash_config"]["mask_token_id"]}
    config["specviz_drafter"]["kind"] = "dspark"
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return dest


DRAFT_LABELS = {
    "draft_model": "tiny random-weight 1-layer Llama draft with the same tokenizer (specviz.testing.tiny_models)",
    "eagle": "random-weight EAGLE head with a hand-laid token path (tiny, built by "
             "specviz.testing.draft_heads.build_eagle_head)",
    "eagle3": "random-weight EAGLE-3 head with a hand-laid token path (tiny, built by "
              "specviz.testing.draft_heads.build_eagle3_head)",
    "medusa": f"{K} Medusa heads that repeat the target's own next token "
              "(specviz.testing.draft_heads.build_medusa_head)",
    "extract_hidden_states": "none: vLLM's ExtractHiddenStatesModel caches the target's hidden states and "
                             "proposes the token just sampled (no checkpoint)",
    "mlp_speculator": "random-weight MLPSpeculator checkpoint (built by scripts/try_methods.py)",
    "dflash": "random-weight 1-layer DFlash draft, Qwen3 layout 'DFlashDraftModel' "
              "(specviz.testing.draft_heads.build_dflash_head)",
    "dspark": "random-weight 1-layer DSpark draft, 'Qwen3DSparkModel' (built by scripts/try_methods.py)",
    "custom_class": f"{CUSTOM_PROPOSER} (last-token lookup, no checkpoint)",
    "gemma4": "tiny random-weight Gemma4AssistantForCausalLM (1 layer, q_proj/q_norm/o_proj attention reading the "
              "target's KV cache) (specviz.testing.mtp_models.build_tiny_gemma4_pair); says nothing about real Gemma 4",
}


def spec_for(method: str, target: dict, work: Path) -> tuple[dict, str | None]:
    """(vLLM speculative_config dict, drafter label) for one trial; drafters are built on first use."""
    heads = work / "drafters" / short_model_name(target["path"])
    base = {"method": method, "num_speculative_tokens": K}
    path = target["path"]

    def built(name: str, build) -> str:
        dest = heads / name
        if not (dest / "config.json").is_file():
            build(dest)
        return str(dest)

    if target.get("ordered_draft") and method in ("mtp", "gemma4_mtp"):  # Gemma 4: the assistant is the drafter
        return base | {"model": str(target["draft"])}, DRAFT_LABELS["gemma4"]
    if target.get("mtp_label"):  # a MiMo: the target's own MTP layer
        return base, target["mtp_label"]
    if method in ("ngram", "ngram_gpu"):
        return base | {"prompt_lookup_min": 1, "prompt_lookup_max": 3}, None
    if method == "draft_model":
        return base | {"model": str(target["draft"])}, DRAFT_LABELS[method]
    if method == "eagle":
        return base | {"model": built("eagle", lambda d: draft_heads.build_eagle_head(d, path))}, DRAFT_LABELS[method]
    if method == "eagle3":
        return base | {"model": built("eagle3", lambda d: draft_heads.build_eagle3_head(d, path))}, DRAFT_LABELS[method]
    if method == "medusa":
        model = built("medusa", lambda d: draft_heads.build_medusa_head(d, path, num_heads=K))
        return base | {"model": model}, DRAFT_LABELS[method]
    if method == "mlp_speculator":
        return base | {"model": built("mlp_speculator", lambda d: _build_mlp_speculator(d, path))}, DRAFT_LABELS[method]
    if method == "dflash":
        return base | {"model": built("dflash", lambda d: draft_heads.build_dflash_head(d, path))}, DRAFT_LABELS[method]
    if method == "dspark":
        return base | {"model": built("dspark", lambda d: _build_dspark(d, path))}, DRAFT_LABELS[method]
    if method == "custom_class":
        return base | {"model": CUSTOM_PROPOSER}, DRAFT_LABELS[method]
    if method == "extract_hidden_states":
        # It needs the target layers to read; without a draft checkpoint they come in through
        # draft_model_config.hf_config (vLLM's SpeculativeConfig reads that dict for this method).
        layer_ids = draft_heads.default_aux_layer_ids(json.loads((path / "config.json").read_text())["num_hidden_layers"])
        return ({"method": method, "num_speculative_tokens": 1,
                 "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": layer_ids}}},
                DRAFT_LABELS[method])
    # suffix, mtp and the model-specific mtp names: no drafter of ours (mtp uses the target's own MTP layers)
    return base, None


# ---- the root error in a server log ------------------------------------------------------------

_PREFIX = re.compile(r"^(\(\w+(?: pid=\d+)?\)\s*)?((DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\S+\s+\S+\s+\[[^\]]*\]\s*)?")
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure))(?::\s?(.*))?$")
_WRAPPERS = ("Engine core initialization failed", "EngineCore failed to start", "Engine process failed to start")


def _elide_long_lists(text: str) -> str:
    """vLLM's "Supported architectures: dict_keys([...])" lists ~480 names: keep the message, count the names."""
    def short(m: re.Match) -> str:
        names = m.group(1).count(",") + 1
        return f"dict_keys([... {names} architectures, list elided by specviz ...])"
    return re.sub(r"dict_keys\(\[([^\]]{300,})\]\)", short, text)


def root_error(log: str) -> str | None:
    """The first exception vLLM raised (the root cause), as 'Type: message'; None if none was logged.

    pydantic's ValidationError carries the real reason on the following indented line(s), which
    are appended ("ValidationError: 1 validation error for SpeculativeConfig | Value error, ...").
    """
    lines = [_PREFIX.sub("", raw.rstrip()) for raw in log.splitlines()]
    for i, line in enumerate(lines):
        m = _EXCEPTION.match(line)
        if not m or any(w in line for w in _WRAPPERS):
            continue
        text = line
        if m.group(1).endswith("ValidationError"):  # the reason is on the next indented line(s)
            details = []
            for follow in lines[i + 1:i + 6]:
                if not follow.strip() or not follow.startswith((" ", "\t")):
                    break
                if "For further information" in follow:
                    continue
                details.append(follow.strip())
            if details:
                text += " | " + " | ".join(details)
        return _elide_long_lists(text)
    return None


# ---- one trial -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """A second way to try a method that failed as installed: extra environment for the server."""

    tag: str  # "" for the venv as installed
    env: dict[str, str]
    draft: str | None = None  # replaces the drafter label
    note: str = ""
    spec_update: tuple[tuple[str, str], ...] = ()  # replaces speculative_config fields


def variants_for(method: str, arctic_site: Path | None, target: dict | None = None) -> list[Variant]:
    plain = Variant("", {}, note="the venv as installed (arctic-inference is not in it)" if method == "suffix" else "")
    if method == "suffix" and arctic_site:
        version = _arctic_version(arctic_site)
        return [plain, Variant("arctic", {"PYTHONPATH": f"{REPO_DIR}:{arctic_site}"},
                               draft=f"arctic-inference {version} suffix trees",
                               note=f"arctic-inference {version} (no wheel exists: built from its sdist, installed "
                                    f"with pip --target into a separate folder) on the server's PYTHONPATH only; "
                                    f"the venv itself does not have it")]
    if method == "mtp" and target and target.get("ordered_draft"):  # Google's real assistants set it
        return [plain, Variant("ordered-embeddings", {}, spec_update=(("model", str(target["ordered_draft"])),),
                               draft="the same tiny assistant with use_ordered_embeddings true (as Google's E2B/E4B "
                                     "assistants)", note="use_ordered_embeddings true: vLLM captures CUDA graphs")]
    if method == "dspark":  # vLLM's V1 model runner refuses dspark; its V2 runner is the one that has it
        return [plain, Variant("v2-runner", {"VLLM_USE_V2_MODEL_RUNNER": "1"},
                               note="with VLLM_USE_V2_MODEL_RUNNER=1 (the V1 runner refuses dspark)")]
    return [plain]


def run_server(target: dict, spec_dict: dict | None, workdir: Path, tokenizer, env: dict[str, str] | None = None):
    """Start a traced server, record PROMPTS greedily; return (run | None, error | None, started, log)."""
    spec = None
    if spec_dict is not None:  # built directly, not with SpecConfig.from_dict: vLLM decides, not specviz's catalog
        d = dict(spec_dict)
        spec = SpecConfig(method=d.pop("method"), num_speculative_tokens=d.pop("num_speculative_tokens"),
                          model=d.pop("model", None), params=d)
    server = LocalServer(model=str(target["path"]), spec=spec, dtype=target["dtype"], workdir=workdir, env=env or {})
    run, error, started = None, None, False
    try:
        server.start(timeout_s=START_TIMEOUT_S)
        started = True
        with ThreadPoolExecutor(max_workers=1) as pool:
            future = pool.submit(record, server, PROMPTS, prompt_set="method-trial", concurrency=1,
                                 max_tokens=MAX_TOKENS, tokenizer=tokenizer)
            try:
                run = future.result(timeout=RECORD_TIMEOUT_S)
            except FutureTimeout:
                server.stop()
                run = future.result()
                error = f"no answer within {RECORD_TIMEOUT_S} s; server stopped"
    except EngineError as e:
        error = str(e).splitlines()[0]
    finally:
        server.stop()
    log = server.log_path.read_text(errors="replace") if server.log_path.exists() else ""
    if run is not None and not run.meta.complete and error is None:
        error = (run.meta.incomplete_reason or "incomplete run").splitlines()[0]
    return run, (root_error(log) or error), started, log


def failure_cause(method: str, error: str, spec_dict: dict) -> str:
    """'; why' for a failure whose cause specviz knows (a Llama without MTP layers; a GPU-only setting)."""
    from specviz.catalog import failure_cause as catalog_cause
    from specviz.catalog import platform_limits

    cause = catalog_cause(method, error, "cpu")
    if cause:
        return cause
    draft_config = None
    if spec_dict.get("model") and (Path(spec_dict["model"]) / "config.json").is_file():
        draft_config = json.loads((Path(spec_dict["model"]) / "config.json").read_text())
    limits = platform_limits(spec_dict, "cpu", draft_config)
    return f"; {limits[0].why}" if limits else ""


def one_trial(method: str, name: str, target: dict, work: Path, tokenizer, baseline, variant: Variant) -> dict:
    """Try `method` on one target; the trial's record (see the module docstring)."""
    t0 = time.time()
    label = method + (f" ({variant.tag})" if variant.tag else "")
    try:
        spec_dict, draft = spec_for(method, target, work)
    except Exception as e:  # a drafter we could not build: record why, go on
        print(f"[{name}] {label:<24} NOT RUN  {type(e).__name__}: {e}", flush=True)
        return {"method": method, "target": name, "draft": None, "ran": False, "error": f"{type(e).__name__}: {e}",
                "mean_acceptance_length": None,
                "note": "specviz could not build a drafter for this method; vLLM was not started"}
    draft = variant.draft or draft
    spec_dict = spec_dict | dict(variant.spec_update)
    logdir = work / "logs" / name / (method + (f"-{variant.tag}" if variant.tag else ""))
    try:
        run, error, started, log = run_server(target, spec_dict, logdir, tokenizer, env=variant.env)
    except ConfigError as e:
        run, error, started, log = None, f"specviz refused the config: {e}", False, ""
    summary = summarize(run) if run is not None else None
    drafts = summary.num_drafts if summary else 0
    ran = bool(started and summary and summary.complete and drafts > 0)
    if ran:
        same = baseline is not None and [r.output_token_ids for r in run.requests] == baseline
        note = (f"{drafts} drafts ({summary.num_draft_tokens} draft tokens, {summary.num_accepted_tokens} "
                f"accepted) verified over {len(PROMPTS)} prompts x {MAX_TOKENS} tokens, "
                f"k={spec_dict['num_speculative_tokens']}; trace totals "
                f"{'equal' if summary.counters_match else 'DIFFER from'} vLLM's counters; greedy output "
                f"{'identical to' if same else 'DIFFERENT from'} the plain target's")
        error = None
    elif started and summary and summary.complete:
        note = "server started and generated, but the target verified no drafts"
    elif started:
        note = "server started but the run did not complete"
    elif error and error.startswith("specviz refused"):
        note = "refused before any engine started"
    else:
        note = "server did not start"
    if not ran:
        note += failure_cause(method, error or "", spec_dict)
    if variant.note:
        note += f"; {variant.note}"
    if f"method `{method}` is deprecated and replaced with mtp" in log:
        note += f"; vLLM logged that method `{method}` is deprecated and replaced with mtp"
    status = (f"RAN      mean acceptance length {summary.mean_acceptance_length:.2f}" if ran
              else f"NOT RUN  {error or note}")
    print(f"[{name}] {label:<24} {status}  ({time.time() - t0:.0f} s)", flush=True)
    return {"method": method, "target": name, "draft": draft, "ran": ran, "error": error,
            "mean_acceptance_length": summary.mean_acceptance_length if ran else None, "note": note}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", help="comma-separated subset (default: every method this vLLM knows)")
    parser.add_argument("--targets", default=ALL_TARGETS, help=f"comma-separated, from {ALL_TARGETS}")
    parser.add_argument("--merge", action="store_true",
                        help="keep the trials already in --out that this run does not redo")
    parser.add_argument("--workdir", type=Path, help="models, drafters and server logs (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=SAMPLE_RUNS_DIR / "method_trials.json")
    parser.add_argument("--arctic-site", type=Path,
                        help="a folder where arctic-inference was installed with `pip install --target` (it has "
                             "no wheel: build it from the sdist). The suffix trial puts it on the server's "
                             "PYTHONPATH; without it the suffix trial shows what the venv as installed says.")
    args = parser.parse_args()
    if args.arctic_site and not (args.arctic_site / "arctic_inference").is_dir():
        parser.error(f"{args.arctic_site} holds no arctic_inference package")

    methods = list(vllm_speculative_methods())
    if args.methods:
        wanted = [m.strip() for m in args.methods.split(",") if m.strip()]
        unknown = [m for m in wanted if m not in methods]
        if unknown:
            parser.error(f"unknown method(s) {unknown}; this vLLM knows {methods}")
        methods = wanted
    work = args.workdir or Path(tempfile.mkdtemp(prefix="specviz-method-trials-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"vLLM {vllm_version()}; work dir {work}", flush=True)
    targets = build_targets(work, [t.strip() for t in args.targets.split(",")])

    platform_name, device = local_device()
    trials = []
    for name, target in targets.items():
        tokenizer = load_tokenizer(str(target["path"]))
        t0 = time.time()
        base_run, base_error, _, _ = run_server(target, None, work / "logs" / name / "baseline", tokenizer)
        if base_run is None or not base_run.meta.complete:
            print(f"[{name}] plain server failed: {base_error}", flush=True)
            baseline = None
        else:
            baseline = [r.output_token_ids for r in base_run.requests]
            print(f"[{name}] plain server: {sum(map(len, baseline))} tokens ({time.time() - t0:.0f} s)", flush=True)
        for method in methods:
            if target.get("methods") is not None and method not in target["methods"]:
                continue
            for variant in variants_for(method, args.arctic_site, target):
                trials.append(one_trial(method, name, target, work, tokenizer, baseline, variant))

    created_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for trial in trials:
        trial["recorded_at"] = created_at
    if args.merge and args.out.is_file():
        old = json.loads(args.out.read_text())
        redone = {(t["method"], t["target"]) for t in trials}
        kept = [t | {"recorded_at": t.get("recorded_at") or old["created_at"]} for t in old["trials"]
                if (t["method"], t["target"]) not in redone]
        for t in kept:  # failures recorded before specviz knew their cause get it now
            cause = "" if t["ran"] else failure_cause(t["method"], t["error"] or "", {"method": t["method"]})
            if cause and cause not in t["note"]:
                t["note"] += cause
        trials = kept + trials
        print(f"kept {len(kept)} trials from {args.out}", flush=True)
    result = {
        "kind": "specviz.method_trials",
        "vllm_version": vllm_version(),
        "platform": platform_name,
        "device_name": device,
        "created_at": created_at,
        "trials": trials,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out} ({sum(t['ran'] for t in trials)} of {len(trials)} trials ran)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
